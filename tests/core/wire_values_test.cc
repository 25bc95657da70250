// Tests of the value passes of the wire format (wire.h, src/core/wire_values.cc): the scalar and
// the AVX2 loops against per-value references written out here, bit for bit, at every length
// 0..70 (vector steps and tails), at unaligned starts, and on the fixed-point edge cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <span>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/wire.h"

namespace atp {

// Names the path in failure messages (gtest finds it next to Simd).
void PrintTo(Simd simd, std::ostream* os) { *os << (simd == Simd::kScalar ? "Simd::kScalar" : "Simd::kBest"); }

namespace {

constexpr std::size_t kMaxLength = 70;    // values: several 8-value steps and every tail length
constexpr std::size_t kMaxOffset = 3;     // bytes (packets) or elements (arrays) off the start
constexpr std::uint8_t kSentinel = 0xA5;  // in every byte a pass must not write
constexpr std::size_t kGuard = 40;        // bytes or elements of sentinel after a buffer's end

// --- References: the house definitions, value by value, independent of the code under test.

std::int32_t reference_quantize(float x, double scale) {
  if (std::isnan(x)) return kSaturatedMin;
  const double v = std::clamp(static_cast<double>(x) * scale, -2147483648.0, 2147483647.0);
  return static_cast<std::int32_t>(std::nearbyint(v));  // the default mode: to nearest, ties to even
}

float reference_dequantize(std::int32_t v, double scale) { return static_cast<float>(static_cast<double>(v) / scale); }

std::int32_t reference_sticky_add(std::int32_t sum, std::int32_t value) {
  constexpr std::int64_t kMin = kSaturatedMin;
  constexpr std::int64_t kMax = kSaturatedMax;
  if (sum == kMin || sum == kMax) return sum;
  if (value == kMin || value == kMax) return value;
  return static_cast<std::int32_t>(std::clamp(std::int64_t{sum} + value, kMin, kMax));
}

// --- Buffers with unaligned starts and guard zones.

// A packet of n values `offset` bytes into a buffer of sentinel bytes.
class PacketBuffer {
 public:
  PacketBuffer(std::size_t n, std::size_t offset)
      : bytes_(offset + kHeaderBytes + 4 * n + kGuard, kSentinel), offset_(offset), n_(n) {}

  std::span<std::uint8_t> packet() { return std::span(bytes_).subspan(offset_, kHeaderBytes + 4 * n_); }
  // Value i as the wire defines it: big-endian, after the header.
  std::uint32_t word(std::size_t i) const {
    const std::uint8_t* p = bytes_.data() + offset_ + kHeaderBytes + 4 * i;
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
  }
  void set_word(std::size_t i, std::uint32_t v) {
    std::uint8_t* p = bytes_.data() + offset_ + kHeaderBytes + 4 * i;
    for (int b = 0; b < 4; ++b) p[b] = static_cast<std::uint8_t>(v >> (24 - 8 * b));
  }
  // Whether every byte outside the values (before them: the header; after them) is untouched.
  bool only_values_written() const {
    const std::size_t begin = offset_ + kHeaderBytes;
    const std::size_t end = begin + 4 * n_;
    for (std::size_t k = 0; k < bytes_.size(); ++k) {
      if ((k < begin || k >= end) && bytes_[k] != kSentinel) return false;
    }
    return true;
  }

 private:
  std::vector<std::uint8_t> bytes_;
  std::size_t offset_;
  std::size_t n_;
};

// n elements `offset` elements into a vector, with guard elements of `sentinel` around them.
template <class T>
class ArrayBuffer {
 public:
  ArrayBuffer(std::size_t n, std::size_t offset, T sentinel)
      : items_(offset + n + kGuard, sentinel), offset_(offset), n_(n), sentinel_(sentinel) {}
  std::span<T> span() { return std::span(items_).subspan(offset_, n_); }
  bool guards_intact() const {
    for (std::size_t k = 0; k < items_.size(); ++k) {
      if ((k < offset_ || k >= offset_ + n_) && !same_bits(items_[k], sentinel_)) return false;
    }
    return true;
  }

