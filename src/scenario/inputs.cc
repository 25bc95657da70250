// Seeded allreduce inputs and the exact result check shared by the scenario backends
// (see inputs.h for why they live in one place).
#include "atp/scenario/inputs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

#include "atp/fixed_point.h"

namespace atp::scenario_inputs {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Rounding bound of the float path: the PS sums float32 values in double and rounds once to
// float32 (<= 2^-24 relative), plus the double sums' own error; 2^-23 x sum|x| covers both.
constexpr double kFloatBound = 1.0 / 8388608.0;

// A collective that adds n float32 values in float32, in any order (ring, Gloo), rounds up to
// n - 1 times, each time by at most 2^-24 of a partial sum, itself at most sum|x|.
constexpr double kFloat32AddBound = 1.0 / 16777216.0;

bool float_ok(const RoundReference& ref, std::size_t i, float got, double* expected_out, double* tolerance_out,
              bool float32_sums) {
  const double expected = static_cast<float>(ref.float_sum[i]);
  const double bound = kFloatBound + (float32_sums ? kFloat32AddBound * static_cast<double>(ref.addends) : 0.0);
  const double tolerance = ref.abs_sum[i] * bound + std::numeric_limits<float>::denorm_min();
  if (expected_out) *expected_out = expected;
  if (tolerance_out) *tolerance_out = tolerance;
  return got == expected || std::fabs(static_cast<double>(got) - expected) <= tolerance;
}

float input_value(std::uint64_t seed, std::size_t index, double magnitude) {
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  // SplitMix64's output number `index` of the stream seeded with `seed`: any value can be drawn
  // without the ones before it, so a reference is built block by block in cache.
  const double u = static_cast<double>(splitmix64(seed + index * 0x9E3779B97F4A7C15ull) >> 11) * kUnit;  // [0, 1)
  return static_cast<float>(magnitude * (2.0 * u - 1.0));
}

}  // namespace

std::uint64_t input_seed(std::uint64_t seed, JobId job, std::size_t worker, std::uint32_t round) {
  std::uint64_t s = splitmix64(seed);
  s = splitmix64(s ^ job);
  s = splitmix64(s ^ worker);
  return splitmix64(s ^ round);
}

void generate_input(std::uint64_t seed, double magnitude, std::span<float> out, std::size_t first) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = input_value(seed, first + i, magnitude);
}

namespace {

// The sums of round `round` at ref.exponents (one per fragment; empty: the job's first exponent
// from `scale` for all), and with `magnitudes`, each fragment's largest magnitude this round.
void sum_round(std::uint64_t seed, JobId job, std::size_t workers, std::uint32_t round, std::size_t elements,
               double magnitude, double scale, std::size_t width, RoundReference& ref, bool magnitudes,
               std::span<const std::uint32_t> excluded = {}) {
  ref.int_sum.assign(elements, 0);
  ref.float_sum.assign(elements, 0.0);
  ref.abs_sum.assign(elements, 0.0);
  auto is_excluded = [&](std::size_t w) { return std::find(excluded.begin(), excluded.end(), w) != excluded.end(); };
  ref.addends = 0;
  for (std::size_t w = 0; w < workers; ++w) ref.addends += is_excluded(w) ? 0 : 1;
  const std::size_t pieces = (elements + width - 1) / width;
  if (magnitudes) ref.magnitudes.assign(pieces, kNoMagnitude);
  std::vector<float> input(width);
  std::vector<std::int32_t> quantized(width);
  for (std::size_t k = 0; k < pieces; ++k) {
    const std::size_t begin = k * width, n = std::min(width, elements - k * width);
    const std::span<float> in = std::span(input).first(n);
    const double piece_scale = std::ldexp(1.0, ref.exponents.empty() ? initial_exponent(scale) : ref.exponents[k]);
    for (std::size_t w = 0; w < workers; ++w) {
      if (is_excluded(w)) continue;
      generate_input(input_seed(seed, job, w, round), magnitude, in, begin);
      quantize(in, piece_scale, std::span(quantized).first(n));
      if (magnitudes) ref.magnitudes[k] = std::max(ref.magnitudes[k], magnitude_of(in));
      for (std::size_t i = 0; i < n; ++i) {
        ref.int_sum[begin + i] += quantized[i];
        ref.float_sum[begin + i] += input[i];
        ref.abs_sum[begin + i] += std::fabs(static_cast<double>(input[i]));
      }
    }
  }
}

// Fragment by fragment (2048 values at a time when there are none): every worker's share of it,
// so that the sums stay in cache while they grow.
constexpr std::size_t kBlock = 2048;

}  // namespace

