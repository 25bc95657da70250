// PAIA (include/atp/plink/paia.h): every observer, every unordered pair of the others.
#include "atp/plink/paia.h"

#include <algorithm>
#include <stdexcept>

namespace atp::plink {
namespace {

std::size_t common_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const auto [end, ignored] =
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin());
  return static_cast<std::size_t>(end - a.begin());
}

}  // namespace

Paia paia(const std::vector<std::vector<std::string>>& positions, const Eigen::MatrixXd& measured) {
  const auto n = static_cast<Eigen::Index>(positions.size());
  if (measured.rows() != n || measured.cols() != n) {
    throw std::invalid_argument("PAIA needs one measured distance per pair of the " + std::to_string(n) +
                                " positioned nodes (got a " + std::to_string(measured.rows()) + " x " +
                                std::to_string(measured.cols()) + " matrix)");
  }
  Paia result;
  std::vector<std::size_t> prefix(static_cast<std::size_t>(n));
  for (Eigen::Index c = 0; c < n; ++c) {
    for (Eigen::Index i = 0; i < n; ++i) {
      prefix[static_cast<std::size_t>(i)] =
          common_prefix(positions[static_cast<std::size_t>(i)], positions[static_cast<std::size_t>(c)]);
    }
    for (Eigen::Index a = 0; a < n; ++a) {
      if (a == c) continue;
      for (Eigen::Index b = 0; b < a; ++b) {
        if (b == c) continue;
        const std::size_t pa = prefix[static_cast<std::size_t>(a)], pb = prefix[static_cast<std::size_t>(b)];
        if (pa == pb) continue;  // not comparable
        ++result.triplets;
        const double ma = measured(c, a), mb = measured(c, b);
        // A longer common prefix is the closer node; the measurement must say so strictly.
        if ((pa > pb && ma < mb) || (pa < pb && ma > mb)) ++result.agreeing;
      }
    }
  }
  return result;
}

}  // namespace atp::plink
