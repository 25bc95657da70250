// Seeded allreduce inputs and the exact check of a result, shared by every scenario backend
// (in-process and the process backends' worker processes), so that all backends check the same thing the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atp/plan/plan.h"
#include "atp/wire.h"

namespace atp::scenario_inputs {

// One independent stream per (scenario seed, job, worker, round), so that a worker's input
// does not depend on event order and the checker can regenerate it.
std::uint64_t input_seed(std::uint64_t seed, JobId job, std::size_t worker, std::uint32_t round);

// Values first .. first + out.size() - 1 of the input stream `seed`: uniform in [-magnitude,
// magnitude), drawn by hand (std::uniform_real_distribution's output differs between standard
// libraries, and the same seed must give the same inputs everywhere) from a counter-based
// generator, so that any block of a stream is drawn without the values before it.
void generate_input(std::uint64_t seed, double magnitude, std::span<float> out, std::size_t first = 0);

// The exact answer of one round of a job.
struct RoundReference {
  // Each fragment's scale exponent this round, as the PS picks it (docs/protocol.md "Scale per
  // fragment"): from the largest magnitude of the fragment's last round with values, else the
  // job's initial one. Empty for a job no fragments cut (values_per_packet 0).
  std::vector<std::int16_t> exponents;
  std::vector<std::int64_t> int_sum;     // sum over workers of the inputs quantized at their fragment's exponent
  std::vector<double> float_sum;         // sum of the float32 inputs (overflow path), worker order
  std::vector<double> abs_sum;           // sum of |inputs|: scales the float path's rounding bound
  std::size_t addends = 0;               // workers: how many values each sum adds
  std::vector<std::int16_t> magnitudes;  // make_reference_at: each fragment's largest magnitude this round
};

// Fills `ref` (its vectors keep their storage from round to round). `values_per_packet`: the
// job's fragment width (0: a collective that does not cut fragments; then only the float sums
// are of use).
void make_reference(std::uint64_t seed, JobId job, std::size_t workers, std::uint32_t round, std::size_t elements,
                    double magnitude, double scale, std::size_t values_per_packet, RoundReference& ref);

// The same at given exponents, one per fragment (Rina's, which a redo pass may have changed).
// ref.magnitudes gets each fragment's largest magnitude among the workers' values this round.
// `excluded`: workers (indices below `workers`) whose values are not in the sum (a Rina ring
// re-formed without them).
void make_reference_at(std::uint64_t seed, JobId job, std::size_t workers, std::uint32_t round, std::size_t elements,
                       double magnitude, std::size_t values_per_packet, std::span<const std::int16_t> exponents,
                       RoundReference& ref, std::span<const std::uint32_t> excluded = {});

// "" if every fragment's exponent in `ref` (from make_reference_at) holds its largest value to
// float32's precision (fixed_point.h, resolved), else one sentence naming the first that does not.
std::string unresolved_fragment(const RoundReference& ref, std::size_t values_per_packet);

// Checks `result` against `ref`. `is_float[f]` says fragment f took the float32 overflow path;
// an empty `is_float` means "unknown" (a Communicator does not tell): then each fragment must
// match either path as a whole, and `float_fragments_seen` counts those that matched only the
// float path. `float32_sums`: the result was summed in float32 in some order (ring, Gloo): every
// value is held to the float path's bound, grown by the workers' count of float32 roundings
// (`is_float` and `values_per_packet` are then not read; else a values_per_packet of 0 is
// std::invalid_argument).
// Returns "" if exact, else one sentence about the first wrong value. With `wrong_values`, every
// value is checked and the wrong ones are added to it (nccl-tests' #wrong); without, the check
// stops at the first.
std::string check_result(const RoundReference& ref, std::span<const float> result, const std::vector<bool>& is_float,
                         std::size_t values_per_packet, std::uint64_t* float_fragments_seen = nullptr,
                         bool float32_sums = false, std::uint64_t* wrong_values = nullptr);

// What a noise source (Scenario::noise) imitates: the jobs' real ids and member addresses, so
// that its spoofed packets look like the jobs' own and only the switch's checks stop them.
struct NoiseTargets {
  std::vector<JobId> jobs;       // installed job ids
  std::vector<Address> members;  // addresses of their workers and PSes
  std::uint16_t values_per_packet = kDefaultValuesPerPacket;
};

// One job as the noise sources aim at it: its id, its workers' and PSes' addresses, its fragment
// width (noise_job: from its spec on the planned network).
struct NoiseJob {
  JobId id = 0;
  std::vector<Address> members;
  std::uint16_t values_per_packet = 0;
};
NoiseJob noise_job(const NetworkPlan& network, const JobSpec& spec, std::uint16_t values_per_packet);

// The noise sources' targets: `jobs` (a scenario's jobs with PSes, whose protocol the spoofed
// gradients and parameters imitate, in file order): their ids and member addresses, and the first
// one's values per packet.
NoiseTargets noise_targets(const std::vector<NoiseJob>& jobs);

// The seed of a scenario's noise source number `index`: both backends send the same packets.
std::uint64_t noise_seed(std::uint64_t scenario_seed, std::size_t index);

// Bad packet number `n` of a noise source seeded with `seed`, cycling through: random bytes of
// random length, a gradient of an installed job with a spoofed worker address, a parameter
// packet of an installed job with a spoofed PS address, a gradient of a job nobody installed,
// and a valid-looking header with a corrupted field. Deterministic in (seed, n).
std::vector<std::uint8_t> noise_packet(std::uint64_t seed, std::uint64_t n, const NoiseTargets& targets);

}  // namespace atp::scenario_inputs
