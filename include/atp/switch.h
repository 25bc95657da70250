// The ATP switch dataplane (paper §3.5, §3.7, Fig. 6, 7, 17): a shared table of aggregators,
// per-job admission and aggregation roles, unicast and multicast forwarding; and Rina's mode for
// the ToR of a rack that is one ring member (docs/rina.md). No I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

struct SwitchConfig {
  bool atp_capable = true;               // false: a plain switch that only forwards
  std::uint32_t num_aggregators = 4096;  // aggregators in the table
  // int32 values per aggregator: the widest ATP packet, so that the switch never bounds what the
  // path's MTU allows (plan.h fragment_width: 2234 values on 9000-byte frames, 4096 on loopback).
  // Per-packet costs dominate a software switch, so wider packets move more values for the same
  // work; the table's memory is touched only where aggregators are used.
  std::uint16_t aggregator_width = kMaxValuesPerPacket;
  // An aggregator not aggregated into for this long counts as free (§3.7); zero or less: never.
  // Longer than a worker's usual RTO, so that a partial sum waiting for a backed-off worker is
  // mostly not wiped before that worker's resend arrives. Not longer than the longest backoff
  // (WorkerConfig: an eighth of the 2 s progress timeout, 250 ms): a sum wiped then is recovered
  // by the workers' resends, as after any loss (issue 13's note).
  Duration reclaim_timeout = std::chrono::milliseconds(100);
};

// The longest reclaim timeout a switch config or scenario file takes: 2^40 microseconds (about
// 12.7 days). Below it (2^50 nanoseconds), microseconds read as a double round back to the exact
// nanosecond, so a timeout written in microseconds reads back the same.
inline constexpr std::int64_t kMaxReclaimTimeoutUs = std::int64_t{1} << 40;

// A map from fragments (<job, seq>) to a number, of a capacity fixed at construction, that never
// allocates after it: open addressing with linear probing, at most half full, backward-shift
// deletion (no tombstones). Where a switch finds an allocated fragment's aggregator.
class FragmentMap {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;  // "not there" from find()

  explicit FragmentMap(std::uint32_t capacity);  // entries it may hold at once
  std::uint32_t find(JobId job, Seq seq) const;  // the value, or kNone
  // Adds <job, seq> -> value (value != kNone). The fragment must not be there, nor the map full.
  void insert(JobId job, Seq seq, std::uint32_t value);
  void erase(JobId job, Seq seq);  // no-op if it is not there

 private:
  struct Entry {
    std::uint64_t key = 0;  // (job << 32 | seq) + 1; 0: empty
    std::uint32_t value = kNone;
  };
  static std::uint64_t key_of(JobId job, Seq seq) { return (std::uint64_t{job} << 32 | seq) + 1; }
  std::size_t home_of(std::uint64_t key) const;
  std::vector<Entry> entries_;
};

// One aggregator (Fig. 6). The values live in AggregatorTable::values().
struct Aggregator {
  bool in_use = false;
  JobId job = 0;
  Seq seq = 0;
  std::uint32_t bitmap = 0;  // children already added (their slots); Rina: rack members
  std::uint8_t counter = 0;  // number of children added
  bool ecn = false;          // OR of the ECN flags of the packets added or dropped here
  std::uint16_t value_count = 0;
  // Header::round_shape of the packet that claimed it: packets with another one are never added.
  std::uint16_t round_shape = 0;
  // Rina: the claiming packet's Header::round_fragments, its round's fragment count; nor are packets with
  // another one (a worker that all-reduces another size cuts the ring's chunks elsewhere).
  std::uint32_t round_fragments = 0;
  // The first packet's Header::scale_exponent (one added at another exponent saturates the sum,
  // which sends the fragment down the PS's float32 path) and the largest magnitude added.
  std::int16_t scale_exponent = 0;
  std::int16_t magnitude = kNoMagnitude;
  // Claimed for a packet with Header::allocate: found by <job, seq> (AggregatorTable::find), not
  // by the packet's aggregator_index.
  bool allocated = false;
  Time timestamp{};  // last time a packet was aggregated here
};

// The switch's aggregators. Held aggregators are also kept on a list in the order they were
// last aggregated into (claim or touch), so the oldest one, which times out first, is found in
// O(1) and the reclaim sweep only visits stale ones; free ones on a list in the order they were
// freed, so that the one free the longest is found in O(1). Aggregators claimed with `allocated`
// are also in a hash index by <job, seq> (find). Each job's held aggregators are counted, so
// that the table knows who holds more than an even share of it. `now` must not go backwards.
class AggregatorTable {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;  // "no aggregator" from oldest()