 private:
  static bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }
  std::vector<T> items_;
  std::size_t offset_;
  std::size_t n_;
  T sentinel_;
};

// --- Inputs: random values with the edge cases mixed in at every position.

// The edge cases of the fixed-point conversion (and some plain values).
const std::vector<float>& special_floats() {
  static const std::vector<float> values = [] {
    using Limits = std::numeric_limits<float>;
    const float nan = Limits::quiet_NaN();
    const float inf = Limits::infinity();
    std::vector<float> v = {nan, -nan, Limits::signaling_NaN(), std::bit_cast<float>(0x7FC12345u),
                            std::bit_cast<float>(0xFF800001u)};  // NaNs: quiet, signalling, with payloads
    v.insert(v.end(), {inf, -inf, 0.0f, -0.0f, Limits::max(), -Limits::max(), Limits::min()});
    v.insert(v.end(), {Limits::denorm_min(), -Limits::denorm_min(), std::bit_cast<float>(0x007FFFFFu)});  // denormals
    v.insert(v.end(), {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1.25f, -1.25f, 0.25f, 0.75f});  // ties with scale 1 or 2
    v.insert(v.end(), {2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f});        // either side of +-2^31
    v.insert(v.end(), {21.474836f, 21.474838f, -21.474836f, -21.474838f});  // either side of +-2^31 / 1e8
    v.insert(v.end(), {1.0f, -1.0f, 3.0f, 0.3f, 0.26f});
    return v;
  }();
  return values;
}

// Scales that put the edge cases at the edges: ties (1, 2), ties at +-2^31 after scaling (x = +-1
// times 2147483647.5 or 2147483648.5, x = 0.5 times 4294967295), denormals to whole numbers (1e40),
// and the usual ones.
const std::vector<double>& scales() {
  static const std::vector<double> values = {kDefaultScale, 1.0,  2.0,          1e-3,         3.0,
                                             1e6,           1e40, 2147483647.5, 2147483648.5, 4294967295.0};
  return values;
}

float random_float(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:  // any bit pattern: NaNs, infinities, denormals, huge and tiny values
      return std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    case 1:  // an edge case
      return special_floats()[rng() % special_floats().size()];
    default:  // a gradient-like value, of magnitude 1e-6 .. 1e3
      return static_cast<float>((static_cast<double>(rng() % 2000001) / 1e6 - 1.0) * std::pow(10.0, rng() % 10 - 6.0));
  }
}

// Values near the ends and at them, often enough that sums overflow either way.
std::int32_t random_value(std::mt19937_64& rng) {
  const auto any = static_cast<std::int32_t>(rng());
  const auto small = static_cast<std::int32_t>(rng() % 1000);
  switch (rng() % 8) {
    case 0:
      return kSaturatedMax;
    case 1:
      return kSaturatedMin;
    case 2:
      return kSaturatedMax - 1 - small;
    case 3:
      return kSaturatedMin + 1 + small;
    case 4:
      return small - 500;
    default:
      return any;
  }
}

// The cases of one pass: every length 0..kMaxLength at every offset 0..kMaxOffset, with a few seeds.
template <class Body>
void for_each_case(Body body) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    for (std::size_t n = 0; n <= kMaxLength; ++n) {
      for (std::size_t offset = 0; offset <= kMaxOffset; ++offset) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " length " << n << " offset " << offset);
        body(n, offset, rng);
      }
    }
  }
}

// Both implementations. On a CPU with AVX2 (cpu_has_avx2()), kBest runs the AVX2 loops.
class WireValues : public testing::TestWithParam<Simd> {};

