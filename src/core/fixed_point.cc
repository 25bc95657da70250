// float32 <-> int32 fixed point. Written as straight-line loops (no branches, no libm) so that
// g++ -O3 vectorises them with plain SSE2; see bench/fixed_point_bench.cc.
#include "atp/fixed_point.h"

namespace atp {

void quantize(std::span<const float> in, double scale, std::span<std::int32_t> out) {
  // Adding and subtracting 1.5 * 2^52 rounds a double to the nearest integer (ties to even)
  // in the default rounding mode, for |x| < 2^51: exact for everything inside the int32 range.
  constexpr double kRound = 6755399441055744.0;
  constexpr double kMax = 2147483647.0;
  constexpr double kMin = -2147483648.0;
  const std::size_t n = in.size();
  const float* src = in.data();
  std::int32_t* dst = out.data();
  for (std::size_t i = 0; i < n; ++i) {
    double v = static_cast<double>(src[i]) * scale;  // float x double: exact below 2^53
    v = v < kMin ? kMin : v;                         // also maps -inf to INT32_MIN
    v = v > kMax ? kMax : v;
    v = v == v ? v : 0.0;                            // NaN -> 0
    v = (v + kRound) - kRound;
    dst[i] = static_cast<std::int32_t>(v);
  }
}

void dequantize(std::span<const std::int32_t> in, double scale, std::span<float> out) {
  const std::size_t n = in.size();
  const std::int32_t* src = in.data();
  float* dst = out.data();
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<double>(src[i]) / scale);
}

}  // namespace atp