  AggregatorTable(std::uint32_t size, std::uint16_t width);
  std::uint32_t size() const { return static_cast<std::uint32_t>(slots_.size()); }
  std::uint16_t width() const { return width_; }
  Aggregator& at(std::uint32_t i) { return slots_[i]; }
  const Aggregator& at(std::uint32_t i) const { return slots_[i]; }
  // The value row of aggregator i (width() values). Only the first value_count values of a held
  // aggregator are meaningful; rows are not cleared (the first packet of a fragment overwrites them).
  std::span<std::int32_t> values(std::uint32_t i) { return {values_.data() + std::size_t(i) * width_, width_}; }
  std::span<const std::int32_t> values(std::uint32_t i) const {
    return {values_.data() + std::size_t(i) * width_, width_};
  }
  void release(std::uint32_t i);  // all fields back to empty; no-op on a free aggregator
  std::uint32_t in_use() const { return in_use_; }
  // Holds aggregator i for <job, seq> (releasing whatever it held), empty, timestamp = now.
  // `allocated`: findable by <job, seq>; the caller makes sure no other aggregator is (find first).
  void claim(std::uint32_t i, JobId job, Seq seq, std::uint16_t value_count, std::uint16_t round_shape, Time now,
             bool allocated = false);
  // The aggregator claimed `allocated` for <job, seq>, or kNone. O(1) expected.
  std::uint32_t find(JobId job, Seq seq) const;
  // The aggregator free the longest (never held ones first, lowest first), or kNone: where an
  // allocated fragment goes. Unlike offer(), leaves the free list as it is.
  std::uint32_t longest_free() const { return free_.oldest; }
  // Aggregators `job` holds, and jobs that hold any.
  std::uint32_t held_by(JobId job) const { return held_by_job_.empty() ? 0 : held_by_job_[job]; }
  std::uint32_t holding_jobs() const { return holding_jobs_; }
  // Records an aggregation into held aggregator i at `now` (timestamp = now).
  void touch(std::uint32_t i, Time now);
  // The held aggregator with the oldest timestamp, or kNone when none is held.
  std::uint32_t oldest() const { return held_.oldest; }
  // What a collision offers instead of the aggregator it found busy: the one free the longest
  // (never held ones first, lowest first), as the least likely to be some fragment's usual place,
  // then counted as freed now, so that the collisions of a burst get different ones. kNone when
  // all are held.
  std::uint32_t offer();

 private:
  // A std::allocator that default-initialises: resizing the value rows leaves them untouched,
  // so a large table costs address space, not memory, until its aggregators are used.
  template <class T>
  struct UninitializedAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
      using other = UninitializedAllocator<U>;
    };
    UninitializedAllocator() = default;
    template <class U>
    UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
  };
  struct Link {  // neighbours on the oldest-first list it is on (kNone at the ends)
    std::uint32_t older = kNone;
    std::uint32_t newer = kNone;
  };
  struct List {  // an oldest-first list through links_
    std::uint32_t oldest = kNone;
    std::uint32_t newest = kNone;
  };
  void unlink(List& list, std::uint32_t i);
  void append_newest(List& list, std::uint32_t i);

  std::uint16_t width_;
  std::vector<Aggregator> slots_;
  std::vector<std::int32_t, UninitializedAllocator<std::int32_t>> values_;  // size() x width(), row-major
  std::vector<Link> links_;  // each aggregator is on one list: held_ or free_
  List held_;                // by the time last aggregated into
  List free_;                // by the time freed
  std::uint32_t in_use_ = 0;
  FragmentMap index_;                       // aggregators claimed allocated, by <job, seq>
  std::vector<std::uint32_t> held_by_job_;  // by JobId (65,536 entries; empty for a table of none)
  std::uint32_t holding_jobs_ = 0;          // entries of held_by_job_ above 0
};

// A child of a switch's node in a job's aggregation tree (docs/protocol.md "Aggregation tree"):
// a worker (fan_in 1) or a switch below that aggregates too. Its slot is its place in the list.
struct TreeChild {
  std::uint16_t node = 0;
  std::uint8_t fan_in = 1;  // its own children: a whole sum of it carries bitmap whole_bitmap(fan_in)
};

// Where this switch aggregates a job: it is node `node` of the job's aggregation tree towards
// `ps` and adds the whole sums of `children` (at most 32) that head there.
struct AggregationRole {
  Address ps = 0;
  std::uint16_t node = 0;
  std::vector<TreeChild> children;
};

