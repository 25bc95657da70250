// ProbeEmbed's grouping (include/atp/plink/grouping.h). The assignment step of constrained
// k-means is a min-cost flow (Bradley, Bennett & Demiriz 2000): every node supplies one unit,
// which flows to some group at the squared distance to its centre; group g must keep min_size
// units and passes the rest to one overflow node. LEMON's NetworkSimplex solves it exactly; with
// integral supplies its optimum is integral, so each node goes whole to one group.
#include "atp/plink/grouping.h"

#include <lemon/list_graph.h>
#include <lemon/network_simplex.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace atp::plink {
namespace {

void check_groups(int nodes, int groups, int min_size) {
  if (groups < 1) throw std::invalid_argument("the number of groups must be at least 1");
  if (groups > nodes) {
    throw std::invalid_argument("cannot make " + std::to_string(groups) + " groups of " + std::to_string(nodes) +
                                " nodes");
  }
  if (min_size < 1 || static_cast<long long>(groups) * min_size > nodes) {
    throw std::invalid_argument(std::to_string(groups) + " groups of at least " + std::to_string(min_size) +
                                " nodes need more than the " + std::to_string(nodes) + " nodes there are");
  }
}

std::vector<int> group_sizes(const std::vector<int>& group, int groups) {
  std::vector<int> sizes(static_cast<std::size_t>(groups), 0);
  for (const int k : group) ++sizes[static_cast<std::size_t>(k)];
  return sizes;
}

// Each group's centre: the mean of its members (the origin for a group without any).
Eigen::MatrixXd group_centres(const Eigen::MatrixXd& points, const std::vector<int>& group, int groups) {
  const std::vector<int> sizes = group_sizes(group, groups);
  Eigen::MatrixXd centres = Eigen::MatrixXd::Zero(groups, points.cols());
  for (std::size_t i = 0; i < group.size(); ++i) centres.row(group[i]) += points.row(static_cast<Eigen::Index>(i));
  for (int k = 0; k < groups; ++k) centres.row(k) /= std::max(1, sizes[static_cast<std::size_t>(k)]);
  return centres;
}

void finish(Grouping& g, const Eigen::MatrixXd& points) {
  const std::vector<int> sizes = group_sizes(g.group, g.groups);
  const double mean = static_cast<double>(g.group.size()) / g.groups;
  double variance = 0.0;
  for (const int s : sizes) variance += (s - mean) * (s - mean) / g.groups;
  g.size_deviation = std::sqrt(variance);
  g.inertia = 0.0;
  if (points.rows() == 0) return;
  const Eigen::MatrixXd centres = group_centres(points, g.group, g.groups);
  for (std::size_t i = 0; i < g.group.size(); ++i) {
    g.inertia += (points.row(static_cast<Eigen::Index>(i)) - centres.row(g.group[i])).squaredNorm();
  }
}

// k-means++: the first centre uniformly, each next one with probability proportional to the
// squared distance to the nearest centre so far.
Eigen::MatrixXd kmeans_plus_plus(const Eigen::MatrixXd& points, int groups, std::mt19937_64& rng) {
  const Eigen::Index n = points.rows();
  Eigen::MatrixXd centres(groups, points.cols());
  std::uniform_int_distribution<Eigen::Index> first(0, n - 1);
  centres.row(0) = points.row(first(rng));
  std::vector<double> nearest(static_cast<std::size_t>(n), std::numeric_limits<double>::infinity());
  for (int k = 1; k < groups; ++k) {
    for (Eigen::Index i = 0; i < n; ++i) {
      nearest[static_cast<std::size_t>(i)] =
          std::min(nearest[static_cast<std::size_t>(i)], (points.row(i) - centres.row(k - 1)).squaredNorm());
    }
    const double total = std::accumulate(nearest.begin(), nearest.end(), 0.0);
    Eigen::Index pick = 0;
    if (total > 0) {
      std::discrete_distribution<Eigen::Index> weighted(nearest.begin(), nearest.end());
      pick = weighted(rng);
    } else {  // every node sits on a centre already: any will do
      pick = first(rng);
    }
    centres.row(k) = points.row(pick);
  }
  return centres;
}

// The assignment step: each node to a group, every group at least min_size, the sum of squared
// distances to the groups' centres least.
std::vector<int> assign(const Eigen::MatrixXd& points, const Eigen::MatrixXd& centres, int min_size) {
  using Graph = lemon::ListDigraph;
  const auto n = static_cast<int>(points.rows());
  const auto groups = static_cast<int>(centres.rows());
  Graph graph;
  std::vector<Graph::Node> node(static_cast<std::size_t>(n)), group(static_cast<std::size_t>(groups));
  for (auto& v : node) v = graph.addNode();
  for (auto& v : group) v = graph.addNode();
  const Graph::Node overflow = graph.addNode();
  Graph::ArcMap<double> cost(graph);
  Graph::NodeMap<int> supply(graph);
  std::vector<std::vector<Graph::Arc>> to_group(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    supply[node[static_cast<std::size_t>(i)]] = 1;
    for (int k = 0; k < groups; ++k) {
      const Graph::Arc a = graph.addArc(node[static_cast<std::size_t>(i)], group[static_cast<std::size_t>(k)]);
      cost[a] = (points.row(i) - centres.row(k)).squaredNorm();
      to_group[static_cast<std::size_t>(i)].push_back(a);
    }
  }
  for (int k = 0; k < groups; ++k) {
    supply[group[static_cast<std::size_t>(k)]] = -min_size;
    cost[graph.addArc(group[static_cast<std::size_t>(k)], overflow)] = 0.0;
  }
  supply[overflow] = -(n - groups * min_size);
  lemon::NetworkSimplex<Graph, int, double> simplex(graph);
  simplex.costMap(cost).supplyMap(supply);
  if (simplex.run() != lemon::NetworkSimplex<Graph, int, double>::OPTIMAL) {
    throw std::logic_error("constrained k-means: the assignment flow has no optimum");  // sizes were checked
  }
  std::vector<int> result(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < groups; ++k) {
      if (simplex.flow(to_group[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)]) > 0) {
        result[static_cast<std::size_t>(i)] = k;
      }
    }
  }
  return result;
}

}  // namespace

