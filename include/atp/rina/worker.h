// Rina's worker endpoint (docs/rina.md): one worker of a ring whose members are racks (their ToR
// adds the rack's values up) or single workers. It cuts a float32 tensor into fragments, sends
// its contributions to each fragment's reduce-scatter hop, receives and adds up the hops it
// carries, passes finished sums on round the allgather, acknowledges, resends, asks for what it
// missed, and redoes fragments whose exponent did not fit. A state machine: no I/O, no clock,
// like ATP's WorkerEndpoint: the two are the core's Endpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "atp/congestion.h"
#include "atp/endpoint.h"
#include "atp/fixed_point.h"
#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

struct RinaConfig {
  JobId job = 0;
  std::uint32_t rank = 0;        // this worker: an index into `workers`
  std::vector<Address> workers;  // every worker of the job, by rank
  // The ring: its members in ring order, each its workers' ranks in rank order (the first is the
  // agent). A member of two or more is a rack whose ToR adds their contributions up (the plan
  // installs it there); a member of one is an autonomous worker. Every rank is in one member.
  std::vector<std::vector<std::uint32_t>> members;
  std::uint16_t values_per_packet = kDefaultValuesPerPacket;
  double scale = kDefaultScale;  // the first round's exponent: initial_exponent(scale)
  // Fragment seq s uses switch aggregator s mod this (contiguous, not hashed): the smallest table
  // of the racks' ToRs. At least 1.
  std::uint32_t aggregator_slots = 1;
  CongestionConfig congestion;
  Duration retransmit_timeout = std::chrono::milliseconds(1);  // before a round trip is measured
  Duration min_retransmit_timeout = std::chrono::milliseconds(1);
  Duration max_retransmit_timeout = std::chrono::seconds(1);
  Duration progress_timeout = std::chrono::seconds(2);  // nothing new this long: the round fails
  Seq initial_seq = 0;                                  // the job's first fragment's (every worker's the same)
};

struct RinaStats {
  std::uint64_t packets_sent = 0;  // every kind, resends included
  std::uint64_t contributions_sent = 0;
  std::uint64_t gathers_sent = 0;  // allgather sends and request answers
  std::uint64_t retransmissions = 0;
  std::uint64_t fast_retransmits = 0;  // of those, before the RTO: overdue after a later send's ack, or probes
  std::uint64_t tail_probes = 0;       // of those, a clock's newest send again after a silence
  std::uint64_t host_queue_full = 0;   // on_host_queue_full calls while contributions were in flight
  std::uint64_t timeouts = 0;          // retransmission timeouts fired
  std::uint64_t requests_sent = 0;     // asks for a final this worker missed
  std::uint64_t merges = 0;            // hop sums (or pieces of them) added in as a carrier
  std::uint64_t overlaps_dropped = 0;  // pieces whose workers were already in; dropped whole
  std::uint64_t duplicates = 0;        // packets for what this worker already has
  std::uint64_t redone_fragments = 0;  // fragments sent round again at a better exponent
  std::uint64_t early_kept = 0;        // packets of a pass or round not started yet, kept for it
  std::uint64_t dropped = 0;           // malformed, other job, not for this worker, beyond what is kept
  std::uint64_t rounds_completed = 0;
  std::uint64_t final_values = 0;  // values of the finals this worker recorded (redo passes included)
};

// Why `config` cannot work (one sentence: rank outside the workers, members that do not partition
// the ranks or hold more than 32, values_per_packet outside 1..kMaxValuesPerPacket, a scale that
// is not positive and finite, no aggregator slot, a non-positive timeout), or nullopt.
std::optional<std::string> rina_config_error(const RinaConfig& config);

class RinaWorker final : public Endpoint {
 public:
  // Throws std::invalid_argument (rina_config_error's sentence) for a config that cannot work.
  explicit RinaWorker(RinaConfig config);
  ~RinaWorker() override;
  RinaWorker(RinaWorker&&) noexcept;
  RinaWorker& operator=(RinaWorker&&) noexcept;

  // Starts one allreduce of `input` (copied; the sum goes to result()). Requires state() ==
  // kIdle (returns false otherwise, or for more than 2^30 fragments). An empty input completes
  // at once. Every worker of the job must pass the same number of values.
  bool start(std::span<const float> input, Time now, PacketSink& out) override;
  // The same without a copy: `values` is read until the round ends and then holds the sums, so
  // that starting a round costs no pass over the tensor. `values` must stay alive and untouched
  // until the round ends; after a failure it holds the input. result() is `values`.
  bool start_in_place(std::span<float> values, Time now, PacketSink& out) override;
  void on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) override;
  void on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) override;
  // Call when now >= next_deadline(): resends, requests, and the progress timeout.
  void on_timeout(Time now, PacketSink& out) override;
  // The host's own queue (socket buffer, qdisc) refused packets the sink still holds: the path's
  // bottleneck is this host's link. Its windows take it as a switch's ECN mark.
  void on_host_queue_full(Time now) override;
  Time next_deadline() const override;

  WorkerState state() const override;
  const std::string& error() const override;       // when state() == kFailed: one sentence
  std::span<const float> result() const override;  // the sum over all workers once a round completed
  bool picks_exponents() const override { return true; }
  // The exponent of each fragment's int32 sum in the last round (fixed_point.h): result value i
  // of fragment f is dequantize_one(sum, 2^exponent).
  const std::vector<std::int16_t>& result_exponents() const override;
  // The exponents the next round's first pass will use for its first `fragments` fragments
  // (positions never reduced yet: the config's scale), which a redo pass may still change.
  std::vector<std::int16_t> next_exponents(std::uint32_t fragments) const override;
  const std::vector<std::uint32_t>& float_fragments() const override;  // none: no float path
  std::string_view protocol() const override { return "rina"; }
  JobId job() const override;
  Address self() const override;
  std::vector<Address> sources() const override;  // the job's workers
  std::uint16_t values_per_packet() const override;
  // A seq past every one this worker's ring may have used so far: its own round's and the next
  // round's, which a worker ahead of it may have begun. A ring re-formed from this one (a worker
  // gone, docs/rina.md "Failures") starts there (RinaConfig::initial_seq).
  Seq resume_seq() const override;
  // Until the job has been quiet for a quarter of the progress timeout (two of a missing final's
  // asks, sent at least every eighth of it), at most the whole of it, after which an asker has
  // failed anyway.
  Linger linger() const override;
  // The reduce-scatter's congestion window (packets), what the contributions in flight are held to.
  std::uint32_t window() const override;
  EndpointCounts counts() const override;
  std::vector<EndpointCounter> counters() const override;  // stats(), by field
  const RinaStats& stats() const;
  const RinaConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
