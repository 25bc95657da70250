// Fixed-point conversion of gradients (paper §3.8, B.1): float32 x scale, rounded to nearest,
// saturated to int32; and back. Switches add the int32 values with saturating adds.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

namespace atp {

inline constexpr double kDefaultScale = 1e8;
inline constexpr std::int32_t kSaturatedMax = std::numeric_limits<std::int32_t>::max();
inline constexpr std::int32_t kSaturatedMin = std::numeric_limits<std::int32_t>::min();

// out[i] = round_to_nearest_even(in[i] * scale), clamped to [INT32_MIN, INT32_MAX]; NaN ->
// INT32_MIN. Infinities and NaN thus give saturated values, which make the PS take the float32
// path for their fragment (§3.8): the workers resend it as float32 and the PS sums the floats,
// so an Inf or NaN reaches the result as IEEE arithmetic says (NaN + 1 = NaN, Inf - Inf = NaN)
// instead of vanishing into an integer. Requires out.size() >= in.size(). The loop vectorises
// (no branches, no libm calls).
void quantize(std::span<const float> in, double scale, std::span<std::int32_t> out);

// out[i] = float(double(in[i]) / scale). Requires out.size() >= in.size().
void dequantize(std::span<const std::int32_t> in, double scale, std::span<float> out);

inline float dequantize_one(std::int64_t v, double scale) { return static_cast<float>(static_cast<double>(v) / scale); }

// Saturating int32 addition, as the switch ALU does it.
inline std::int32_t saturating_add(std::int32_t a, std::int32_t b) {
  const std::int64_t s = static_cast<std::int64_t>(a) + b;
  if (s > kSaturatedMax) return kSaturatedMax;
  if (s < kSaturatedMin) return kSaturatedMin;
  return static_cast<std::int32_t>(s);
}

inline bool is_saturated(std::int32_t v) { return v == kSaturatedMax || v == kSaturatedMin; }

}  // namespace atp
