// Tests of the fixed-point conversion: round to nearest (ties to even), saturation at both
// ends, NaN and infinities, the round trip error bound and saturating adds (sticky or not).
#include "atp/fixed_point.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace atp {
namespace {

std::int32_t q(float x, double scale = kDefaultScale) {
  std::int32_t out = 0;
  quantize(std::span(&x, 1), scale, std::span(&out, 1));
  return out;
}

TEST(FixedPoint, ScalesAndRoundsToNearest) {
  EXPECT_EQ(q(1.0f), 100000000);
  EXPECT_EQ(q(-1.0f), -100000000);
  EXPECT_EQ(q(0.0f), 0);
  EXPECT_EQ(q(1.25f, 2.0), 2);    // 2.5 -> 2 (ties to even)
  EXPECT_EQ(q(1.75f, 2.0), 4);    // 3.5 -> 4
  EXPECT_EQ(q(-1.25f, 2.0), -2);  // -2.5 -> -2
  EXPECT_EQ(q(0.3f, 10.0), 3);    // 3.0000001 -> 3
  EXPECT_EQ(q(0.26f, 10.0), 3);   // 2.6 -> 3
}

TEST(FixedPoint, SaturatesAtBothEnds) {
  EXPECT_EQ(q(21.5f), kSaturatedMax);  // 2.15e9 > INT32_MAX
  EXPECT_EQ(q(-21.5f), kSaturatedMin);
  EXPECT_EQ(q(1e30f), kSaturatedMax);
  EXPECT_EQ(q(-1e30f), kSaturatedMin);
  EXPECT_EQ(q(std::numeric_limits<float>::infinity()), kSaturatedMax);
  EXPECT_EQ(q(-std::numeric_limits<float>::infinity()), kSaturatedMin);
  EXPECT_LT(q(21.474836f), kSaturatedMax);  // just below 2^31 / 1e8
  EXPECT_EQ(q(21.474838f), kSaturatedMax);  // just above
}

// NaN must not vanish (NaN + 1 = 1 in a result): it saturates, so that the PS sends its
// fragment over the float32 path, where the NaN survives. Any NaN: quiet, signalling, negative.
TEST(FixedPoint, NanSaturatesSoThePsTakesTheFloatPath) {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  const float signalling = std::numeric_limits<float>::signaling_NaN();
  const float payload = std::bit_cast<float>(0x7FC12345u);
  for (const float nan : {quiet, -quiet, signalling, payload}) {
    for (const double scale : {kDefaultScale, 1.0, 1e-3}) {
      EXPECT_EQ(q(nan, scale), kSaturatedMin) << "scale " << scale;
      EXPECT_TRUE(is_saturated(q(nan, scale)));
    }
  }
}

// Arrays go through the vector loop (8 values per step where the CPU has AVX2) and a scalar
// tail; both must agree with one-at-a-time.
TEST(FixedPoint, VectorLoopAndScalarTailAgreeOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaNs in different vector lanes and in the scalar tail (13 values: one 8-value step + 5).
  const std::vector<float> in = {nan,     inf,     -inf, 21.5f, -21.5f, 1.25f, -1.25f,
                                 0.5e-8f, 1.5e-8f, -nan, -0.0f, 3.0f,   nan};
  for (double scale : {kDefaultScale, 2.0}) {
    std::vector<std::int32_t> out(in.size());
    quantize(in, scale, out);
    for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], q(in[i], scale)) << i << " scale " << scale;
  }
  std::vector<std::int32_t> out(in.size());
  quantize(in, 2.0, out);
  EXPECT_EQ(out[0], kSaturatedMin);  // NaN
  EXPECT_EQ(out[1], kSaturatedMax);
  EXPECT_EQ(out[2], kSaturatedMin);
  EXPECT_EQ(out[5], 2);  // 2.5 -> 2 inside the vector loop too
  EXPECT_EQ(out[6], -2);
  EXPECT_EQ(out[9], kSaturatedMin);   // -NaN
  EXPECT_EQ(out[12], kSaturatedMin);  // NaN in the scalar tail
}

TEST(FixedPoint, MatchesReferenceOnRandomInputs) {
  std::mt19937_64 rng(7);
  std::vector<float> in(10007);
  for (auto& x : in) x = static_cast<float>(static_cast<std::int64_t>(rng() % 4000001) - 2000000) / 1e6f * 30.0f;
  std::vector<std::int32_t> out(in.size());
  quantize(in, kDefaultScale, out);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double v = static_cast<double>(in[i]) * kDefaultScale;
    const double clamped = std::clamp(v, -2147483648.0, 2147483647.0);
    EXPECT_EQ(out[i], static_cast<std::int32_t>(std::nearbyint(clamped))) << in[i];
  }
}

