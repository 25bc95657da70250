// Which switch aggregator a fragment uses (paper §3.5-3.6): hosts compute
// HASH(job, seq) % numAggregators; after a collision the PS rehashes the index.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "atp/wire.h"

namespace atp {

enum class IndexPolicy : std::uint8_t {
  kHashed,  // HASH(job, seq) % n: the paper's text (§3.5)
  kLinear,  // seq % n: the baseline of the paper's Fig. 14
  // (home + seq % slots) % n, slots = the job's bound on sequence numbers in flight, home = where
  // its slots start (the plan's, or HASH(job)): the authors' code's distinct aggregators per job.
  // A job's in-flight fragments have distinct slots on distinct aggregators, each slot is reused,
  // and remaps are kept per slot (the PS's rehash is salted with the slot), so they settle.
  kHashedSlots,
  // The switch allocates: a fragment's first packet takes the aggregator free the longest, and the
  // fragment's other packets find it by <job, seq> (Header::allocate); a collision only ever means
  // a full table. The index, HASH(job, seq) % n as kHashed's, only picks a dataplane thread. The
  // default: a job can use the whole table while the others compute, and the switch's table brake
  // shrinks the windows of jobs over an even share of a full table (docs/protocol.md, "Sharing
  // the table"). A static share takes it as kLinear (SwitchML's slots).
  kAllocated,
};
// "hashed", "linear", "hashed_slots", "allocated": the names in scenario files and specs.
std::string_view to_string(IndexPolicy policy);
std::optional<IndexPolicy> parse_index_policy(std::string_view name);  // nullopt: not a name

// The aggregator indices a job may use: [first, first + count). ATP's dynamic sharing gives
// every job the whole table ({0, n}); static sharing (SwitchML-style, the baseline of the
// paper's Fig. 13a/14) gives each job a fixed slice of its own (plan.h, JobSpec::aggregator_share).
struct AggregatorRange {
  std::uint32_t first = 0;  // lowest index of the range
  std::uint32_t count = 1;  // aggregators in the range; must be > 0 where indices are derived

  bool contains(std::uint32_t index) const { return index - first < count; }  // unsigned: below first wraps
  friend bool operator==(const AggregatorRange&, const AggregatorRange&) = default;
};

// The index every worker of `job` derives for `seq` before any remapping: first + HASH(job, seq)
// % count (kHashed, kAllocated), first + seq % count (kLinear), or first + (home + seq % slots) %
// count (kHashedSlots, slots > 0). range.count must be > 0.
std::uint32_t base_aggregator_index(JobId job, Seq seq, AggregatorRange range, IndexPolicy policy,
                                    std::uint32_t slots = 1, std::uint32_t home = 0);

// Where a kHashedSlots job's slots start in a range of `count` aggregators when no plan placed it
// among the jobs it shares the table with: HASH(job) % count.
std::uint32_t hashed_slot_home(JobId job, std::uint32_t count);

// The PS's new index after a collision at `index`: first + HASH(index - first) % count, inside
// the range even for an index outside it, and different from `index` whenever count > 1 and
// `index` is in the range. A range of count 0 gives `first`.
// `salt` (kHashedSlots: the slot + 1; else 0) makes fragments of different slots that collided at
// one index move to different ones.
std::uint32_t rehash_aggregator_index(std::uint32_t index, AggregatorRange range, std::uint64_t salt = 0);

}  // namespace atp
