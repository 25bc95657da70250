// The computation around ProbeEmbed's probes (PLink, MLSys'20, §4.1.1; docs/plink.md): which pairs
// probe together, and how samples become a distance. The probes themselves run on a backend.
#pragma once

#include <Eigen/Dense>
#include <utility>
#include <vector>

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

}  // namespace atp::plink
