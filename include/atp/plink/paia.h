// Physical Affinity Inference Accuracy (PLink, MLSys'20, §5.5): how often measured distances order
// nodes as the topology does. Each node's position is its chain of places from the widest down
// (the paper's (region, datacenter, cluster, row, rack, host); here a host's switches from the top
// of the scenario's tree to its ToR, then the host). For an observer c and two other nodes a and
// b, a is closer to c in the topology when it shares a longer prefix with c's position; the
// triplet counts only where the prefixes differ ("comparable"), and agrees when the measured
// distances M(a, c), M(b, c) order a and b the same way (equal distances do not agree). PAIA is
// the agreeing share of the comparable triplets. No I/O.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <string>
#include <vector>

namespace atp::plink {

struct Paia {
  std::uint64_t triplets = 0;  // comparable (a, b, c): a and b unordered, both other than c
  std::uint64_t agreeing = 0;
  double score() const { return triplets == 0 ? 0.0 : static_cast<double>(agreeing) / static_cast<double>(triplets); }
};

// `positions[i]`: node i's chain; `measured`: n x n distances (only M(a, c) and M(b, c) are read,
// row c). Throws std::invalid_argument when the sizes differ.
Paia paia(const std::vector<std::vector<std::string>>& positions, const Eigen::MatrixXd& measured);

}  // namespace atp::plink
