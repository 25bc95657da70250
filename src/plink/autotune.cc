// PLink's Autotune (include/atp/plink/autotune.h).
#include "atp/plink/autotune.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace atp::plink {
namespace {

void check_measurements(const LinkMeasurements& m, Eigen::Index n) {
  for (const Eigen::MatrixXd* x : {&m.bytes, &m.bytes_per_second, &m.round_trip_s}) {
    if (x->rows() != n || x->cols() != n) {
      throw std::invalid_argument("Autotune's measurements must be " + std::to_string(n) + " x " + std::to_string(n) +
                                  " (got " + std::to_string(x->rows()) + " x " + std::to_string(x->cols()) + ")");
    }
  }
}

int size_of(const RankGroups& groups) {
  std::size_t n = 0;
  for (const auto& g : groups) n += g.size();
  return static_cast<int>(n);
}

}  // namespace

Eigen::MatrixXd plan_bytes(const RankGroups& groups, const MasterShares& shares, std::size_t count,
                           std::size_t chunk_elements) {
  const int n = size_of(groups);
  Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    for (const ScheduleStep& step : two_level_schedule(i, n, count, groups, shares, chunk_elements).steps) {
      if (step.kind == StepKind::kSend) d(i, step.peer) += static_cast<double>(step.range.size() * sizeof(float));
    }
  }
  return d;
}

MasterShares quicktune(const RankGroups& groups, const LinkMeasurements& m) {
  const int size = size_of(groups);
  const std::vector<int> group_of = group_of_rank("Quicktune", groups, size);
  check_measurements(m, size);
  const auto n = static_cast<std::size_t>(size);
  // Per rank: its measured bandwidth to everyone, and to the other groups (or to everyone, with one group).
  std::vector<double> total(n, 0.0), outside(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const double bw = m.bytes_per_second(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
      if (i == j || !(bw > 0)) continue;
      total[i] += bw;
      if (groups.size() == 1 || group_of[i] != group_of[j]) outside[i] += bw;
    }
  }
  MasterShares s{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  std::vector<double> group_bandwidth(groups.size(), 0.0);
  for (std::size_t h = 0; h < groups.size(); ++h) {
    // A member that measured nothing counts as its group's mean (else the group's only members).
    double sum_total = 0, sum_outside = 0;
    std::size_t measured = 0;
    for (const int r : groups[h]) {
      if (total[static_cast<std::size_t>(r)] > 0) {
        sum_total += total[static_cast<std::size_t>(r)];
        sum_outside += outside[static_cast<std::size_t>(r)];
        ++measured;
      }
    }
    const double mean_total = measured ? sum_total / static_cast<double>(measured) : 1.0;
    const double mean_outside = measured ? sum_outside / static_cast<double>(measured) : 1.0;
    double group_total = 0;
    for (const int r : groups[h]) {
      const auto u = static_cast<std::size_t>(r);
      if (total[u] <= 0) {
        total[u] = mean_total;
        outside[u] = mean_outside;
      }
      s.lm[u] = total[u];
      group_total += total[u];
      group_bandwidth[h] += outside[u];
    }
    // Within the group, GMs in proportion to the members' total bandwidth; the group's part of all
    // GMs in proportion to its bandwidth to the other groups.
    for (const int r : groups[h]) {
      const auto u = static_cast<std::size_t>(r);
      s.gm[u] = group_total > 0 ? total[u] / group_total : 0;
    }
  }
  for (std::size_t h = 0; h < groups.size(); ++h) {
    for (const int r : groups[h]) s.gm[static_cast<std::size_t>(r)] *= group_bandwidth[h];
  }
  if (std::all_of(s.gm.begin(), s.gm.end(), [](double w) { return w == 0; })) return equal_shares(size);
  return s;
}

Eigen::VectorXd blame(const LinkMeasurements& m, const FinetuneOptions& o) {
  const Eigen::Index n = m.bytes.rows();
  check_measurements(m, n);
  Eigen::VectorXd l = Eigen::VectorXd::Zero(n), t = Eigen::VectorXd::Zero(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      if (i == j) continue;
      const double d = m.bytes(i, j), bw = m.bytes_per_second(i, j);
      l(i) += d;
      if (d > 0 && bw > 0) t(i) += d / bw;
      t(i) = std::max(t(i), 0.0);
    }
    t(i) += m.round_trip_s.row(i).maxCoeff();
  }
  const double spread = l.maxCoeff() - l.minCoeff();
  const Eigen::VectorXd l_hat =
      spread > 0 ? Eigen::VectorXd((l.array() - l.minCoeff()) / spread) : Eigen::VectorXd::Zero(n);
  const double mean_t = t.mean();
  const Eigen::VectorXd t_hat = mean_t > 0 ? Eigen::VectorXd(t / mean_t) : Eigen::VectorXd::Zero(n);
  return o.beta * l_hat + o.gamma * t_hat;
}

