// Byte and element counts that saturate at 2^64 - 1 instead of wrapping: a scenario's memory need
// (scenario_yaml.cc) and a generated topology's size (topologies.cc), which absurd parameters
// would otherwise wrap into small, accepted numbers.
#pragma once

#include <cstdint>
#include <limits>

namespace atp::scenario_detail {

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? std::numeric_limits<std::uint64_t>::max() : s;
}
inline std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? std::numeric_limits<std::uint64_t>::max() : p;
}

}  // namespace atp::scenario_detail
