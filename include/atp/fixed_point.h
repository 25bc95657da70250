// Fixed-point conversion of gradients (paper §3.8, B.1): float32 x scale, rounded to nearest,
// saturated to int32; and back. Switches add the int32 values with saturating adds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

namespace atp {

inline constexpr double kDefaultScale = 1e8;
// Scale exponents and magnitudes (below) stay within +-kMaxScaleExponent: float32 spans 2^-149
// to 2^128, and an exponent puts a fragment's largest value near 2^kTargetBits. kNoMagnitude:
// a fragment of zeros.
inline constexpr std::int16_t kMaxScaleExponent = 300;
inline constexpr std::int16_t kNoMagnitude = -32768;
inline constexpr std::int32_t kSaturatedMax = std::numeric_limits<std::int32_t>::max();
inline constexpr std::int32_t kSaturatedMin = std::numeric_limits<std::int32_t>::min();

// round_to_nearest_even(x * scale), clamped to [INT32_MIN, INT32_MAX]; NaN -> INT32_MIN.
// Infinities and NaN thus give saturated values, which make the PS take the float32 path for
// their fragment (§3.8): the workers resend it as float32 and the PS sums the floats, so an Inf
// or NaN reaches the result as IEEE arithmetic says (NaN + 1 = NaN, Inf - Inf = NaN) instead of
// vanishing into an integer. The product is a double product (one rounding); lrint rounds in the
// current mode, which is to-nearest-even unless the program changed it. This is the definition
// the vectorised packet passes (store_quantized in wire.h) reproduce bit for bit.
inline std::int32_t quantize_one(float x, double scale) {
  constexpr double kMax = kSaturatedMax;
  constexpr double kMin = kSaturatedMin;
  double v = static_cast<double>(x) * scale;
  v = v < kMin ? kMin : v;  // also -inf
  v = v > kMax ? kMax : v;  // also +inf
  v = v == v ? v : kMin;    // NaN
  return static_cast<std::int32_t>(std::lrint(v));
}

// out[i] = quantize_one(in[i], scale). Requires out.size() >= in.size(). Vectorised (AVX2 where
// the CPU has it) with the loop of store_quantized (wire.h), in src/core/wire_values.cc.
void quantize(std::span<const float> in, double scale, std::span<std::int32_t> out);

// float(double(v) / scale): a division, not a multiplication by 1 / scale (which rounds
// differently for some values).
inline float dequantize_one(std::int64_t v, double scale) { return static_cast<float>(static_cast<double>(v) / scale); }

// ---- Scale per fragment (docs/protocol.md "Scale per fragment") ----
// Every fragment's values are x * 2^e with an exponent e of its own, which the PS picks for the
// fragment's next round from the largest magnitude it saw (carried in parameter packets): no
// extra round trip, and a fragment of tiny or huge values keeps float32's precision.

// A magnitude times 2^e below 2^(kTargetBits + 1): n workers' sum stays below 2^31 with room to
// double, and each worker's largest value keeps 29 - ceil(log2 n) bits (24, float32's, up to 32 workers).
inline constexpr int kTargetBits = 29;

// ceil(log2(n)) for n >= 1.
inline int ceil_log2(std::uint32_t n) {
  int bits = 0;
  while ((std::uint64_t{1} << bits) < n) ++bits;
  return bits;
}

inline std::int16_t clamp_exponent(int e) {
  return static_cast<std::int16_t>(std::clamp<int>(e, -kMaxScaleExponent, kMaxScaleExponent));
}

// The exponent of a fragment position's first round: the job's scale rounded down to a power of
// two (1e8: 2^26).
inline std::int16_t initial_exponent(double scale) { return clamp_exponent(std::ilogb(scale)); }

// The exponent for the next round of a fragment whose largest value had `magnitude` (its
// floor(log2)), among `workers` workers; `current` when the fragment was all zeros.
inline std::int16_t next_exponent(std::int16_t magnitude, std::uint32_t workers, std::int16_t current) {
  if (magnitude == kNoMagnitude) return current;
  return clamp_exponent(kTargetBits - magnitude - ceil_log2(workers));
}

// Whether sums at exponent `e` hold the largest value (`magnitude`) of `workers` workers to
// float32's 24 bits (past 64 workers, to the 29 - ceil(log2 n) bits a 31-bit sum leaves): else
// the PS collects the fragment as float32. A fragment of zeros is exact at any exponent.
inline bool resolved(std::int16_t magnitude, std::int16_t e, std::uint32_t workers) {
  if (magnitude == kNoMagnitude) return true;
  const int needed = std::min(23, kTargetBits - ceil_log2(workers));
  return magnitude + e >= needed;
}

// floor(log2) of the largest finite magnitude in `values`, kNoMagnitude when none is nonzero
// (zeros, or only infinities and NaNs, which the float32 path takes anyway).
std::int16_t magnitude_of(std::span<const float> values);

// Saturating int32 addition, as the switch ALU does it.
inline std::int32_t saturating_add(std::int32_t a, std::int32_t b) {
  const std::int64_t s = static_cast<std::int64_t>(a) + b;
  if (s > kSaturatedMax) return kSaturatedMax;
  if (s < kSaturatedMin) return kSaturatedMin;
  return static_cast<std::int32_t>(s);
}

inline bool is_saturated(std::int32_t v) { return v == kSaturatedMax || v == kSaturatedMin; }

// One value of an aggregation (§3.8): a saturating add whose saturation sticks. Once the sum,
// or a contribution, is INT32_MAX or INT32_MIN the sum stays saturated, so later additions of
// the other sign cannot bring it back in range and hide the overflow from the PS (which treats
// a saturated value as "resend as float32").
inline std::int32_t sticky_saturating_add(std::int32_t sum, std::int32_t value) {
  if (is_saturated(sum)) return sum;
  if (is_saturated(value)) return value;
  return saturating_add(sum, value);
}

}  // namespace atp