void make_reference(std::uint64_t seed, JobId job, std::size_t workers, std::uint32_t round, std::size_t elements,
                    double magnitude, double scale, std::size_t values_per_packet, RoundReference& ref) {
  const std::size_t width = values_per_packet != 0 ? values_per_packet : kBlock;
  const std::size_t pieces = (elements + width - 1) / width;
  std::vector<float> input(width);
  auto piece = [&](std::size_t k) { return std::pair{k * width, std::min(width, elements - k * width)}; };
  // The exponents: the PS's choice from each fragment's largest magnitude in the last round that
  // had values in it (drawing those rounds' inputs again), else the first round's.
  ref.exponents.assign(values_per_packet != 0 ? pieces : 0, initial_exponent(scale));
  std::vector<bool> known(ref.exponents.size(), false);
  std::size_t left = ref.exponents.size();
  for (std::uint32_t earlier = round; earlier-- > 0 && left > 0;) {
    for (std::size_t k = 0; k < ref.exponents.size(); ++k) {
      if (known[k]) continue;
      const auto [begin, n] = piece(k);
      std::int16_t largest = kNoMagnitude;
      for (std::size_t w = 0; w < workers; ++w) {
        generate_input(input_seed(seed, job, w, earlier), magnitude, std::span(input).first(n), begin);
        largest = std::max(largest, magnitude_of(std::span(input).first(n)));
      }
      if (largest == kNoMagnitude) continue;
      ref.exponents[k] = next_exponent(largest, static_cast<std::uint32_t>(workers), ref.exponents[k]);
      known[k] = true;
      --left;
    }
  }
  sum_round(seed, job, workers, round, elements, magnitude, scale, width, ref, false);
}

void make_reference_at(std::uint64_t seed, JobId job, std::size_t workers, std::uint32_t round, std::size_t elements,
                       double magnitude, std::size_t values_per_packet, std::span<const std::int16_t> exponents,
                       RoundReference& ref, std::span<const std::uint32_t> excluded) {
  if (values_per_packet == 0 ||
      exponents.size() != fragment_count(elements, static_cast<std::uint16_t>(values_per_packet))) {
    throw std::invalid_argument("make_reference_at: one exponent per fragment of values_per_packet values");
  }
  ref.exponents.assign(exponents.begin(), exponents.end());
  sum_round(seed, job, workers, round, elements, magnitude, kDefaultScale, values_per_packet, ref, true, excluded);
}

std::string unresolved_fragment(const RoundReference& ref, std::size_t values_per_packet) {
  for (std::size_t k = 0; k < ref.magnitudes.size() && k < ref.exponents.size(); ++k) {
    if (!resolved(ref.magnitudes[k], ref.exponents[k], static_cast<std::uint32_t>(ref.addends))) {
      return "fragment " + std::to_string(k) + " (values " + std::to_string(k * values_per_packet) +
             "..) came back at exponent " + std::to_string(ref.exponents[k]) + ", which does not hold its largest " +
             "value (2^" + std::to_string(ref.magnitudes[k]) + ") to float32's precision";
    }
  }
  return "";
}

std::string check_result(const RoundReference& ref, std::span<const float> result, const std::vector<bool>& is_float,
                         std::size_t values_per_packet, std::uint64_t* float_fragments_seen, bool float32_sums,
                         std::uint64_t* wrong_values) {
  const std::size_t n = ref.int_sum.size();
  if (result.size() != n) {
    return "result has " + std::to_string(result.size()) + " values, expected " + std::to_string(n);
  }
  // Fragments matter only where a fragment may have taken the float path on its own; a float32
  // collective's sum is one whole (its width then need not be given).
  if (!float32_sums && values_per_packet != 0 &&
      ref.exponents.size() != fragment_count(n, static_cast<std::uint16_t>(values_per_packet))) {
    throw std::invalid_argument("check_result: the reference was made for fragments of another width");
  }
  if (values_per_packet == 0 && !float32_sums) {
    throw std::invalid_argument("check_result: values_per_packet 0 (the fragments' width must be known)");
  }
  const std::size_t vpp = float32_sums ? std::max<std::size_t>(n, 1) : values_per_packet;
  std::string first_wrong;
  // One more wrong value: `describe` gives its sentence, called for the first one only (a stream
  // per value would cost more than the whole check). True when the check stops here.
  auto wrong = [&](auto describe) {
    if (first_wrong.empty()) first_wrong = describe();
    if (wrong_values == nullptr) return true;
    ++*wrong_values;
    return false;
  };
  for (std::size_t begin = 0; begin < n; begin += vpp) {
    const std::size_t end = std::min(n, begin + vpp);
    const std::size_t fragment = begin / vpp;
    // The exact int32 path's value i: the sum at the fragment's exponent, as the worker divides it.
    const double scale = float32_sums || ref.exponents.empty() ? 1.0 : std::ldexp(1.0, ref.exponents[fragment]);
    // Which path to hold the fragment to: known, or (unknown) the int path unless a value differs.
    bool as_float = float32_sums || (!is_float.empty() && is_float[fragment]);
    if (is_float.empty() && !float32_sums) {
      for (std::size_t i = begin; i < end && !as_float; ++i) {
        as_float = !(result[i] == dequantize_one(ref.int_sum[i], scale));
      }
      if (as_float && float_fragments_seen) ++*float_fragments_seen;
    }
    for (std::size_t i = begin; i < end; ++i) {
      const float got = result[i];
      auto message = [] {
        std::ostringstream s;
        s.precision(9);
        return s;
      };
      if (as_float) {
        double expected = 0, tolerance = 0;
        if (!float_ok(ref, i, got, &expected, &tolerance, float32_sums) && wrong([&] {
              std::ostringstream s = message();
              s << "value " << i << " (float32 path) is " << got << ", expected " << expected << " within "
                << tolerance;
              if (is_float.empty()) s << " (or exactly " << dequantize_one(ref.int_sum[i], scale) << ")";
              return s.str();
            })) {
          return first_wrong;
        }
      } else {
        const float expected = dequantize_one(ref.int_sum[i], scale);
        if (!(got == expected) && wrong([&] {
              std::ostringstream s = message();
              s << "value " << i << " is " << got << ", the exact sum is " << expected << " (" << ref.int_sum[i]
                << " / 2^" << std::ilogb(scale) << ")";
              return s.str();
            })) {
          return first_wrong;
        }
      }
    }
  }
  return first_wrong;
}

