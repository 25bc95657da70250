// The computation around ProbeEmbed's probes (PLink, MLSys'20, §4.1.1; docs/plink.md): which pairs
// probe together, what they send (as schedules, which every TCP transport runs), and how the times
// become distances. No I/O: a backend runs the calls and times them.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "atp/schedule/schedule.h"

namespace atp::plink {

// Rounds of disjoint pairs that together hold every pair of n nodes once: n - 1 rounds of n / 2
// pairs for even n, n rounds of (n - 1) / 2 for odd n (the circle method), so that probing takes
// O(n) rounds and no node is in two probes at once (they would disturb each other). Pairs are
// (smaller, larger). n < 2: no rounds.
std::vector<std::vector<std::pair<int, int>>> pairing_rounds(int n);

// The probed distance of a pair from its samples: the median (robust to the outliers that cross
// traffic makes), of latencies as they are, of bandwidths inverted (the paper's distance for a
// bandwidth probe). Throws std::invalid_argument for no samples, or a bandwidth that is not
// positive and finite.
double latency_distance(std::vector<double> samples);
double bandwidth_distance(std::vector<double> samples);

// The symmetric matrix of distances from per-pair values, d(i, j) = d(j, i) = the mean of what the
// two directions measured where both did (0 on the diagonal). `measured(i, j)` < 0: not measured.
// Throws std::invalid_argument naming a pair that neither direction measured.
Eigen::MatrixXd symmetric_distances(const Eigen::MatrixXd& measured);

// The probes as calls of the project's schedules (atp/schedule/), so that every transport with
// TCP runs them (ns-3's, the worker processes', a PyTorch group's). There are two passes over the
// pairing rounds: first the latency rounds, then the bandwidth rounds, so that no echo waits in a
// queue behind another pair's transfer (measured on ns-3 with both in one round: 5 of 36 pairs'
// median round trip 3-5x too long). In each round every node runs probe_calls(rank, size, count,
// round), timing each, its partner of the round the other end of every one (a node without a
// partner runs empty calls):
//   1 exchange of one value both ways, not measured: the two meet before anything is timed;
//   then, latency rounds: `echoes` echoes each way: the pinger sends one value, the other sends
//      it back once it has it; the pinger's time is a round trip (the paper's latency probe; here a
//      4-byte message over the pair's TCP connection, Nagle off, where the paper echoes UDP);
//   bandwidth rounds: `transfers` timed transfers each way: the sender sends `count` values, the
//      receiver answers with the last one once it has them all; the sender's time is the transfer
//      plus a round trip (the paper's bandwidth probe, an iperf run: bytes / time).
// Ends alternate (lower rank first), so both directions see the same conditions.
struct ProbeOptions {
  int echoes = 10;    // latency samples per direction of each pair
  int transfers = 2;  // bandwidth samples per direction of each pair
};

// The probe's rounds for n nodes: twice pairing_rounds(n) (latency, then bandwidth).
std::uint32_t probe_rounds(int n);
// Rank `rank`'s calls in round `round` (0 .. probe_rounds(size) - 1), over a buffer of `count`
// (>= 1) values: 1 + 2 x echoes in a latency round, 1 + 2 x transfers in a bandwidth round.
// Throws std::invalid_argument for a rank, round or count out of range, or fewer than 1 echo or
// transfer.
std::vector<Schedule> probe_calls(int rank, int size, std::size_t count, std::uint32_t round,
                                  const ProbeOptions& options = {});
// A schedule naming every other rank with an empty step each way: whom a transport connects to
// before probing (every pair meets once).
Schedule all_pairs(int rank, int size);

// What the timed calls measured, per ordered pair (i, j): the samples that i measured towards j.
struct ProbeSamples {
  std::vector<std::vector<std::vector<double>>> round_trip_s;      // [i][j]: echo times, seconds
  std::vector<std::vector<std::vector<double>>> bytes_per_second;  // [i][j]: count x 4 bytes / time
  // Latency distances: the symmetric matrix of the pairs' median round trips (seconds).
  Eigen::MatrixXd latency_distances() const;
  // Bandwidth distances: of the inverse median bandwidths (seconds per byte).
  Eigen::MatrixXd bandwidth_distances() const;
};

// The samples from every rank's call times: seconds[rank][round][call], as each rank timed the
// calls of probe_calls(rank, size, count, round, options). Throws std::invalid_argument when the
// shape differs from the calls' or a time is not positive and finite.
ProbeSamples probe_samples(int size, std::size_t count, const std::vector<std::vector<std::vector<double>>>& seconds,
                           const ProbeOptions& options = {});

// One rank's call times (seconds[rank] above: [round][call]) as the text ranks exchange them:
// rounds separated by ';', each round's times by ',', in seconds with six decimals. The reader
// throws std::invalid_argument for text that is not a time list.
std::string probe_times_text(const std::vector<std::vector<double>>& rounds);
std::vector<std::vector<double>> probe_times_from_text(const std::string& text);

}  // namespace atp::plink
