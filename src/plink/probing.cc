// ProbeEmbed's pairing and sample statistics (include/atp/plink/probing.h).
#include "atp/plink/probing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace atp::plink {
namespace {

double median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

}  // namespace

std::vector<std::vector<std::pair<int, int>>> pairing_rounds(int n) {
  if (n < 2) return {};
  // The circle method over an even count: one position stays, the others turn one step a round;
  // with an odd n the extra position is a bye.
  const int m = n % 2 == 0 ? n : n + 1;
  std::vector<int> at(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) at[static_cast<std::size_t>(i)] = i;
  std::vector<std::vector<std::pair<int, int>>> rounds;
  for (int r = 0; r < m - 1; ++r) {
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < m / 2; ++i) {
      const int a = at[static_cast<std::size_t>(i)], b = at[static_cast<std::size_t>(m - 1 - i)];
      if (a < n && b < n) pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(std::move(pairs));
    std::rotate(at.begin() + 1, at.end() - 1, at.end());  // all but the first turn one step
  }
  return rounds;
}

double latency_distance(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("a latency probe needs at least one sample");
  return median(std::move(samples));
}

double bandwidth_distance(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("a bandwidth probe needs at least one sample");
  for (const double b : samples) {
    if (!(b > 0) || !std::isfinite(b)) {
      throw std::invalid_argument("a bandwidth sample must be positive and finite (got " + std::to_string(b) + ")");
    }
  }
  return 1.0 / median(std::move(samples));
}

Eigen::MatrixXd symmetric_distances(const Eigen::MatrixXd& measured) {
  const Eigen::Index n = measured.rows();
  if (measured.cols() != n) throw std::invalid_argument("the measured distances must be a square matrix");
  Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < i; ++j) {
      const double a = measured(i, j), b = measured(j, i);
      if (a < 0 && b < 0) {
        throw std::invalid_argument("the pair of nodes " + std::to_string(j) + " and " + std::to_string(i) +
                                    " was not measured in either direction");
      }
      d(i, j) = d(j, i) = a < 0 ? b : b < 0 ? a : (a + b) / 2;
    }
  }
  return d;
}

}  // namespace atp::plink
