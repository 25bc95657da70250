// The values after the ATP header (big-endian 32-bit words) to and from memory in one pass each:
// byte order, fixed point and the switch's and the PS's additions fused (wire.h); and quantize
// (fixed_point.h), which shares store_quantized's loop. AVX2 where the CPU has it.
#include <cmath>
#include <cstring>
#include <limits>

#include "atp/big_endian.h"
#include "atp/fixed_point.h"
#include "atp/wire.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace atp {
namespace {

using big_endian::get32;
using big_endian::put32;

// Every pass is a loop over n values, `wire` pointing at the first value's bytes in the packet.

// The scalar loops: the definitions (in terms of fixed_point.h), the whole pass on CPUs without
// AVX2, and the tail (n % 8 values) of the AVX2 loops.
namespace scalar {

std::int32_t value(const std::uint8_t* wire, std::size_t i) { return static_cast<std::int32_t>(get32(wire + 4 * i)); }

// `host`: the bytes of int32 or float objects, copied as such (no float arithmetic, so that NaN
// payloads pass unchanged).
void wire_to_host(const std::uint8_t* wire, std::size_t n, std::uint8_t* host) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t v = get32(wire + 4 * i);
    std::memcpy(host + 4 * i, &v, 4);
  }
}

void host_to_wire(const std::uint8_t* host, std::size_t n, std::uint8_t* wire) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t v;
    std::memcpy(&v, host + 4 * i, 4);
    put32(wire + 4 * i, v);
  }
}

void quantize(const float* in, std::size_t n, double scale, std::int32_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = quantize_one(in[i], scale);
}

void store_quantized(const float* in, std::size_t n, double scale, std::uint8_t* wire) {
  for (std::size_t i = 0; i < n; ++i) put32(wire + 4 * i, static_cast<std::uint32_t>(quantize_one(in[i], scale)));
}

void load_dequantized(const std::uint8_t* wire, std::size_t n, double scale, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = dequantize_one(value(wire, i), scale);
}

void accumulate(const std::uint8_t* wire, std::size_t n, std::int32_t* row) {
  for (std::size_t i = 0; i < n; ++i) row[i] = sticky_saturating_add(row[i], value(wire, i));
}

bool add_to_sums(const std::uint8_t* wire, std::size_t n, std::int64_t* sums) {
  bool saturated = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t v = value(wire, i);
    saturated |= is_saturated(v);
    sums[i] += v;
  }
  return saturated;
}

void store_sums(const std::int64_t* sums, std::size_t n, std::uint8_t* wire) {
  for (std::size_t i = 0; i < n; ++i) put32(wire + 4 * i, static_cast<std::uint32_t>(sums[i]));
}

}  // namespace scalar

#if defined(__x86_64__)

// The AVX2 loops: 8 values (32 bytes) per step, unaligned loads and stores, then the scalar loop
// for the rest. Compiled for AVX2 function by function (the target attribute), so the binary
// still runs on any x86-64; they are only called where cpu_has_avx2().
namespace avx2 {

#define ATP_AVX2 __attribute__((target("avx2")))

constexpr std::size_t kStep = 8;

// Reverses the bytes of each 32-bit lane (big-endian <-> x86's little-endian). pshufb sets byte
// k of each 128-bit half to the byte of that half that the k-th index names.
ATP_AVX2 __m256i swap_bytes(__m256i v) {
  const __m256i order = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                                         3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
  return _mm256_shuffle_epi8(v, order);
}

ATP_AVX2 __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
ATP_AVX2 void store(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
// Values i..i+7, in host order.
ATP_AVX2 __m256i load_wire(const std::uint8_t* wire, std::size_t i) { return swap_bytes(load(wire + 4 * i)); }
ATP_AVX2 void store_wire(std::uint8_t* wire, std::size_t i, __m256i v) { store(wire + 4 * i, swap_bytes(v)); }

// All ones in the lanes that hold INT32_MAX or INT32_MIN.
ATP_AVX2 __m256i saturated_lanes(__m256i v) {
  return _mm256_or_si256(_mm256_cmpeq_epi32(v, _mm256_set1_epi32(kSaturatedMax)),
                         _mm256_cmpeq_epi32(v, _mm256_set1_epi32(kSaturatedMin)));
}

ATP_AVX2 void wire_to_host(const std::uint8_t* wire, std::size_t n, std::uint8_t* host) {
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) store(host + 4 * i, load_wire(wire, i));
  scalar::wire_to_host(wire + 4 * i, n - i, host + 4 * i);
}

ATP_AVX2 void host_to_wire(const std::uint8_t* host, std::size_t n, std::uint8_t* wire) {
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) store_wire(wire, i, load(host + 4 * i));
  scalar::host_to_wire(host + 4 * i, n - i, wire + 4 * i);
}

