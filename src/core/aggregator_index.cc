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

std::uint32_t base_aggregator_index(JobId job, Seq seq, std::uint32_t n, IndexPolicy policy) {
  if (policy == IndexPolicy::kLinear) return seq % n;
  return static_cast<std::uint32_t>(mix64((std::uint64_t{job} << 32) | seq) % n);
}

std::uint32_t rehash_aggregator_index(std::uint32_t index, std::uint32_t n) {
  if (n <= 1) return 0;
  auto next = static_cast<std::uint32_t>(mix64(0x9E3779B97F4A7C15ull ^ index) % n);
  if (next == index) next = (next + 1) % n;
  return next;
}

}  // namespace atp