INSTANTIATE_TEST_SUITE_P(Paths, WireValues, testing::Values(Simd::kScalar, Simd::kBest),
                         [](const testing::TestParamInfo<Simd>& p) {
                           return p.param == Simd::kScalar ? "Scalar" : "Best";
                         });

TEST_P(WireValues, StoreQuantizedMatchesReference) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    ArrayBuffer<float> in(n, offset, 0.0f);
    for (float& x : in.span()) x = random_float(rng);
    // Every edge case in every lane and in the tail, across lengths and offsets.
    for (std::size_t i = 0; i < n; ++i) {
      if (rng() % 2 == 0) in.span()[i] = special_floats()[(i + n) % special_floats().size()];
    }
    const double scale = scales()[rng() % scales().size()];
    PacketBuffer p(n, offset);
    store_quantized(p.packet(), in.span(), scale, GetParam());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<std::int32_t>(p.word(i)), reference_quantize(in.span()[i], scale))
          << "value " << i << " = " << in.span()[i] << " scale " << scale;
    }
    EXPECT_TRUE(p.only_values_written());
  });
}

// quantize (fixed_point.h) shares store_quantized's loop, without the byte swap.
TEST(WireValuesQuantize, MatchesReferenceAtEveryLength) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    ArrayBuffer<float> in(n, offset, 0.0f);
    for (float& x : in.span()) x = random_float(rng);
    const double scale = scales()[rng() % scales().size()];
    ArrayBuffer<std::int32_t> out(n, offset, 12345);
    quantize(in.span(), scale, out.span());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out.span()[i], reference_quantize(in.span()[i], scale))
          << "value " << i << " = " << in.span()[i] << " scale " << scale;
    }
    EXPECT_TRUE(out.guards_intact());
  });
}

// The edge cases of the conversion one by one, at each scale, in a run long enough for the vector loop.
TEST_P(WireValues, StoreQuantizedEdgeCases) {
  const std::vector<float>& in = special_floats();
  for (const double scale : scales()) {
    PacketBuffer p(in.size(), 0);
    store_quantized(p.packet(), in, scale, GetParam());
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(static_cast<std::int32_t>(p.word(i)), reference_quantize(in[i], scale))
          << in[i] << " (bits " << std::hex << std::bit_cast<std::uint32_t>(in[i]) << ") scale " << scale;
    }
  }
  // A few spelled out, so that the reference is checked too: ties to even, the ends, NaN.
  const std::vector<float> spelled = {2.5f, -2.5f, 3.5f, 0.5f, 1e30f, -1e30f, std::numeric_limits<float>::quiet_NaN(),
                                      1.0f};
  PacketBuffer p(spelled.size(), 0);
  store_quantized(p.packet(), spelled, 1.0, GetParam());
  const std::vector<std::int32_t> want = {2, -2, 4, 0, kSaturatedMax, kSaturatedMin, kSaturatedMin, 1};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(static_cast<std::int32_t>(p.word(i)), want[i]) << i;
  // 1 x 2147483647.5 would round up past INT32_MAX: the clamp comes first.
  PacketBuffer top(8, 0);
  store_quantized(top.packet(), std::vector<float>(8, 1.0f), 2147483647.5, GetParam());
  EXPECT_EQ(static_cast<std::int32_t>(top.word(7)), kSaturatedMax);
}

TEST_P(WireValues, LoadDequantizedMatchesReference) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    PacketBuffer p(n, offset);
    std::vector<std::int32_t> values(n);
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = random_value(rng);
      p.set_word(i, static_cast<std::uint32_t>(values[i]));
    }
    const double scale = scales()[rng() % scales().size()];
    ArrayBuffer<float> out(n, offset, -7.0f);
    load_dequantized(p.packet(), scale, out.span(), GetParam());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out.span()[i]),
                std::bit_cast<std::uint32_t>(reference_dequantize(values[i], scale)))
          << "value " << i << " = " << values[i] << " scale " << scale;
    }
    EXPECT_TRUE(out.guards_intact());
  });
}

