// Aggregator index hashing. The hash is part of the protocol: every worker and every PS of a
// job must compute the same function, so it is fixed here (the splitmix64 finaliser).
#include "atp/aggregator_index.h"

namespace atp {
namespace {

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace

// Offsets within the range are computed exactly as over a whole table of `count` aggregators,
// so the range {0, n} (dynamic sharing) gives the same indices as a table of n.
std::string_view to_string(IndexPolicy policy) {
  switch (policy) {
    case IndexPolicy::kHashed:
      return "hashed";
    case IndexPolicy::kLinear:
      return "linear";
    case IndexPolicy::kHashedSlots:
      return "hashed_slots";
    case IndexPolicy::kAllocated:
      return "allocated";
  }
  return "?";
}

std::optional<IndexPolicy> parse_index_policy(std::string_view name) {
  for (IndexPolicy p :
       {IndexPolicy::kHashed, IndexPolicy::kLinear, IndexPolicy::kHashedSlots, IndexPolicy::kAllocated}) {
    if (to_string(p) == name) return p;
  }
  return std::nullopt;
}

std::uint32_t base_aggregator_index(JobId job, Seq seq, AggregatorRange range, IndexPolicy policy, std::uint32_t slots,
                                    std::uint32_t home) {
  switch (policy) {
    case IndexPolicy::kLinear:
      return range.first + seq % range.count;
    case IndexPolicy::kHashedSlots:
      return range.first + static_cast<std::uint32_t>((std::uint64_t{home} + seq % slots) % range.count);
    case IndexPolicy::kHashed:
    case IndexPolicy::kAllocated:
      break;
  }
  return range.first + static_cast<std::uint32_t>(mix64((std::uint64_t{job} << 32) | seq) % range.count);
}

std::uint32_t hashed_slot_home(JobId job, std::uint32_t count) {
  return count == 0 ? 0 : static_cast<std::uint32_t>(mix64(std::uint64_t{job} << 32) % count);
}

std::uint32_t rehash_aggregator_index(std::uint32_t index, AggregatorRange range, std::uint64_t salt) {
  if (range.count <= 1) return range.first;
  const std::uint32_t offset = index - range.first;  // wraps for an index below the range: still hashed into it
  auto next = static_cast<std::uint32_t>(mix64(0x9E3779B97F4A7C15ull ^ offset ^ (salt << 32)) % range.count);
  if (next == offset) next = (next + 1) % range.count;
  return range.first + next;
}

}  // namespace atp
