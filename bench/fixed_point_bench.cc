// Google Benchmark of the fixed-point conversion, next to a straightforward scalar baseline
// (std::lrint with a clamp) in the same run, so the speed-up of the vectorised loop is a ratio.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "atp/fixed_point.h"

namespace {

std::vector<float> random_gradients(std::size_t n) {
  std::mt19937 rng(1);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<double>(rng()) / 4294967296.0 * 2.0 - 1.0);
  return v;
}

// What one would write without thinking about vectorisation: libm rounding per element.
void quantize_scalar_baseline(const std::vector<float>& in, double scale, std::vector<std::int32_t>& out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double v = std::clamp(static_cast<double>(in[i]) * scale, -2147483648.0, 2147483647.0);
    out[i] = static_cast<std::int32_t>(std::lrint(v));
  }
}

void BM_Quantize(benchmark::State& state) {
  const auto in = random_gradients(static_cast<std::size_t>(state.range(0)));
  std::vector<std::int32_t> out(in.size());
  for (auto _ : state) {
    atp::quantize(in, atp::kDefaultScale, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0) * 4);
}

void BM_QuantizeScalarBaseline(benchmark::State& state) {
  const auto in = random_gradients(static_cast<std::size_t>(state.range(0)));
  std::vector<std::int32_t> out(in.size());
  for (auto _ : state) {
    quantize_scalar_baseline(in, atp::kDefaultScale, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0) * 4);
}

void BM_Dequantize(benchmark::State& state) {
  const auto in = random_gradients(static_cast<std::size_t>(state.range(0)));
  std::vector<std::int32_t> fixed(in.size());
  atp::quantize(in, atp::kDefaultScale, fixed);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    atp::dequantize(fixed, atp::kDefaultScale, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0) * 4);
}

}  // namespace

BENCHMARK(BM_Quantize)->Arg(62)->Arg(1024)->Arg(1 << 20);
BENCHMARK(BM_QuantizeScalarBaseline)->Arg(62)->Arg(1024)->Arg(1 << 20);
BENCHMARK(BM_Dequantize)->Arg(62)->Arg(1024)->Arg(1 << 20);
BENCHMARK_MAIN();