std::optional<MasterShares> finetune(const RankGroups& groups, const MasterShares& shares, std::size_t chunks,
                                     const LinkMeasurements& m, FinetuneState& state, const FinetuneOptions& o) {
  const int size = size_of(groups);
  const std::vector<int> group_of = group_of_rank("Finetune", groups, size);
  check_measurements(m, size);
  if (chunks == 0) return std::nullopt;
  const Eigen::VectorXd b = blame(m, o);
  Eigen::Index worst = 0, best = 0;
  b.maxCoeff(&worst);
  b.minCoeff(&best);
  if (!(b(worst) > o.epsilon * b(best))) {
    state = {};
    return std::nullopt;
  }
  state.moves = worst == state.last_bottleneck ? state.moves * 2 : 1;
  state.last_bottleneck = static_cast<int>(worst);
  MasterShares next = shares;
  const auto w = static_cast<std::size_t>(worst);
  // A move is `moves` chunks' worth of weight.
  const double gm_total = std::accumulate(shares.gm.begin(), shares.gm.end(), 0.0);
  const double gm_unit = gm_total / static_cast<double>(chunks);
  if (shares.gm[w] > 0) {
    const double moved = std::min(shares.gm[w], state.moves * gm_unit);
    next.gm[w] -= moved;
    next.gm[static_cast<std::size_t>(best)] += moved;
    return next;
  }
  // No GM left: its LM duties to the least blamed member of its group (with one group the GM is
  // every chunk's only master: nothing is left to move).
  if (groups.size() == 1) return std::nullopt;
  const auto& group = groups[static_cast<std::size_t>(group_of[w])];
  int to = -1;
  for (const int r : group) {
    if (r != static_cast<int>(worst) && (to < 0 || b(r) < b(to))) to = r;
  }
  if (to < 0 || shares.lm[w] <= 0) return std::nullopt;  // alone in its group, or nothing to move
  double lm_total = 0;
  for (const int r : group) lm_total += shares.lm[static_cast<std::size_t>(r)];
  const double moved = std::min(shares.lm[w], state.moves * lm_total / static_cast<double>(chunks));
  next.lm[w] -= moved;
  next.lm[static_cast<std::size_t>(to)] += moved;
  return next;
}

Autotune::Autotune(RankGroups groups, std::size_t chunks, AutotuneOptions options)
    : groups_(std::move(groups)), chunks_(chunks), options_(options) {}

std::optional<MasterShares> Autotune::after_iteration(double seconds, const MasterShares& shares,
                                                      const LinkMeasurements& m) {
  // A sudden change against the last iteration, unless that one ran another plan (a change this
  // loop made is not a change of the network).
  const bool changed = settled_ && !replanned_ && std::abs(seconds - *settled_) > options_.trigger * *settled_;
  settled_ = seconds;
  std::optional<MasterShares> next;
  if (changed) {
    tuning_ = true;
    finetune_ = {};
    next = quicktune(groups_, m);
    if (*next == shares) next.reset();
  } else if (tuning_ || options_.continuous) {
    next = finetune(groups_, shares, chunks_, m, finetune_, options_.finetune);
    if (!next) tuning_ = false;  // balanced: watch again
  }
  replanned_ = next.has_value();
  return next;
}

}  // namespace atp::plink
