// PLink's Autotune on the process backends (tuning.h).
#include "tuning.h"

#include <algorithm>

#include "atp/plink/aggregation.h"
#include "atp/plink/autotune.h"
#include "worker_process.h"

namespace atp::processes {

struct JobTuning::Impl {
  Impl(const ScenarioJob& j, RankGroups g)
      : job(&j),
        loop(g, (j.elements + plink::kDefaultChunkElements - 1) / plink::kDefaultChunkElements),
        groups(std::move(g)),
        shares(plink::equal_shares(static_cast<int>(j.spec.workers.size()))),
        bytes(plan_bytes()) {}

  // D(i, j) of the plan with `shares`: the bytes rank i sends rank j in a round.
  Eigen::MatrixXd plan_bytes() const {
    const int n = static_cast<int>(job->spec.workers.size());
    Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
    for (int i = 0; i < n; ++i) {
      const Schedule plan = plink::two_level_schedule(i, n, job->elements, groups, shares, plink::kDefaultChunkElements,
                                                      job->connections);
      for (int j = 0; j < n; ++j) d(i, j) = static_cast<double>(schedule_bytes_sent(plan, j));
    }
    return d;
  }

  const ScenarioJob* job;
  plink::Autotune loop;
  RankGroups groups;
  plink::MasterShares shares;
  Eigen::MatrixXd bytes;
  std::uint32_t replans = 0;
};

JobTuning::JobTuning(const ScenarioJob& job, RankGroups groups)
    : impl_(std::make_unique<Impl>(job, std::move(groups))) {}
JobTuning::~JobTuning() = default;
JobTuning::JobTuning(JobTuning&&) noexcept = default;
JobTuning& JobTuning::operator=(JobTuning&&) noexcept = default;

std::string JobTuning::after_round(double seconds,
                                   const std::vector<std::vector<TcpScheduleAllreduce::LinkSample>>& links) {
  Impl& t = *impl_;
  const auto n = t.bytes.rows();
  plink::LinkMeasurements m{t.bytes, Eigen::MatrixXd::Zero(n, n), Eigen::MatrixXd::Zero(n, n)};
  for (Eigen::Index i = 0; i < n && i < static_cast<Eigen::Index>(links.size()); ++i) {
    for (const auto& l : links[static_cast<std::size_t>(i)]) {
      if (l.peer < 0 || l.peer >= n) continue;
      // A pair's rate is its lanes' together; its round trip the longest of theirs.
      if (l.active_s > 0) m.bytes_per_second(i, l.peer) += static_cast<double>(l.bytes) / l.active_s;
      m.round_trip_s(i, l.peer) = std::max(m.round_trip_s(i, l.peer), l.round_trip_s);
    }
  }
  const auto next = t.loop.after_iteration(seconds, t.shares, m);
  if (!next) return "go\n";
  t.shares = *next;
  t.bytes = t.plan_bytes();
  ++t.replans;
  return "go " + worker_process::shares_json(t.shares) + "\n";
}

std::uint32_t JobTuning::replans() const { return impl_->replans; }

}  // namespace atp::processes