// Four values as quantize_one does them. The product is the same double product. maxpd returns
// its second operand when either is NaN, so max(NaN, min) = min: NaN -> INT32_MIN without a
// compare; +-inf clamp like any large value. cvtpd2dq rounds in the current (MXCSR) mode, as
// lrint does: to nearest even.
ATP_AVX2 __m128i quantize4(__m128 x, __m256d scale) {
  const __m256d v = _mm256_mul_pd(_mm256_cvtps_pd(x), scale);
  const __m256d clamped = _mm256_min_pd(_mm256_max_pd(v, _mm256_set1_pd(kSaturatedMin)), _mm256_set1_pd(kSaturatedMax));
  return _mm256_cvtpd_epi32(clamped);
}

// in[0..7] quantized, in host order.
ATP_AVX2 __m256i quantize8(const float* in, __m256d scale) {
  const __m128i lo = quantize4(_mm_loadu_ps(in), scale);
  const __m128i hi = quantize4(_mm_loadu_ps(in + 4), scale);
  return _mm256_set_m128i(hi, lo);
}

ATP_AVX2 void quantize(const float* in, std::size_t n, double scale, std::int32_t* out) {
  const __m256d vscale = _mm256_set1_pd(scale);
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) store(out + i, quantize8(in + i, vscale));
  scalar::quantize(in + i, n - i, scale, out + i);
}

ATP_AVX2 void store_quantized(const float* in, std::size_t n, double scale, std::uint8_t* wire) {
  const __m256d vscale = _mm256_set1_pd(scale);
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) store_wire(wire, i, quantize8(in + i, vscale));
  scalar::store_quantized(in + i, n - i, scale, wire + 4 * i);
}

// Four values as dequantize_one does them: int32 -> double is exact, then a division (not a
// multiplication by 1 / scale), and cvtpd2ps rounds in the current mode, as static_cast<float>.
ATP_AVX2 __m128 dequantize4(__m128i v, __m256d scale) {
  return _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtepi32_pd(v), scale));
}

ATP_AVX2 void load_dequantized(const std::uint8_t* wire, std::size_t n, double scale, float* out) {
  const __m256d vscale = _mm256_set1_pd(scale);
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const __m256i v = load_wire(wire, i);
    _mm_storeu_ps(out + i, dequantize4(_mm256_castsi256_si128(v), vscale));
    _mm_storeu_ps(out + i + 4, dequantize4(_mm256_extracti128_si256(v, 1), vscale));
  }
  scalar::load_dequantized(wire + 4 * i, n - i, scale, out + i);
}

// Eight sticky_saturating_add. AVX2 has no saturating 32-bit add: the wrapped sum s = a + b
// overflowed iff a and b have the same sign and s the other one, that is iff the sign bit of
// (s ^ a) & (s ^ b) is set; the saturated result then has a's sign: (a >> 31) ^ INT32_MAX is
// INT32_MAX for a >= 0 and INT32_MIN for a < 0.
ATP_AVX2 __m256i sticky_saturating_add8(__m256i sum, __m256i value) {
  const __m256i wrapped = _mm256_add_epi32(sum, value);
  const __m256i overflow = _mm256_and_si256(_mm256_xor_si256(wrapped, sum), _mm256_xor_si256(wrapped, value));
  const __m256i clamped = _mm256_xor_si256(_mm256_srai_epi32(sum, 31), _mm256_set1_epi32(kSaturatedMax));
  // blendvps picks by the sign bit of each 32-bit lane alone, so `overflow` needs no compare (a
  // blend moves bits: no float arithmetic happens).
  __m256i r = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(wrapped), _mm256_castsi256_ps(clamped), _mm256_castsi256_ps(overflow)));
  r = _mm256_blendv_epi8(r, value, saturated_lanes(value));  // a saturated value wins over the sum...
  return _mm256_blendv_epi8(r, sum, saturated_lanes(sum));   // ...and a saturated sum over everything
}

ATP_AVX2 void accumulate(const std::uint8_t* wire, std::size_t n, std::int32_t* row) {
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) store(row + i, sticky_saturating_add8(load(row + i), load_wire(wire, i)));
  scalar::accumulate(wire + 4 * i, n - i, row + i);
}

ATP_AVX2 bool add_to_sums(const std::uint8_t* wire, std::size_t n, std::int64_t* sums) {
  __m256i saturated = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const __m256i v = load_wire(wire, i);
    saturated = _mm256_or_si256(saturated, saturated_lanes(v));
    // Sign-extend each half to four int64 and add.
    store(sums + i, _mm256_add_epi64(load(sums + i), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v))));
    store(sums + i + 4, _mm256_add_epi64(load(sums + i + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1))));
  }
  const bool tail_saturated = scalar::add_to_sums(wire + 4 * i, n - i, sums + i);
  return tail_saturated || !_mm256_testz_si256(saturated, saturated);
}

