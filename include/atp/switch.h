// The ATP switch dataplane (paper §3.5, §3.7, Fig. 6, 7, 17): a shared table of aggregators,
// per-job admission and aggregation roles, unicast and multicast forwarding. No I/O.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

struct SwitchConfig {
  bool atp_capable = true;                 // false: a plain switch that only forwards
  std::uint32_t num_aggregators = 4096;    // aggregators in the table
  std::uint16_t aggregator_width = 1024;   // int32 values per aggregator
  Duration reclaim_timeout = std::chrono::milliseconds(50);  // an aggregator untouched this long is free
};

// One aggregator (Fig. 6). The values live in AggregatorTable::values().
struct Aggregator {
  bool in_use = false;
  JobId job = 0;
  Seq seq = 0;
  std::uint32_t bitmap = 0;      // children already added (bitmap0 or bitmap1 positions)
  std::uint8_t counter = 0;      // number of children added
  bool ecn = false;              // OR of the ECN flags of the packets added or dropped here
  std::uint16_t value_count = 0;
  Time timestamp{};              // last time a packet was aggregated here
};

class AggregatorTable {
 public:
  AggregatorTable(std::uint32_t size, std::uint16_t width);
  std::uint32_t size() const { return static_cast<std::uint32_t>(slots_.size()); }
  std::uint16_t width() const { return width_; }
  Aggregator& at(std::uint32_t i) { return slots_[i]; }
  const Aggregator& at(std::uint32_t i) const { return slots_[i]; }
  std::span<std::int32_t> values(std::uint32_t i) { return {values_.data() + std::size_t(i) * width_, width_}; }
  void release(std::uint32_t i);  // all fields back to empty
  std::uint32_t in_use() const { return in_use_; }
  void claim(std::uint32_t i, JobId job, Seq seq, std::uint16_t value_count, Time now);

 private:
  std::uint16_t width_;
  std::vector<Aggregator> slots_;
  std::vector<std::int32_t> values_;  // size() x width(), row-major
  std::uint32_t in_use_ = 0;
};

// Where this switch aggregates a job: for gradient packets heading to `ps` whose
// edge_switch_identifier equals `level` (0: first-level, worker rack; 1: second-level, PS rack).
struct AggregationRole {
  Address ps = 0;
  std::uint8_t level = 0;
};

struct SwitchJobEntry {
  JobId job = 0;
  std::vector<PortId> admitted_ports;   // ingress ports this job's packets may arrive on
  std::vector<AggregationRole> roles;   // empty: the switch only forwards this job
};

struct SwitchJobCounters {
  std::uint64_t aggregations = 0;    // gradient packets added into an aggregator
  std::uint64_t completions = 0;     // aggregates completed at fan-in and sent on
  std::uint64_t collisions = 0;      // packets forwarded because the aggregator was held by another fragment
  std::uint64_t resend_flushes = 0;  // aggregators flushed or dropped by a resend (Fig. 17)
  std::uint64_t duplicates = 0;      // packets dropped because their bitmap was already in (Fig. 7 box 7)
  std::uint64_t forwarded = 0;       // packets sent on without aggregation (incl. acks, float packets)
  std::uint64_t deallocations = 0;   // aggregators freed by a matching parameter packet
  std::uint64_t reclaimed = 0;       // aggregators of this job freed by the timestamp timeout
  std::uint64_t ecn_merged = 0;      // ECN-marked packets whose mark was OR-ed into an aggregator
};

struct SwitchCounters {
  std::uint64_t packets = 0;         // packets processed
  std::uint64_t malformed = 0;       // failed decode_header; dropped
  std::uint64_t unknown_job = 0;     // job not installed at this ATP switch; dropped
  std::uint64_t not_admitted = 0;    // job's packet on a port not in its admission list; dropped
  std::uint64_t no_route = 0;        // no unicast route or multicast group for dst; dropped
  std::uint64_t too_wide = 0;        // value_count above the aggregator width; dropped
  std::uint64_t reclaimed = 0;       // aggregators freed by the timestamp timeout, all jobs
};

class SwitchPipeline {
 public:
  explicit SwitchPipeline(const SwitchConfig& config);

  // Forwarding state, installed by the control plane (the job plan computes it).
  void add_route(Address dst, PortId port);
  void add_multicast_group(Address group, std::vector<PortId> ports);
  void install_job(const SwitchJobEntry& entry);  // replaces an entry with the same job id
  // Removes the job and frees its aggregators. Returns false if it was not installed.
  bool remove_job(JobId job);

  // Processes one packet that arrived on `ingress` at `now`. The packet may be rewritten in
  // place (flags, bitmaps, aggregated values) before being sent; `out` receives zero or more
  // sends. Malformed or unauthorised packets are counted and dropped; this never throws.
  void process(PortId ingress, std::span<std::uint8_t> packet, Time now, PortSink& out);

  // Frees every aggregator whose timestamp is older than the reclaim timeout (the control
  // plane's sweep; the dataplane also reclaims lazily when a packet touches a stale one).
  void on_timeout(Time now);
  Time next_deadline() const;  // kNever when no aggregator is held

  const SwitchConfig& config() const { return config_; }
  const AggregatorTable& table() const { return table_; }
  const SwitchCounters& counters() const { return counters_; }
  // Counters of `job` (zeros if never seen); kept after remove_job so that runs can report them.
  SwitchJobCounters job_counters(JobId job) const;
  const std::unordered_map<JobId, SwitchJobCounters>& all_job_counters() const { return job_counters_; }

 private:
  struct JobState {
    std::vector<PortId> admitted_ports;
    std::vector<AggregationRole> roles;
  };

  void forward(const Header& h, PortId ingress, std::span<const std::uint8_t> packet, PortSink& out);
  void process_gradient(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet,
                        Time now, PortSink& out);
  void process_parameter(PortId ingress, const Header& h, std::span<const std::uint8_t> packet, Time now,
                         PortSink& out);
  bool is_stale(const Aggregator& a, Time now) const;
  void reclaim(std::uint32_t index);

  SwitchConfig config_;
  AggregatorTable table_;
  std::unordered_map<Address, PortId> routes_;
  std::unordered_map<Address, std::vector<PortId>> multicast_groups_;
  std::unordered_map<JobId, JobState> jobs_;
  SwitchCounters counters_;
  std::unordered_map<JobId, SwitchJobCounters> job_counters_;
  Time last_sweep_{};
};

}  // namespace atp
