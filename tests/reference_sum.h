// What an ATP allreduce must return, for tests that run one: seeded inputs, and the exact
// reference (the int64 sum of the quantized inputs, dequantized once).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "atp/fixed_point.h"

namespace atp {

inline std::vector<std::vector<float>> random_inputs(std::size_t workers, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> in(workers, std::vector<float>(n));
  for (auto& v : in)
    for (float& x : v) x = u(rng);
  return in;
}

inline std::vector<float> reference(const std::vector<std::vector<float>>& inputs, double scale) {
  const std::size_t n = inputs[0].size();
  std::vector<std::int64_t> sum(n, 0);
  std::vector<std::int32_t> q(n);
  for (const auto& in : inputs) {
    quantize(in, scale, q);
    for (std::size_t i = 0; i < n; ++i) sum[i] += q[i];
  }
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = dequantize_one(sum[i], scale);
  return out;
}

inline void expect_exact(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " of " << got.size() << " values differ from the reference";
}

}  // namespace atp
