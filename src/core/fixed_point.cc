// float32 <-> int32 fixed point. The quantize loop uses SSE2 (part of every x86-64 CPU) for
// 4 values per step; other targets use the scalar loop. See bench/fixed_point_bench.cc.
#include "atp/fixed_point.h"

#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace atp {
namespace {

constexpr double kMax = 2147483647.0;
constexpr double kMin = -2147483648.0;

// One value: clamp (which also maps +-inf), NaN -> INT32_MIN (saturated: the PS's cue for the
// float32 path), round to nearest even. lrint rounds in the current mode, which is
// to-nearest-even unless the program changed it.
std::int32_t quantize_one(float x, double scale) {
  double v = static_cast<double>(x) * scale;  // float x double: exact, the product fits 53 bits
  v = v < kMin ? kMin : v;
  v = v > kMax ? kMax : v;
  v = v == v ? v : kMin;
  return static_cast<std::int32_t>(std::lrint(v));
}

}  // namespace

void quantize(std::span<const float> in, double scale, std::span<std::int32_t> out) {
  const std::size_t n = in.size();
  const float* src = in.data();
  std::int32_t* dst = out.data();
  std::size_t i = 0;
#if defined(__SSE2__)
  // cvtpd2dq converts with the same round-to-nearest-even as lrint; max/min clamp first.
  // maxpd returns its second operand when either is NaN, so max(NaN, kMin) = kMin: a NaN
  // leaves the clamp as INT32_MIN, as in quantize_one, without a branch or a mask.
  const __m128d vscale = _mm_set1_pd(scale);
  const __m128d vmax = _mm_set1_pd(kMax);
  const __m128d vmin = _mm_set1_pd(kMin);
  auto convert2 = [&](__m128 two_floats) {
    const __m128d v = _mm_mul_pd(_mm_cvtps_pd(two_floats), vscale);
    return _mm_cvtpd_epi32(_mm_min_pd(_mm_max_pd(v, vmin), vmax));  // two int32 in the low half
  };
  for (; i + 4 <= n; i += 4) {
    const __m128 f = _mm_loadu_ps(src + i);
    const __m128i lo = convert2(f);
    const __m128i hi = convert2(_mm_movehl_ps(f, f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_unpacklo_epi64(lo, hi));
  }
#endif
  for (; i < n; ++i) dst[i] = quantize_one(src[i], scale);
}

void dequantize(std::span<const std::int32_t> in, double scale, std::span<float> out) {
  const std::size_t n = in.size();
  const std::int32_t* src = in.data();
  float* dst = out.data();
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<double>(src[i]) / scale);
}

}  // namespace atp
