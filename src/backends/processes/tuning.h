// PLink's Autotune for one job of the process backends (autotune: true), run by the runner as the
// paper's central daemon: after each round it takes the round's time and what TCP measured of
// every worker's connections, and says what the workers start the next round with: the plan they
// have ("go") or new master shares ("go {shares}"), which they install between rounds, where no
// chunk is in flight. Its own file because Eigen (autotune.h) cannot follow the runner's HTTP
// headers (glibc's <resolv.h> defines `_res`, a name Eigen's products use).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/scenario/scenario.h"

namespace atp::processes {

class JobTuning {
 public:
  // `groups`: the job's 2LHA groups (plink: its racks or probed groups; plink_fa: one).
  JobTuning(const ScenarioJob& job, RankGroups groups);
  ~JobTuning();
  JobTuning(JobTuning&&) noexcept;
  JobTuning& operator=(JobTuning&&) noexcept;

  // The "go" line (with its newline) after a round of `seconds` in which worker i's connections
  // measured links[i].
  std::string after_round(double seconds, const std::vector<std::vector<TcpScheduleAllreduce::LinkSample>>& links);
  std::uint32_t replans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp::processes