NoiseJob noise_job(const NetworkPlan& network, const JobSpec& spec, std::uint16_t values_per_packet) {
  NoiseJob job{spec.id, {}, values_per_packet};
  for (const std::string& w : spec.workers) job.members.push_back(network.host_address.at(w));
  for (const std::string& p : spec.ps) job.members.push_back(network.host_address.at(p));
  return job;
}

NoiseTargets noise_targets(const std::vector<NoiseJob>& jobs) {
  NoiseTargets t;
  for (const NoiseJob& job : jobs) {
    t.jobs.push_back(job.id);
    t.members.insert(t.members.end(), job.members.begin(), job.members.end());
  }
  if (!jobs.empty()) t.values_per_packet = jobs.front().values_per_packet;
  return t;
}

std::uint64_t noise_seed(std::uint64_t scenario_seed, std::size_t index) {
  return splitmix64(scenario_seed ^ (0x6E6F697365ull + index));  // "noise" in ASCII, plus the index
}

std::vector<std::uint8_t> noise_packet(std::uint64_t seed, std::uint64_t n, const NoiseTargets& targets) {
  std::mt19937_64 rng(splitmix64(splitmix64(seed) ^ n));
  auto pick = [&rng](const auto& list) { return list[rng() % list.size()]; };
  const bool have_jobs = !targets.jobs.empty() && !targets.members.empty();
  const std::uint16_t vpp = std::max<std::uint16_t>(1, targets.values_per_packet);
  std::vector<std::int32_t> values(vpp);
  for (auto& v : values) v = static_cast<std::int32_t>(rng());

  Header h;
  h.seq = static_cast<Seq>(rng() % 4096);
  h.aggregator_index = static_cast<std::uint32_t>(rng() % 4096);
  h.node = static_cast<std::uint16_t>(rng() % 16);
  h.bitmap = 1u << (rng() % 32);
  h.fan_in = static_cast<std::uint8_t>(1 + rng() % 32);
  switch (have_jobs ? n % 5 : (n % 2 == 0 ? 0 : 3)) {
    case 0: {  // random bytes, mostly around the header size
      std::vector<std::uint8_t> bytes(rng() % (2 * kHeaderBytes + 8));
      for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
      return bytes;
    }
    case 1:  // an installed job's gradient, claiming to come from one of its members
      h.job = pick(targets.jobs);
      h.src = pick(targets.members);
      h.dst = pick(targets.members);
      h.resend = rng() % 2 == 0;
      return build_packet(h, values);
    case 2:  // an installed job's parameter packet, claiming to come from a member (its PS)
      h.job = pick(targets.jobs);
      h.is_ack = true;
      h.src = pick(targets.members);
      h.dst = multicast_group_address(h.job);
      return build_packet(h, values);
    case 3: {  // a gradient of a job nobody installed
      JobId job = static_cast<JobId>(rng());
      while (job == 0 || std::find(targets.jobs.begin(), targets.jobs.end(), job) != targets.jobs.end()) ++job;
      h.job = job;
      h.src = have_jobs ? pick(targets.members) : 0x0A000001u;
      h.dst = have_jobs ? pick(targets.members) : 0x0A000002u;
      return build_packet(h, values);
    }
    default: {  // a real-looking header with one field corrupted: magic, version or length
      h.job = pick(targets.jobs);
      h.src = pick(targets.members);
      h.dst = pick(targets.members);
      std::vector<std::uint8_t> bytes = build_packet(h, values);
      switch (rng() % 3) {
        case 0:
          bytes[0] ^= 0xFF;
          break;  // magic
        case 1:
          bytes[2] ^= 0x7F;
          break;  // version
        default:
          bytes.resize(bytes.size() - 1 - rng() % 4);
          break;
      }
      return bytes;
    }
  }
}

}  // namespace atp::scenario_inputs
