// A rank's side of ProbeEmbed's probes among the ranks of one group (PLink, MLSys'20, §4.1.1;
// docs/plink.md), where every rank probes and every rank computes the groups: running its calls
// round by round, and turning every rank's call times into the groups. No I/O: the runtime runs
// and times each call, and exchanges the times (probe_times_text) between the ranks.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "atp/schedule/builders.h"
#include "atp/schedule/schedule.h"

namespace atp::plink {

// What a bandwidth probe sends where the runtime has no size of its own: 256 KiB of float32 values
// (the PyTorch backend's ATP_GROUPING=probe).
inline constexpr std::size_t kProbeTransferElements = (256 << 10) / sizeof(float);

// Rank `rank`'s probes: the calls of every round (probe_calls with default ProbeOptions, over a
// buffer of `count` values), in order, each run by `run`, which returns the seconds it took. The
// times are [round][call], as probe_samples and probe_times_text take them. Throws what
// probe_calls throws, and whatever `run` throws.
std::vector<std::vector<double>> time_probe_calls(int rank, int size, std::size_t count,
                                                  const std::function<double(const Schedule&)>& run);

// The groups that every rank computes alike from all ranks' call times (seconds[rank][round][call],
// each rank's time_probe_calls): ProbeEmbed's embedding of the pairs' latency distances, grouped
// by probe_groups (default options). Fewer than two ranks: one group (nothing was probed). Throws
// std::invalid_argument as probe_samples does, for times of another shape or not positive.
RankGroups groups_from_probe_times(int size, std::size_t count,
                                   const std::vector<std::vector<std::vector<double>>>& seconds);

}  // namespace atp::plink