struct SwitchJobEntry {
  JobId job = 0;
  std::vector<PortId> admitted_ports;  // ingress ports this job's packets may arrive on
  std::vector<AggregationRole> roles;  // empty: the switch only forwards this job
  // Rina (docs/rina.md): this switch is the ToR of a rack that is one member of the job's ring;
  // its workers' ports in rank order (bit i of a contribution's bitmap is rina_members[i]).
  // Empty: the job's Rina packets are forwarded by dst.
  std::vector<PortId> rina_members;
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
  // Gradient packets that met an aggregator holding their <job, seq> with another round_shape
  // (the job's workers all-reduce tensors of different sizes), so were kept apart: the
  // aggregator's partial sum and the packet both went on to the PS.
  std::uint64_t round_shape_mismatches = 0;
  // Allocated fragments (Header::allocate) refused an aggregator because the job held more than an
  // even share of a contended table, and so sent on to the PS marked ECN: the table brake.
  std::uint64_t table_marks = 0;
};

struct SwitchCounters {
  std::uint64_t packets = 0;  // packets processed
  // Failed decode_header; or a gradient from a child of this switch's node whose fan-in is not
  // the child's or whose bitmap is empty or holds bits past it, or whose value count differs
  // from the aggregator holding its fragment; or a Rina contribution whose bitmap is not its
  // port's bit or whose fan-in is not the rack's. Dropped.
  std::uint64_t malformed = 0;
  std::uint64_t unknown_job = 0;   // job not installed at this ATP switch; dropped
  std::uint64_t not_admitted = 0;  // job's packet on a port not in its admission list; dropped
  std::uint64_t no_route = 0;      // no unicast route or multicast group for dst; dropped
  std::uint64_t too_wide = 0;      // a gradient this switch would aggregate wider than its aggregators; dropped
  std::uint64_t reclaimed = 0;     // aggregators freed by the timestamp timeout, all jobs
};
// Counters of several pipelines (a switch's dataplane threads, or a switch and the pipelines a
// restart threw away) added up, field by field.
SwitchCounters& operator+=(SwitchCounters& sum, const SwitchCounters& c);
SwitchJobCounters& operator+=(SwitchJobCounters& sum, const SwitchJobCounters& c);

// A share of a switch's aggregator table, for a dataplane over several threads (SwitchDaemon):
// slice `index` of `count` holds the aggregators g (of SwitchConfig::num_aggregators) with
// g % count == index, aggregator g in row g / count of its own table. Each packet goes to the
// pipeline of its aggregator's slice (slice_of). One that reaches another slice still aggregates
// exactly, as every aggregator is matched on <job, seq>: it only meets a row of another fragment.
struct TableSlice {
  std::uint32_t index = 0;
  std::uint32_t count = 1;  // divides num_aggregators
};

// The slice (of `count`) holding the aggregator a header's aggregator_index names in a table of
// `num_aggregators` (> 0).
inline std::uint32_t slice_of(std::uint32_t aggregator_index, std::uint32_t num_aggregators, std::uint32_t count) {
  return aggregator_index % num_aggregators % count;
}

class SwitchPipeline {
 public:
  // A switch that is not ATP-capable gets an empty aggregator table (it never aggregates).
  // `slice` (for a dataplane over several threads): the share of the table this pipeline holds.
  explicit SwitchPipeline(const SwitchConfig& config, TableSlice slice = {});

  // Forwarding state, installed by the control plane (the job plan computes it).
  void add_route(Address dst, PortId port);
  // Packets to `dst` are then dropped as no_route (a host detached from the switch at run time).
  // Returns false if there was no route to `dst`.
  bool remove_route(Address dst);
  void add_multicast_group(Address group, std::vector<PortId> ports);
  // Packets to `group` are then dropped as no_route. Returns false if there was no such group.
  bool remove_multicast_group(Address group);
  // Replaces an entry with the same job id. Aggregators the job holds stay held (its parameter
  // packets or the timeout free them). Throws std::invalid_argument for a role with more than 32
  // children or a child's fan-in outside 1..32 (the control plane's codec refuses those first).
  void install_job(const SwitchJobEntry& entry);
  // Removes the job and frees its aggregators. Returns false if it was not installed.
  bool remove_job(JobId job);

  // Processes one packet that arrived on `ingress` at `now`. The packet may be rewritten in
  // place (flags, bitmaps, aggregated values) before being sent; `out` receives zero or more
  // sends. Malformed or unauthorised packets are counted and dropped; this never throws.
  void process(PortId ingress, std::span<std::uint8_t> packet, Time now, PortSink& out);

