// What an ATP allreduce must return, for tests that run one: seeded inputs, and the exact
// results (ExactModel).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
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

// The exact results of a job's ATP allreduces, call after call, as the protocol computes them
// (docs/protocol.md "Scale per fragment"): each fragment position's exponent is the job's
// scale's (initial_exponent) in its first call and the PS's choice from the position's largest
// magnitude in the call before after that; a fragment's result is the int64 sum of the inputs
// quantized at its exponent, dequantized once, unless the sum leaves int32, a value saturates or
// the exponent does not resolve the largest value: then the float32 path's, the double sum
// rounded to float.
class ExactModel {
 public:
  ExactModel(double scale, std::size_t values_per_packet) : scale_(scale), width_(values_per_packet) {}

  std::vector<float> next(const std::vector<std::vector<float>>& inputs) {
    const std::size_t n = inputs.front().size();
    const auto workers = static_cast<std::uint32_t>(inputs.size());
    const std::size_t fragments = (n + width_ - 1) / width_;
    if (exponents_.size() < fragments) exponents_.resize(fragments, initial_exponent(scale_));
    std::vector<float> out(n);
    float_fragments_ = 0;
    for (std::size_t k = 0; k < fragments; ++k) {
      const std::size_t begin = k * width_, end = std::min(n, begin + width_);
      const double scale = std::ldexp(1.0, exponents_[k]);
      std::int16_t largest = kNoMagnitude;
      bool float_path = false;
      for (const auto& in : inputs) {
        largest = std::max(largest, magnitude_of(std::span(in).subspan(begin, end - begin)));
        for (std::size_t i = begin; i < end; ++i) float_path = float_path || is_saturated(quantize_one(in[i], scale));
      }
      float_path = float_path || !resolved(largest, exponents_[k], workers);
      for (std::size_t i = begin; i < end; ++i) {
        std::int64_t sum = 0;
        for (const auto& in : inputs) sum += quantize_one(in[i], scale);
        float_path = float_path || sum > kSaturatedMax || sum < kSaturatedMin;
        out[i] = dequantize_one(sum, scale);
      }
      float_fragments_ += float_path;
      if (float_path) {  // the whole fragment: a late value may have sent it there
        for (std::size_t i = begin; i < end; ++i) {
          double exact = 0;
          for (const auto& in : inputs) exact += in[i];
          out[i] = static_cast<float>(exact);
        }
      }
      exponents_[k] = next_exponent(largest, workers, exponents_[k]);
    }
    return out;
  }
  // Of the last call: fragments that took the float32 path.
  std::size_t float_fragments() const { return float_fragments_; }

 private:
  std::size_t float_fragments_ = 0;
  double scale_;
  std::size_t width_;
  std::vector<std::int16_t> exponents_;  // by fragment position
};

inline void expect_exact(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " of " << got.size() << " values differ from the reference";
}

}  // namespace atp