ATP_AVX2 void store_sums(const std::int64_t* sums, std::size_t n, std::uint8_t* wire) {
  // The low 32 bits of each int64 are its even 32-bit lane: gather them into the low 128 bits
  // of each of two vectors, then join those halves.
  const __m256i even_lanes_first = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const __m256i lo = _mm256_permutevar8x32_epi32(load(sums + i), even_lanes_first);
    const __m256i hi = _mm256_permutevar8x32_epi32(load(sums + i + 4), even_lanes_first);
    store_wire(wire, i, _mm256_permute2x128_si256(lo, hi, 0x20));  // lo's low half, then hi's
  }
  scalar::store_sums(sums + i, n - i, wire + 4 * i);
}

#undef ATP_AVX2

}  // namespace avx2

#else
namespace avx2 = scalar;  // never chosen (cpu_has_avx2() is false); lets the dispatch below compile
#endif

bool use_avx2(Simd simd) { return simd == Simd::kBest && cpu_has_avx2(); }

std::uint8_t* values_of(std::span<std::uint8_t> packet) { return packet.data() + kHeaderBytes; }
const std::uint8_t* values_of(std::span<const std::uint8_t> packet) { return packet.data() + kHeaderBytes; }

// The byte swaps of int32 and float values alike: `host` is their bytes.
void wire_to_host(std::span<const std::uint8_t> packet, std::size_t n, void* host, Simd simd) {
  auto* bytes = static_cast<std::uint8_t*>(host);
  if (use_avx2(simd)) {
    avx2::wire_to_host(values_of(packet), n, bytes);
  } else {
    scalar::wire_to_host(values_of(packet), n, bytes);
  }
}

void host_to_wire(const void* host, std::size_t n, std::span<std::uint8_t> packet, Simd simd) {
  const auto* bytes = static_cast<const std::uint8_t*>(host);
  if (use_avx2(simd)) {
    avx2::host_to_wire(bytes, n, values_of(packet));
  } else {
    scalar::host_to_wire(bytes, n, values_of(packet));
  }
}

}  // namespace

bool cpu_has_avx2() {
#if defined(__x86_64__)
  // __builtin_cpu_supports also checks that the OS saves the AVX registers (XGETBV), not only
  // the CPUID bit.
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
#else
  return false;
#endif
}

void load_values(std::span<const std::uint8_t> packet, std::span<std::int32_t> out, Simd simd) {
  wire_to_host(packet, out.size(), out.data(), simd);
}

void store_values(std::span<std::uint8_t> packet, std::span<const std::int32_t> values, Simd simd) {
  host_to_wire(values.data(), values.size(), packet, simd);
}

void load_floats(std::span<const std::uint8_t> packet, std::span<float> out, Simd simd) {
  wire_to_host(packet, out.size(), out.data(), simd);
}

void store_floats(std::span<std::uint8_t> packet, std::span<const float> values, Simd simd) {
  host_to_wire(values.data(), values.size(), packet, simd);
}

void quantize(std::span<const float> in, double scale, std::span<std::int32_t> out) {
  if (cpu_has_avx2()) {
    avx2::quantize(in.data(), in.size(), scale, out.data());
  } else {
    scalar::quantize(in.data(), in.size(), scale, out.data());
  }
}

void store_quantized(std::span<std::uint8_t> packet, std::span<const float> in, double scale, Simd simd) {
  if (use_avx2(simd)) {
    avx2::store_quantized(in.data(), in.size(), scale, values_of(packet));
  } else {
    scalar::store_quantized(in.data(), in.size(), scale, values_of(packet));
  }
}

void load_dequantized(std::span<const std::uint8_t> packet, double scale, std::span<float> out, Simd simd) {
  if (use_avx2(simd)) {
    avx2::load_dequantized(values_of(packet), out.size(), scale, out.data());
  } else {
    scalar::load_dequantized(values_of(packet), out.size(), scale, out.data());
  }
}

void accumulate_values(std::span<const std::uint8_t> packet, std::span<std::int32_t> row, Simd simd) {
  if (use_avx2(simd)) {
    avx2::accumulate(values_of(packet), row.size(), row.data());
  } else {
    scalar::accumulate(values_of(packet), row.size(), row.data());
  }
}

bool add_to_sums(std::span<const std::uint8_t> packet, std::span<std::int64_t> sums, Simd simd) {
  return use_avx2(simd) ? avx2::add_to_sums(values_of(packet), sums.size(), sums.data())
                        : scalar::add_to_sums(values_of(packet), sums.size(), sums.data());
}

void store_sums(std::span<std::uint8_t> packet, std::span<const std::int64_t> sums, Simd simd) {
  if (use_avx2(simd)) {
    avx2::store_sums(sums.data(), sums.size(), values_of(packet));
  } else {
    scalar::store_sums(sums.data(), sums.size(), values_of(packet));
  }
}

std::int16_t magnitude_of(std::span<const float> values) {
  float largest = 0;
  for (const float x : values) {
    const float a = std::fabs(x);
    largest = a > largest && a <= std::numeric_limits<float>::max() ? a : largest;  // NaN and infinities: not
  }
  return largest == 0 ? kNoMagnitude : static_cast<std::int16_t>(std::ilogb(largest));
}

}  // namespace atp
