// PLink's grouping of nodes for two-level hierarchical aggregation (PLink, MLSys'20, §4.1.3;
// docs/plink.md): k = sqrt(n) groups, balanced and cohesive, by constrained k-means (Bradley,
// Bennett & Demiriz 2000: each assignment step a min-cost flow that gives every group at least
// its minimum size; LEMON's network simplex solves it) from k-means++ starts (Arthur &
// Vassilvitskii); several clusterings, the one with the least diverse group sizes kept. And the
// paper's baseline, Balanced Random. No I/O.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <vector>

#include "atp/schedule/builders.h"

namespace atp::plink {

// The paper's group count, the one that minimises a global master's bytes O(n/k + k): sqrt(n),
// rounded to the nearest integer, at least 1.
int group_count(int nodes);

// The least members a group may have: n / k over the balance elasticity, rounded down, at least
// 1. Elasticity 1 is perfect balance (every group n / k, give or take one); 2 lets a group shrink
// to half of that (the paper's useful range is 1 to 2).
int min_group_size(int nodes, int groups, double balance_elasticity);

struct GroupingOptions {
  int groups = 0;                   // 0: group_count(n)
  // In [1, n / k]: see min_group_size. 2, the top of the paper's range: 9 workers placed at random
  // over 4 racks of 4 (experiments/plink/placements) ran at 0.68x the racks' 2LHA with 1 (three
  // groups of exactly three split racks) and at 0.85x with 2.
  double balance_elasticity = 2.0;
  int clusterings = 10;             // independent k-means++ starts; the least diverse sizes win
  int max_iterations = 100;         // per clustering, until the assignment stops changing
  std::uint64_t seed = 1;
};

struct Grouping {
  std::vector<int> group;  // per node, 0 .. groups - 1
  int groups = 0;
  double size_deviation = 0.0;  // the standard deviation of the group sizes
  double inertia = 0.0;         // sum of squared distances from each node to its group's centre
};

// Constrained k-means of the rows of `points` into `groups` groups of at least `min_size` each,
// from one k-means++ start drawn from `seed`. Throws std::invalid_argument (one sentence) when
// groups < 1, groups > n, or groups x min_size > n.
Grouping constrained_kmeans(const Eigen::MatrixXd& points, int groups, int min_size, std::uint64_t seed,
                            int max_iterations = 100);

// ProbeEmbed's groups of the embedded nodes: `clusterings` constrained k-means runs (seeds seed,
// seed + 1, ...), keeping the one whose group sizes deviate least, ties to the smaller inertia
// (the paper breaks ties at random; this keeps runs reproducible). Throws as above, and for an
// elasticity below 1.
Grouping probe_groups(const Eigen::MatrixXd& points, const GroupingOptions& options = {});

// The ranks of each group, groups in order and ranks ascending within them: the form a schedule
// takes (RankGroups, atp/schedule/builders.h).
RankGroups rank_groups(const Grouping& grouping);

// The paper's Balanced Random baseline: the nodes shuffled, then dealt into `groups` groups in
// turn (sizes differ by at most one). Throws for groups < 1 or groups > nodes.
Grouping balanced_random_groups(int nodes, int groups, std::uint64_t seed);

}  // namespace atp::plink