int group_count(int nodes) { return std::max(1, static_cast<int>(std::lround(std::sqrt(std::max(0, nodes))))); }

int min_group_size(int nodes, int groups, double balance_elasticity) {
  if (groups < 1 || !(balance_elasticity >= 1.0)) return 1;
  return std::max(1, static_cast<int>(std::floor(static_cast<double>(nodes) / groups / balance_elasticity)));
}

Grouping constrained_kmeans(const Eigen::MatrixXd& points, int groups, int min_size, std::uint64_t seed,
                            int max_iterations) {
  const auto n = static_cast<int>(points.rows());
  check_groups(n, groups, min_size);
  std::mt19937_64 rng(seed);
  Eigen::MatrixXd centres = kmeans_plus_plus(points, groups, rng);
  Grouping g;
  g.groups = groups;
  for (int iteration = 0; iteration < std::max(1, max_iterations); ++iteration) {
    std::vector<int> next = assign(points, centres, min_size);
    const bool stable = next == g.group;
    g.group = std::move(next);
    if (stable) break;
    // The update step: each centre to the mean of its group (every group has min_size >= 1).
    centres = group_centres(points, g.group, groups);
  }
  finish(g, points);
  return g;
}

Grouping probe_groups(const Eigen::MatrixXd& points, const GroupingOptions& options) {
  const auto n = static_cast<int>(points.rows());
  const int groups = options.groups > 0 ? options.groups : group_count(n);
  if (!(options.balance_elasticity >= 1.0)) {
    throw std::invalid_argument("the balance elasticity must be at least 1 (1: perfectly balanced groups)");
  }
  const int min_size = min_group_size(n, groups, options.balance_elasticity);
  Grouping best;
  for (int c = 0; c < std::max(1, options.clusterings); ++c) {
    Grouping g = constrained_kmeans(points, groups, min_size, options.seed + static_cast<std::uint64_t>(c),
                                    options.max_iterations);
    const bool better = best.group.empty() || g.size_deviation < best.size_deviation - 1e-12 ||
                        (std::abs(g.size_deviation - best.size_deviation) <= 1e-12 && g.inertia < best.inertia);
    if (better) best = std::move(g);
  }
  return best;
}

RankGroups rank_groups(const Grouping& grouping) {
  RankGroups groups(static_cast<std::size_t>(grouping.groups));
  for (std::size_t r = 0; r < grouping.group.size(); ++r) {
    groups[static_cast<std::size_t>(grouping.group[r])].push_back(static_cast<int>(r));
  }
  return groups;
}

Grouping balanced_random_groups(int nodes, int groups, std::uint64_t seed) {
  check_groups(nodes, groups, 1);
  std::vector<int> order(static_cast<std::size_t>(nodes));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  Grouping g;
  g.groups = groups;
  g.group.assign(static_cast<std::size_t>(nodes), 0);
  for (int i = 0; i < nodes; ++i) g.group[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i % groups;
  finish(g, Eigen::MatrixXd());
  return g;
}

}  // namespace atp::plink
