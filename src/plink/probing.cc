// ProbeEmbed's pairing and sample statistics (include/atp/plink/probing.h).
#include "atp/plink/probing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace atp::plink {
namespace {

// Call kinds of a round, in order (probe_calls).
enum class Call { kMeet, kEcho, kTransfer };
struct CallAt {
  Call kind;
  bool lower_measures;  // echo: the lower rank pings; transfer: the lower rank sends
};
CallAt call_at(int call, bool transfers) {
  if (call == 0) return {Call::kMeet, false};
  return {transfers ? Call::kTransfer : Call::kEcho, (call - 1) % 2 == 0};
}

// The partner of `rank` in round `round` of `rounds`, or -1.
int partner(const std::vector<std::vector<std::pair<int, int>>>& rounds, std::uint32_t round, int rank) {
  for (const auto& [a, b] : rounds[round]) {
    if (a == rank) return b;
    if (b == rank) return a;
  }
  return -1;
}

void check_options(const ProbeOptions& o) {
  if (o.echoes < 1 || o.transfers < 1) {
    throw std::invalid_argument("probing needs at least one echo and one transfer per direction");
  }
}

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

std::uint32_t probe_rounds(int n) { return 2 * static_cast<std::uint32_t>(pairing_rounds(n).size()); }

std::vector<Schedule> probe_calls(int rank, int size, std::size_t count, std::uint32_t round, const ProbeOptions& o) {
  check_options(o);
  const auto rounds = pairing_rounds(size);
  if (rank < 0 || rank >= size) throw std::invalid_argument("rank " + std::to_string(rank) + " is not in [0, size)");
  if (round >= probe_rounds(size)) {
    throw std::invalid_argument("round " + std::to_string(round) + " of " + std::to_string(size) +
                                " nodes is not in [0, " + std::to_string(probe_rounds(size)) + ")");
  }
  if (count < 1) throw std::invalid_argument("a probe needs a buffer of at least one value");
  const bool transfers = round >= rounds.size();
  const int peer = partner(rounds, transfers ? round - static_cast<std::uint32_t>(rounds.size()) : round, rank);
  std::vector<Schedule> calls;
  const int measured = 2 * (transfers ? o.transfers : o.echoes);
  for (int c = 0; c <= measured; ++c) {
    Schedule& s = calls.emplace_back(Schedule{.rank = rank, .size = size, .count = count, .lanes = 1, .steps = {}});
    if (peer < 0) continue;
    const auto [kind, lower_measures] = call_at(c, transfers);
    const bool measures = lower_measures == (rank < peer);
    // The measuring end sends `out` and then receives `back`; the other receives `out`, then sends
    // `back`, which for a transfer is the last value: the receiver has it only once all arrived.
    // At the meeting both ends send first.
    const bool transfer = kind == Call::kTransfer;
    const ElementRange out{0, transfer ? count : 1}, back{transfer ? count - 1 : 0, transfer ? count : 1};
    if (kind == Call::kMeet || measures) {
      schedule_append(s, StepKind::kSend, peer, out);
      schedule_append(s, StepKind::kReceiveCopy, peer, back);
    } else {
      schedule_append(s, StepKind::kReceiveCopy, peer, out);
      schedule_append(s, StepKind::kSend, peer, back);
    }
  }
  return calls;
}

Schedule all_pairs(int rank, int size) {
  Schedule s{.rank = rank, .size = size, .count = 0, .steps = {}};
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    schedule_append(s, StepKind::kSend, peer, {});
    schedule_append(s, StepKind::kReceiveCopy, peer, {});
  }
  return s;
}

namespace {

// The symmetric matrix of each ordered pair's samples made one distance by `distance`.
Eigen::MatrixXd distances_of(const std::vector<std::vector<std::vector<double>>>& samples,
                             double (*distance)(std::vector<double>)) {
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd m = Eigen::MatrixXd::Constant(n, n, -1.0);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      const auto& v = samples[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      if (i != j && !v.empty()) m(i, j) = distance(v);
    }
  }
  return symmetric_distances(m);
}

}  // namespace

Eigen::MatrixXd ProbeSamples::latency_distances() const { return distances_of(round_trip_s, latency_distance); }

Eigen::MatrixXd ProbeSamples::bandwidth_distances() const { return distances_of(bytes_per_second, bandwidth_distance); }

ProbeSamples probe_samples(int size, std::size_t count, const std::vector<std::vector<std::vector<double>>>& seconds,
                           const ProbeOptions& o) {
  check_options(o);
  const auto rounds = pairing_rounds(size);
  const auto n = static_cast<std::size_t>(size);
  if (seconds.size() != n) {
    throw std::invalid_argument("probe times of " + std::to_string(seconds.size()) + " nodes where " +
                                std::to_string(size) + " probed");
  }
  ProbeSamples out;
  out.round_trip_s.assign(n, std::vector<std::vector<double>>(n));
  out.bytes_per_second.assign(n, std::vector<std::vector<double>>(n));
  for (int rank = 0; rank < size; ++rank) {
    const auto& mine = seconds[static_cast<std::size_t>(rank)];
    if (mine.size() != probe_rounds(size)) {
      throw std::invalid_argument("node " + std::to_string(rank) + " timed " + std::to_string(mine.size()) +
                                  " rounds of " + std::to_string(probe_rounds(size)));
    }
    for (std::uint32_t r = 0; r < mine.size(); ++r) {
      const bool transfers = r >= rounds.size();
      const std::size_t calls = 1 + 2 * static_cast<std::size_t>(transfers ? o.transfers : o.echoes);
      if (mine[r].size() != calls) {
        throw std::invalid_argument("node " + std::to_string(rank) + " timed " + std::to_string(mine[r].size()) +
                                    " calls in round " + std::to_string(r) + " of " + std::to_string(calls));
      }
      const int peer = partner(rounds, transfers ? r - static_cast<std::uint32_t>(rounds.size()) : r, rank);
      if (peer < 0) continue;
      for (std::size_t c = 1; c < calls; ++c) {
        const auto [kind, lower_measures] = call_at(static_cast<int>(c), transfers);
        if (lower_measures != (rank < peer)) continue;
        const double t = mine[r][c];
        if (!(t > 0) || !std::isfinite(t)) {
          throw std::invalid_argument("node " + std::to_string(rank) + " timed call " + std::to_string(c) +
                                      " of round " + std::to_string(r) + " as " + std::to_string(t) + " s");
        }
        auto& to = kind == Call::kEcho ? out.round_trip_s : out.bytes_per_second;
        to[static_cast<std::size_t>(rank)][static_cast<std::size_t>(peer)].push_back(
            kind == Call::kEcho ? t : static_cast<double>(count) * sizeof(float) / t);
      }
    }
  }
  return out;
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

std::string probe_times_text(const std::vector<std::vector<double>>& rounds) {
  std::string text;
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    if (r > 0) text += ';';
    for (std::size_t c = 0; c < rounds[r].size(); ++c) text += (c == 0 ? "" : ",") + std::to_string(rounds[r][c]);
  }
  return text;
}

std::vector<std::vector<double>> probe_times_from_text(const std::string& text) {
  std::vector<std::vector<double>> rounds(1);
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = text.find_first_of(",;", at);
    rounds.back().push_back(std::stod(text.substr(at, end - at)));
    if (end == std::string::npos) break;
    if (text[end] == ';') rounds.emplace_back();
    at = end + 1;
  }
  return rounds;
}

}  // namespace atp::plink
