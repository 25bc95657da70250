// atp_torch.stats(): the counters of this process's live "atp" groups (their ATP or Rina endpoint:
// packets, resends, timeouts, float32 resends, ...), so that a training script or an experiment
// can say what loss recovery cost it. A group registers its job while it lives.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "atp/cluster/cluster_job.h"

namespace atp::torch_backend {

// Registers `job` (of algorithm `algorithm`, this process's rank `rank`) for group_stats() from
// construction to destruction. `job` must outlive it.
class GroupStatsEntry {
 public:
  GroupStatsEntry(ClusterJob& job, std::string algorithm, int rank);
  ~GroupStatsEntry();
  GroupStatsEntry(const GroupStatsEntry&) = delete;
  GroupStatsEntry& operator=(const GroupStatsEntry&) = delete;

 private:
  friend pybind11::list group_stats();
  ClusterJob& job_;
  std::string algorithm_;
  int rank_;
};

// One dict per live group, oldest first: {"algorithm", "job", "rank", then the endpoint's
// counters by name (WorkerStats' or RinaStats' fields)}.
pybind11::list group_stats();

}  // namespace atp::torch_backend