  // Frees every aggregator whose timestamp is at least the reclaim timeout before `now` (the
  // control plane's sweep; the dataplane also reclaims lazily when a packet touches a stale one).
  // An ATP aggregator still waiting for children sends its partial sum on to the PS first, as a
  // resend flushes it (docs/protocol.md "Switch", step 1): a child that is late, not lost, then
  // costs its own delay, not every other worker's resend.
  void on_timeout(Time now, PortSink& out);
  // When the oldest held aggregator goes stale: oldest timestamp + reclaim timeout. kNever when
  // no aggregator is held or reclaim is disabled. O(1).
  Time next_deadline() const;

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
    std::vector<PortId> rina_members;
    SwitchJobCounters* counters = nullptr;  // into job_counters_ (node-based map: stable address)
  };

  // Sends `packet` towards h.dst: to every port of its multicast group except `ingress`, or to
  // its unicast route. Returns false (and counts no_route) when dst has neither.
  bool forward(const Header& h, PortId ingress, std::span<const std::uint8_t> packet, PortSink& out);
  void process_gradient(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet, Time now,
                        PortSink& out);
  // process_gradient's second half, for a child's whole sum (the child of `bit` in `role`) that is
  // no resend, at aggregator i (kNone: none free): Fig. 7 boxes 1-2 (claim it, or on to the PS)
  // and 4-6 (add the packet; once complete, the node's sum goes on).
  void aggregate_child(PortId ingress, Header& h, const JobState& job, const AggregationRole& role, std::uint32_t bit,
                       std::uint32_t i, std::span<std::uint8_t> packet, Time now, PortSink& out);
  // Fig. 7 box 1 -> box 2: a gradient packet whose aggregator is held by another fragment (or none
  // is free, or the table brake held it back: `braked`) goes on to the PS as a collided resend.
  void send_collided(PortId ingress, Header& h, bool braked, SwitchJobCounters& counters,
                     std::span<std::uint8_t> packet, PortSink& out);
  // Aggregator i's sum into `packet` and `h`: node role->node's (whole or partial) sum, or with
  // role nullptr, a Rina rack's.
  void write_sum(std::uint32_t i, const AggregationRole* role, Header& h, std::span<std::uint8_t> packet);
  // write_sum's two halves: h's node and fan_in from role (nullptr: round_fragments from the
  // aggregator), and the aggregator's values and the rest of its state into packet.
  void label_sum(std::uint32_t i, const AggregationRole* role, Header& h) const;
  void write_held(std::uint32_t i, Header& h, std::span<std::uint8_t> packet);
  // Aggregator i's sum on towards flushed.dst as a resend of its own, `flushed` already labelled
  // (label_sum), and the aggregator freed: flush_partial's and a reclaim's.
  void send_held(PortId ingress, Header flushed, std::uint32_t i, PortSink& out);
  // Aggregator i's sum on towards h.dst as a packet of its own (a resend: nothing on the way adds
  // it), and the aggregator freed. role: as write_sum's.
  void flush_partial(PortId ingress, const Header& h, const AggregationRole* role, std::uint32_t i, PortSink& out);
  // Fig. 17 boxes 2-7 for a resend whose aggregator i holds its fragment; `bit`: the packet is
  // the whole sum of the child of that bit.
  void flush_on_resend(PortId ingress, Header& h, const AggregationRole& role, std::optional<std::uint32_t> bit,
                       SwitchJobCounters& counters, std::uint32_t i, std::span<std::uint8_t> packet, PortSink& out);
  // A packet of aggregator i's <job, seq> whose round_shape differs from the aggregator's: sends
  // the held partial aggregate on to the PS, frees the aggregator, forwards the packet unadded.
  // role: as write_sum's.
  void separate_round_shapes(PortId ingress, Header& h, const JobState& job, const AggregationRole* role,
                             std::uint32_t i, std::span<std::uint8_t> packet, PortSink& out);
  void process_parameter(PortId ingress, const Header& h, const JobState& job, std::span<const std::uint8_t> packet,
                         Time now, PortSink& out);
  // A Rina packet of a job this switch admitted (docs/rina.md "The switch's Rina mode").
  void process_rina(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet, Time now,
                    PortSink& out);
  // A contribution or final from the rack's member `member`: aggregated, or sent on alone.
  void rina_aggregate(PortId ingress, std::size_t member, Header& h, const JobState& job,
                      std::span<std::uint8_t> packet, Time now, PortSink& out);
  // Aggregator i's sum (complete or not) on towards h.dst in `packet`, which must have room for
  // it; a complete final to every member port as well.
  void rina_send_sum(PortId ingress, Header& h, const JobState& job, std::uint32_t i, std::span<std::uint8_t> packet,
                     PortSink& out);
  // `packet` (h, its header) to every member port but `except`, addressed to the job's multicast group.
  static void to_members(const JobState& job, Header& h, PortId except, std::span<std::uint8_t> packet, PortSink& out);
  // A packet whose child is already in aggregator `a` (the network duplicated it): its ECN mark
  // still counts, its values do not.
  static void absorb_duplicate(Aggregator& a, const Header& h, SwitchJobCounters& counters);
  // Adds the packet's values into aggregator i (copies them if it is the first) and records it.
  void aggregate(std::uint32_t i, std::uint32_t bit, const Header& h, std::span<const std::uint8_t> packet,
                 SwitchJobCounters& counters, Time now);
  // The row of this pipeline's table that holds the aggregator `aggregator_index` names.
  std::uint32_t row_of(std::uint32_t aggregator_index) const {
    return aggregator_index % config_.num_aggregators / slice_.count;
  }
  bool is_stale(const Aggregator& a, Time now) const;
  // Where an allocated fragment's first packet goes: the aggregator free the longest, or in a
  // full table the oldest held one if it is stale (reclaimed); kNone when none is free.
  std::uint32_t allocatable(Time now, PortSink& out);
  // The table brake (docs/protocol.md "Sharing the table"): `job` holds more than an even share
  // among the jobs sharing the table (those holding any, and the job of last_collision_), and the
  // table is contended: fewer than 1/kBrakeFreeFraction of its aggregators are free, or another
  // job's fragment found none free lately (last_collision_).
  static constexpr std::uint32_t kBrakeFreeFraction = 8;
  bool over_share(JobId job) const;
  // Frees a stale aggregator and counts it for its job; an ATP partial sum goes on first (on_timeout).
  void reclaim(std::uint32_t index, PortSink& out);
  void reclaim_if_stale(std::uint32_t index, Time now, PortSink& out);

  SwitchConfig config_;
  TableSlice slice_;
  AggregatorTable table_;
  std::vector<std::uint8_t> flush_packet_;  // a partial aggregate sent besides the packet in hand
  // Per row: the packet that claimed it for an ATP role (its header with the node's `node` and
  // `fan_in`, and where it came in), so that a partial sum reclaimed by the timeout can go on to
  // the PS alone. Rina's rows: `atp` false.
  struct Claim {
    bool atp = false;
    Header header;
    PortId ingress = 0;
  };
  std::vector<Claim> claimed_by_;
  std::unordered_map<Address, PortId> routes_;
  std::unordered_map<Address, std::vector<PortId>> multicast_groups_;
  std::unordered_map<JobId, JobState> jobs_;
  SwitchCounters counters_;
  std::unordered_map<JobId, SwitchJobCounters> job_counters_;
  // Allocated fragments remembered until their parameter packet passes, or the oldest first once
  // the table's size of newer ones are remembered.
  class RememberedFragments {
   public:
    explicit RememberedFragments(std::uint32_t capacity) : map_(capacity), ring_(capacity) {}
    bool contains(JobId job, Seq seq) const { return map_.find(job, seq) != FragmentMap::kNone; }
    void insert(JobId job, Seq seq);  // no-op if it is there, or the capacity is 0
    void erase(JobId job, Seq seq);

   private:
    FragmentMap map_;  // fragment -> its place in ring_
    struct Remembered {
      bool valid = false;
      JobId job = 0;
      Seq seq = 0;
    };
    std::vector<Remembered> ring_;  // oldest first from next_
    std::uint32_t next_ = 0;
  };
  // Fragments that found no aggregator free, so that their other packets follow them to the PS
  // instead of claiming one freed meanwhile (it would hold a sum waiting for the packets gone
  // ahead, until a resend flushed it).
  RememberedFragments collided_;
  // Fragments whose partial sum a reclaim sent on (a child late by more than the reclaim
  // timeout): their late packets follow it to the PS for the same reason.
  RememberedFragments flushed_;
  // The last allocated fragment that found no aggregator free: its job wants more of the table.
  // It counts among the jobs sharing the table even while it holds none, and the table counts as
  // contended for the other jobs (over_share), until the table's size more aggregators have been
  // claimed since (its job went on at the PS, or stopped).
  struct LastCollision {
    bool valid = false;
    JobId job = 0;
    std::uint64_t since_claim = 0;  // claims_ then
  };
  LastCollision last_collision_;
  std::uint64_t claims_ = 0;  // allocated claims so far
};

}  // namespace atp
