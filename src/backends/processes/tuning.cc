// PLink's Autotune on the process backends (tuning.h).
#include "tuning.h"

#include <algorithm>

#include "atp/plink/autotune.h"
#include "worker_process.h"

namespace atp::processes {

struct JobTuning::Impl {
  Impl(const ScenarioJob& job, RankGroups g)
      : elements(job.elements),
        loop(g, (elements + plink::kDefaultChunkElements - 1) / plink::kDefaultChunkElements),
        groups(std::move(g)),
        shares(plink::equal_shares(static_cast<int>(job.spec.workers.size()))),
        bytes(plink::plan_bytes(groups, shares, elements)) {}

  std::size_t elements;
  plink::Autotune loop;
  RankGroups groups;
  plink::MasterShares shares;
  Eigen::MatrixXd bytes;  // D(i, j) of the plan with `shares`
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
  t.bytes = plink::plan_bytes(t.groups, t.shares, t.elements);
  ++t.replans;
  return "go " + worker_process::shares_json(t.shares) + "\n";
}

std::uint32_t JobTuning::replans() const { return impl_->replans; }

}  // namespace atp::processes