TEST(FixedPoint, RoundTripErrorIsHalfAStep) {
  std::mt19937_64 rng(11);
  std::vector<float> in(4096);
  for (auto& x : in) x = static_cast<float>(static_cast<double>(rng() % 2000001) / 1e6 - 1.0);
  std::vector<std::int32_t> fixed(in.size());
  quantize(in, kDefaultScale, fixed);
  for (std::size_t i = 0; i < in.size(); ++i) {
    // half a quantum (0.5e-8) plus the float rounding of the result
    EXPECT_NEAR(dequantize_one(fixed[i], kDefaultScale), in[i], 0.5e-8 + std::abs(in[i]) * 6e-8) << i;
  }
}

TEST(FixedPoint, SaturatingAdd) {
  EXPECT_EQ(saturating_add(1, 2), 3);
  EXPECT_EQ(saturating_add(kSaturatedMax, 1), kSaturatedMax);
  EXPECT_EQ(saturating_add(kSaturatedMin, -1), kSaturatedMin);
  EXPECT_EQ(saturating_add(kSaturatedMax, kSaturatedMin), -1);
  EXPECT_TRUE(is_saturated(kSaturatedMax));
  EXPECT_TRUE(is_saturated(kSaturatedMin));
  EXPECT_FALSE(is_saturated(0));
}

// The switch's add: saturation sticks, whichever operand brings it.
TEST(FixedPoint, StickySaturatingAdd) {
  EXPECT_EQ(sticky_saturating_add(1, 2), 3);
  EXPECT_EQ(sticky_saturating_add(kSaturatedMax - 1, 5), kSaturatedMax);  // saturates...
  EXPECT_EQ(sticky_saturating_add(kSaturatedMax, -5), kSaturatedMax);     // ...and stays
  EXPECT_EQ(sticky_saturating_add(kSaturatedMin, kSaturatedMax), kSaturatedMin);
  EXPECT_EQ(sticky_saturating_add(-5, kSaturatedMax), kSaturatedMax);  // a saturated contribution wins
  EXPECT_EQ(sticky_saturating_add(5, kSaturatedMin), kSaturatedMin);
  EXPECT_EQ(sticky_saturating_add(kSaturatedMin + 1, -1), kSaturatedMin);
  EXPECT_EQ(sticky_saturating_add(kSaturatedMin + 1, -2), kSaturatedMin);
}

}  // namespace
// Scale per fragment: the first exponent, the next one from a magnitude, when a sum resolves the
// largest value, and the magnitude of a fragment's values.
TEST(ScalePerFragment, ExponentsMagnitudesAndResolution) {
  EXPECT_EQ(initial_exponent(1e8), 26);  // 2^26 = 67108864 <= 1e8 < 2^27
  EXPECT_EQ(initial_exponent(1.0), 0);
  EXPECT_EQ(initial_exponent(0.001), -10);
  EXPECT_EQ(ceil_log2(1), 0);
  EXPECT_EQ(ceil_log2(4), 2);
  EXPECT_EQ(ceil_log2(5), 3);
  // The largest value times 2^e below 2^(29 - ceil(log2 n)): n of them below 2^30.
  EXPECT_EQ(next_exponent(0, 4, 7), 27);  // values in [1, 2), 4 workers
  EXPECT_EQ(next_exponent(-100, 1, 7), 129);
  EXPECT_EQ(next_exponent(kNoMagnitude, 4, 7), 7);  // zeros: as it was
  for (const std::int16_t m : {std::int16_t{-149}, std::int16_t{-1}, std::int16_t{0}, std::int16_t{127}}) {
    for (const std::uint32_t n : {1u, 2u, 32u, 1024u}) {
      const std::int16_t e = next_exponent(m, n, 0);
      EXPECT_LT(static_cast<double>(n) * std::ldexp(1.0, m + 1 + e), std::ldexp(1.0, 31)) << m << " " << n;
      EXPECT_TRUE(resolved(m, e, n)) << m << " " << n;
    }
  }
  EXPECT_TRUE(resolved(0, 23, 4));   // 24 bits of a value in [1, 2)
  EXPECT_FALSE(resolved(0, 22, 4));  // 23
  EXPECT_TRUE(resolved(kNoMagnitude, -300, 4));
  EXPECT_TRUE(resolved(0, 19, 1024));  // past 64 workers: the 29 - 10 bits a 31-bit sum of 1024 values leaves
  EXPECT_FALSE(resolved(0, 18, 1024));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(magnitude_of(std::vector<float>{0.0f, -0.0f}), kNoMagnitude);
  EXPECT_EQ(magnitude_of(std::vector<float>{0.5f, -3.0f, 2.0f}), 1);
  EXPECT_EQ(magnitude_of(std::vector<float>{inf, nan, -0.75f}), -1);  // not finite: not counted
  EXPECT_EQ(magnitude_of(std::vector<float>{std::numeric_limits<float>::denorm_min()}), -149);
  EXPECT_EQ(magnitude_of(std::vector<float>{std::numeric_limits<float>::max()}), 127);
}

}  // namespace atp
