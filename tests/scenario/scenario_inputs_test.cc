// Tests of the scenario backends' inputs and result check (include/atp/scenario/inputs.h): a stream's
// values drawn from any offset, the answer built block by block against a plain sum, and the
// check's count of wrong values (nccl-tests' #wrong).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/scenario/inputs.h"

namespace atp::scenario_inputs {
namespace {

constexpr double kScale = 1e6;

TEST(ScenarioInputs, AnyBlockOfAStreamIsDrawnAlone) {
  std::vector<float> whole(5000), block(300);
  generate_input(42, 3.0, whole);
  generate_input(42, 3.0, block, 4100);
  for (std::size_t i = 0; i < block.size(); ++i) ASSERT_EQ(block[i], whole[4100 + i]) << i;
  for (float v : whole) ASSERT_TRUE(v >= -3.0f && v < 3.0f) << v;
  std::vector<float> other(5000);
  generate_input(43, 3.0, other);
  EXPECT_NE(whole, other);
}

// Blocks of 2048: 5000 values end inside the third; every worker's input is summed.
TEST(ScenarioInputs, TheAnswerIsThePlainSumOfTheWorkersInputs) {
  constexpr std::size_t kWorkers = 3, kElements = 5000;
  RoundReference ref;
  make_reference(7, 2, kWorkers, 1, kElements, 10.0, kScale, 0, ref);  // no fragments: the first exponent
  EXPECT_TRUE(ref.exponents.empty());
  const double scale = std::ldexp(1.0, initial_exponent(kScale));
  std::vector<std::int64_t> int_sum(kElements, 0);
  std::vector<double> float_sum(kElements, 0), abs_sum(kElements, 0);
  for (std::size_t w = 0; w < kWorkers; ++w) {
    std::vector<float> in(kElements);
    std::vector<std::int32_t> q(kElements);
    generate_input(input_seed(7, 2, w, 1), 10.0, in);
    quantize(in, scale, q);
    for (std::size_t i = 0; i < kElements; ++i) {
      int_sum[i] += q[i];
      float_sum[i] += in[i];
      abs_sum[i] += std::fabs(static_cast<double>(in[i]));
    }
  }
  EXPECT_EQ(ref.int_sum, int_sum);
  EXPECT_EQ(ref.float_sum, float_sum);
  EXPECT_EQ(ref.abs_sum, abs_sum);
  EXPECT_EQ(ref.addends, kWorkers);
  make_reference(7, 2, kWorkers, 1, 10, 10.0, kScale, 0, ref);  // storage reused: resized, refilled
  EXPECT_EQ(ref.int_sum.size(), 10u);
  EXPECT_EQ(ref.int_sum[9], int_sum[9]);
}

// Each fragment's exponent is the PS's: the first round's from the job's scale, a later round's
// from the largest magnitude of the fragment in the round before, and the sums are at it.
TEST(ScenarioInputs, EachFragmentIsQuantizedAtTheExponentThePsPicks) {
  constexpr std::size_t kWorkers = 3, kElements = 250, kWidth = 100;
  RoundReference first, second;
  make_reference(5, 1, kWorkers, 0, kElements, 1e-20, kScale, kWidth, first);
  EXPECT_EQ(first.exponents, std::vector<std::int16_t>(3, initial_exponent(kScale)));
  make_reference(5, 1, kWorkers, 1, kElements, 1e-20, kScale, kWidth, second);
  ASSERT_EQ(second.exponents.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    const std::size_t n = std::min(kWidth, kElements - k * kWidth);
    std::int16_t largest = kNoMagnitude;
    std::vector<float> in(n);
    for (std::size_t w = 0; w < kWorkers; ++w) {
      generate_input(input_seed(5, 1, w, 0), 1e-20, in, k * kWidth);
      largest = std::max(largest, magnitude_of(in));
    }
    EXPECT_EQ(second.exponents[k], next_exponent(largest, kWorkers, 0)) << k;
    EXPECT_GT(second.exponents[k], 80) << "values near 1e-20 get an exponent that resolves them";
    std::int64_t sum = 0;
    for (std::size_t w = 0; w < kWorkers; ++w) {
      generate_input(input_seed(5, 1, w, 1), 1e-20, in, k * kWidth);
      sum += quantize_one(in[0], std::ldexp(1.0, second.exponents[k]));
    }
    EXPECT_EQ(second.int_sum[k * kWidth], sum) << k;
  }
}

TEST(ScenarioInputs, TheCheckCountsEveryWrongValueWhenAsked) {
  RoundReference ref;
  make_reference(1, 1, 2, 0, 100, 1.0, kScale, 10, ref);
  std::vector<float> result(100);
  for (std::size_t i = 0; i < result.size(); ++i) {
    result[i] = dequantize_one(ref.int_sum[i], std::ldexp(1.0, ref.exponents[i / 10]));
  }
  std::uint64_t wrong = 0;
  EXPECT_EQ(check_result(ref, result, {}, 10, nullptr, false, &wrong), "");
  EXPECT_EQ(wrong, 0u);

  for (std::size_t i : {3, 57, 58}) result[i] += 1.0f;
  const std::string first = check_result(ref, result, std::vector<bool>(10, false), 10);
  EXPECT_EQ(first.rfind("value 3 is ", 0), 0u) << first;
  EXPECT_EQ(check_result(ref, result, std::vector<bool>(10, false), 10, nullptr, false, &wrong), first);
  EXPECT_EQ(wrong, 3u);
  // Float32 sums (ring, Gloo): each value is held to the float sum within the rounding bound.
  for (std::size_t i = 0; i < result.size(); ++i) result[i] = static_cast<float>(ref.float_sum[i]);
  wrong = 0;
  EXPECT_EQ(check_result(ref, result, {}, 10, nullptr, true, &wrong), "");
  EXPECT_EQ(wrong, 0u);
  for (std::size_t i : {0, 99}) result[i] += 1.0f;
  EXPECT_NE(check_result(ref, result, {}, 10, nullptr, true, &wrong), "");
  EXPECT_EQ(wrong, 2u);
  // A float32 collective has no fragments: no width needs giving. ATP's check without one is an
  // error, not a loop that never ends.
  wrong = 0;
  EXPECT_NE(check_result(ref, result, {}, 0, nullptr, true, &wrong), "");
  EXPECT_EQ(wrong, 2u);
  EXPECT_THROW((void)check_result(ref, result, {}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace atp::scenario_inputs
