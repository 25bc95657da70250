// The masters of 2LHA (include/atp/plink/masters.h).
#include "atp/plink/masters.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace atp::plink {
namespace {

constexpr const char* kWhat = "PLink master shares";

void check_weights(const std::vector<double>& w, std::size_t size, const char* which) {
  if (w.size() != size) {
    throw std::invalid_argument(std::string(kWhat) + ": " + which + " has " + std::to_string(w.size()) +
                                " weights for " + std::to_string(size) + " ranks");
  }
  for (std::size_t r = 0; r < w.size(); ++r) {
    if (!(w[r] >= 0) || !std::isfinite(w[r])) {
      throw std::invalid_argument(std::string(kWhat) + ": rank " + std::to_string(r) + "'s " + which +
                                  " weight must be non-negative and finite (got " + std::to_string(w[r]) + ")");
    }
  }
}

// Smooth weighted round robin over `ranks` with weights w[rank]: the next pick, updating `current`.
int pick(const std::vector<int>& ranks, const std::vector<double>& w, std::vector<double>& current) {
  double total = 0;
  std::size_t best = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto r = static_cast<std::size_t>(ranks[i]);
    current[i] += w[r];
    total += w[r];
    if (current[i] > current[best]) best = i;
  }
  current[best] -= total;
  return ranks[best];
}

}  // namespace

MasterShares equal_shares(int size) {
  return {std::vector<double>(static_cast<std::size_t>(size), 1.0),
          std::vector<double>(static_cast<std::size_t>(size), 1.0)};
}

MasterAssignment assign_masters(const RankGroups& groups, const MasterShares& shares, std::size_t chunks) {
  int size = 0;
  for (const auto& g : groups) size += static_cast<int>(g.size());
  const std::vector<int> group_of = group_of_rank(kWhat, groups, size);
  check_weights(shares.gm, static_cast<std::size_t>(size), "gm");
  check_weights(shares.lm, static_cast<std::size_t>(size), "lm");
  RankGroups members = groups;
  for (auto& g : members) std::sort(g.begin(), g.end());
  std::vector<int> order;
  for (const auto& g : members) order.insert(order.end(), g.begin(), g.end());
  if (std::all_of(order.begin(), order.end(), [&](int r) { return shares.gm[static_cast<std::size_t>(r)] == 0; })) {
    throw std::invalid_argument(std::string(kWhat) + ": no rank has a gm weight");
  }
  for (std::size_t h = 0; h < members.size(); ++h) {
    if (std::all_of(members[h].begin(), members[h].end(),
                    [&](int r) { return shares.lm[static_cast<std::size_t>(r)] == 0; })) {
      throw std::invalid_argument(std::string(kWhat) + ": no member of group " + std::to_string(h) +
                                  " has an lm weight");
    }
  }
  MasterAssignment a;
  a.gm.reserve(chunks);
  a.lm.reserve(chunks);
  std::vector<double> gm_current(order.size(), 0.0);
  std::vector<std::vector<double>> lm_current;
  for (const auto& g : members) lm_current.emplace_back(g.size(), 0.0);
  for (std::size_t c = 0; c < chunks; ++c) {
    const int gm = pick(order, shares.gm, gm_current);
    a.gm.push_back(gm);
    std::vector<int>& lms = a.lm.emplace_back();
    for (std::size_t h = 0; h < members.size(); ++h) {
      // Drawn for every chunk, so that a group's LMs keep their turns whichever group the GM is in.
      const int lm = pick(members[h], shares.lm, lm_current[h]);
      lms.push_back(static_cast<std::size_t>(group_of[static_cast<std::size_t>(gm)]) == h ? gm : lm);
    }
  }
  return a;
}

}  // namespace atp::plink