// A division by the scale, not a multiplication by 1 / scale: at scale 1e40 these values come out
// one float step apart the two ways (at the usual scales the two agree on every int32).
TEST_P(WireValues, LoadDequantizedDividesByTheScale) {
  constexpr double kScale = 1e40;
  const std::vector<std::int32_t> differ = {93137999, -186275998, 372551996, -745103992, 1490207984};
  std::vector<std::int32_t> values;  // each in a vector lane and in the tail
  for (std::size_t k = 0; k < 3; ++k) values.insert(values.end(), differ.begin(), differ.end());
  std::vector<float> out(values.size());
  load_dequantized(build_packet(Header{}, values), kScale, out, GetParam());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(out[i], reference_dequantize(values[i], kScale)) << values[i];
    EXPECT_NE(out[i], static_cast<float>(static_cast<double>(values[i]) * (1.0 / kScale))) << values[i];
  }
}

TEST_P(WireValues, AccumulateValuesMatchesReference) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    PacketBuffer p(n, offset);
    std::vector<std::int32_t> incoming(n);
    for (std::size_t i = 0; i < n; ++i) {
      incoming[i] = random_value(rng);
      p.set_word(i, static_cast<std::uint32_t>(incoming[i]));
    }
    ArrayBuffer<std::int32_t> row(n, offset, 12345);
    for (std::int32_t& v : row.span()) v = random_value(rng);
    const std::vector<std::int32_t> before(row.span().begin(), row.span().end());
    accumulate_values(p.packet(), row.span(), GetParam());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(row.span()[i], reference_sticky_add(before[i], incoming[i]))
          << "value " << i << ": " << before[i] << " + " << incoming[i];
    }
    EXPECT_TRUE(row.guards_intact());
  });
}

// Every pair of edge values, each as the sum and as the contribution.
TEST_P(WireValues, AccumulateValuesEdgePairs) {
  const std::vector<std::int32_t> edges = {kSaturatedMin, kSaturatedMin + 1, -(1 << 30),   -2, -1, 0, 1,
                                           1 << 30,       kSaturatedMax - 1, kSaturatedMax};
  std::vector<std::int32_t> row;
  std::vector<std::int32_t> incoming;
  for (const std::int32_t a : edges) {
    for (const std::int32_t b : edges) {
      row.push_back(a);
      incoming.push_back(b);
    }
  }
  const std::vector<std::uint8_t> packet = build_packet(Header{}, incoming);
  const std::vector<std::int32_t> before = row;
  accumulate_values(packet, row, GetParam());
  for (std::size_t i = 0; i < row.size(); ++i) {
    EXPECT_EQ(row[i], reference_sticky_add(before[i], incoming[i])) << before[i] << " + " << incoming[i];
    EXPECT_EQ(row[i], sticky_saturating_add(before[i], incoming[i])) << before[i] << " + " << incoming[i];
  }
}

TEST_P(WireValues, AddToSumsMatchesReference) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    PacketBuffer p(n, offset);
    std::vector<std::int32_t> values(n);
    bool any_saturated = false;
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = random_value(rng);
      if (rng() % 2 == 0 && is_saturated(values[i])) values[i] = 0;  // runs without saturation too
      any_saturated |= is_saturated(values[i]);
      p.set_word(i, static_cast<std::uint32_t>(values[i]));
    }
    ArrayBuffer<std::int64_t> sums(n, offset, -99);
    for (std::int64_t& s : sums.span())
      s = static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 42)) - (std::int64_t{1} << 41);
    const std::vector<std::int64_t> before(sums.span().begin(), sums.span().end());
    EXPECT_EQ(add_to_sums(p.packet(), sums.span(), GetParam()), any_saturated);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(sums.span()[i], before[i] + values[i]) << "value " << i;
    EXPECT_TRUE(sums.guards_intact());
  });
}

