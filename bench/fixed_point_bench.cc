// Google Benchmark of the packet value passes (wire.h): fixed-point conversion, byte order and the
// switch's and PS's additions. Each runs as Simd::kBest (AVX2 where the CPU has it) and as
// Simd::kScalar in the same run, so that the speed-up is a ratio. Sizes: values per packet.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/wire.h"

namespace {

using atp::Simd;

std::vector<float> random_gradients(std::size_t n) {
  std::mt19937 rng(1);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<double>(rng()) / 4294967296.0 * 2.0 - 1.0);
  return v;
}

// A packet of n values, zeros.
std::vector<std::uint8_t> empty_packet(std::size_t n) {
  return std::vector<std::uint8_t>(atp::packet_size(static_cast<std::uint16_t>(n)));
}

// A packet of n quantized gradients.
std::vector<std::uint8_t> gradient_packet(std::size_t n) {
  std::vector<std::uint8_t> packet = empty_packet(n);
  atp::store_quantized(packet, random_gradients(n), atp::kDefaultScale);
  return packet;
}

std::size_t values(const benchmark::State& state) { return static_cast<std::size_t>(state.range(0)); }

void finish(benchmark::State& state, Simd simd) {
  state.SetLabel(simd == Simd::kScalar ? "scalar" : atp::cpu_has_avx2() ? "avx2" : "scalar (no AVX2)");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}

// Worker, sending: floats -> packet.
void BM_StoreQuantized(benchmark::State& state, Simd simd) {
  const auto in = random_gradients(values(state));
  std::vector<std::uint8_t> packet = empty_packet(in.size());
  for (auto _ : state) {
    atp::store_quantized(packet, in, atp::kDefaultScale, simd);
    benchmark::DoNotOptimize(packet.data());
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

// quantize (fixed_point.h): store_quantized's loop into host-order int32 (AVX2 where the CPU has it).
void BM_Quantize(benchmark::State& state) {
  const auto in = random_gradients(values(state));
  std::vector<std::int32_t> out(in.size());
  for (auto _ : state) {
    atp::quantize(in, atp::kDefaultScale, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, Simd::kBest);
}

// Worker, receiving: packet -> floats.
void BM_LoadDequantized(benchmark::State& state, Simd simd) {
  const auto packet = gradient_packet(values(state));
  std::vector<float> out(values(state));
  for (auto _ : state) {
    atp::load_dequantized(packet, atp::kDefaultScale, out, simd);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

// Switch: a packet added into an aggregator row (reset to zeros each time, so that the sums
// stay far from saturation, as gradients do).
void BM_AccumulateValues(benchmark::State& state, Simd simd) {
  const auto packet = gradient_packet(values(state));
  std::vector<std::int32_t> row(values(state));
  for (auto _ : state) {
    std::fill(row.begin(), row.end(), 0);
    atp::accumulate_values(packet, row, simd);
    benchmark::DoNotOptimize(row.data());
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

// Switch: a first packet copied into a row, or a row sent on.
void BM_LoadValues(benchmark::State& state, Simd simd) {
  const auto packet = gradient_packet(values(state));
  std::vector<std::int32_t> row(values(state));
  for (auto _ : state) {
    atp::load_values(packet, row, simd);
    benchmark::DoNotOptimize(row.data());
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

void BM_StoreValues(benchmark::State& state, Simd simd) {
  std::vector<std::int32_t> row(values(state), 12345);
  std::vector<std::uint8_t> packet = empty_packet(row.size());
  for (auto _ : state) {
    atp::store_values(packet, row, simd);
    benchmark::DoNotOptimize(packet.data());
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

// PS: a packet added into the int64 sums (the saturation check included).
void BM_AddToSums(benchmark::State& state, Simd simd) {
  const auto packet = gradient_packet(values(state));
  std::vector<std::int64_t> sums(values(state));
  for (auto _ : state) {
    benchmark::DoNotOptimize(atp::add_to_sums(packet, sums, simd));
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

// PS: the int sums sent as the result.
void BM_StoreSums(benchmark::State& state, Simd simd) {
  std::vector<std::int64_t> sums(values(state), 123456);
  std::vector<std::uint8_t> packet = empty_packet(sums.size());
  for (auto _ : state) {
    atp::store_sums(packet, sums, simd);
    benchmark::DoNotOptimize(packet.data());
    benchmark::ClobberMemory();
  }
  finish(state, simd);
}

}  // namespace

#define ATP_VALUE_BENCHMARK(fn)                                            \
  BENCHMARK_CAPTURE(fn, best, Simd::kBest)->Arg(62)->Arg(1024)->Arg(4096); \
  BENCHMARK_CAPTURE(fn, scalar, Simd::kScalar)->Arg(62)->Arg(1024)->Arg(4096)

ATP_VALUE_BENCHMARK(BM_StoreQuantized);
BENCHMARK(BM_Quantize)->Arg(62)->Arg(1024)->Arg(4096);
ATP_VALUE_BENCHMARK(BM_LoadDequantized);
ATP_VALUE_BENCHMARK(BM_AccumulateValues);
ATP_VALUE_BENCHMARK(BM_LoadValues);
ATP_VALUE_BENCHMARK(BM_StoreValues);
ATP_VALUE_BENCHMARK(BM_AddToSums);
ATP_VALUE_BENCHMARK(BM_StoreSums);
BENCHMARK_MAIN();