// One saturated value, at each position (every lane of the vector loop, and the tail), is reported.
TEST_P(WireValues, AddToSumsReportsOneSaturatedValueAnywhere) {
  for (std::size_t n = 0; n <= kMaxLength; ++n) {
    std::vector<std::int32_t> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = i % 2 == 0 ? kSaturatedMax - 1 : kSaturatedMin + 1;
    std::vector<std::int64_t> sums(n);
    EXPECT_FALSE(add_to_sums(build_packet(Header{}, values), sums, GetParam())) << "length " << n;
    for (std::size_t at = 0; at < n; ++at) {
      for (const std::int32_t saturated : {kSaturatedMax, kSaturatedMin}) {
        std::vector<std::int32_t> one = values;
        one[at] = saturated;
        EXPECT_TRUE(add_to_sums(build_packet(Header{}, one), sums, GetParam())) << "length " << n << " at " << at;
      }
    }
  }
}

TEST_P(WireValues, StoreSumsMatchesReference) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    ArrayBuffer<std::int64_t> sums(n, offset, 0);
    for (std::int64_t& s : sums.span()) {
      // Mostly in int32 range, as the PS sends them; the low 32 bits otherwise (static_cast).
      s = rng() % 4 == 0 ? static_cast<std::int64_t>(rng()) : random_value(rng);
    }
    PacketBuffer p(n, offset);
    store_sums(p.packet(), sums.span(), GetParam());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<std::int32_t>(p.word(i)), static_cast<std::int32_t>(sums.span()[i])) << "value " << i;
    }
    EXPECT_TRUE(p.only_values_written());
  });
}

TEST_P(WireValues, LoadAndStoreValuesInNetworkOrder) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    ArrayBuffer<std::int32_t> values(n, offset, 77);
    for (std::int32_t& v : values.span()) v = static_cast<std::int32_t>(rng());
    PacketBuffer p(n, offset);
    store_values(p.packet(), values.span(), GetParam());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(p.word(i), static_cast<std::uint32_t>(values.span()[i])) << i;
    EXPECT_TRUE(p.only_values_written());
    ArrayBuffer<std::int32_t> back(n, offset, 88);
    load_values(p.packet(), back.span(), GetParam());
    EXPECT_TRUE(std::equal(back.span().begin(), back.span().end(), values.span().begin()));
    EXPECT_TRUE(back.guards_intact());
  });
}

// Float32 payloads keep their bit patterns, NaN payloads and signalling NaNs included.
TEST_P(WireValues, LoadAndStoreFloatsKeepBitPatterns) {
  for_each_case([&](std::size_t n, std::size_t offset, std::mt19937_64& rng) {
    ArrayBuffer<float> floats(n, offset, 1.0f);
    for (float& x : floats.span()) x = random_float(rng);
    PacketBuffer p(n, offset);
    store_floats(p.packet(), floats.span(), GetParam());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(p.word(i), std::bit_cast<std::uint32_t>(floats.span()[i])) << i;
    EXPECT_TRUE(p.only_values_written());
    ArrayBuffer<float> back(n, offset, 2.0f);
    load_floats(p.packet(), back.span(), GetParam());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(back.span()[i]), std::bit_cast<std::uint32_t>(floats.span()[i])) << i;
    }
    EXPECT_TRUE(back.guards_intact());
  });
}

// Simd::kBest is the AVX2 loop exactly where the CPU has AVX2, so that the tests above cover it.
TEST(WireValuesCpu, BestIsAvx2WhereTheCpuHasIt) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(cpu_has_avx2(), __builtin_cpu_supports("avx2") != 0);
#else
  EXPECT_FALSE(cpu_has_avx2());
#endif
  std::printf("Simd::kBest runs the %s loops here\n", cpu_has_avx2() ? "AVX2" : "scalar");
}

}  // namespace
}  // namespace atp
