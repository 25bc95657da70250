// A rank's side of ProbeEmbed's probes (atp/plink/probe_exchange.h): its timed rounds, and the
// groups of all ranks' times.
#include "atp/plink/probe_exchange.h"

#include "atp/plink/aggregation.h"
#include "atp/plink/embed.h"
#include "atp/plink/grouping.h"
#include "atp/plink/probing.h"

namespace atp::plink {

std::vector<std::vector<double>> time_probe_calls(int rank, int size, std::size_t count,
                                                  const std::function<double(const Schedule&)>& run) {
  std::vector<std::vector<double>> seconds;  // [round][call]
  for (std::uint32_t round = 0; round < probe_rounds(size); ++round) {
    seconds.emplace_back();
    for (const Schedule& call : probe_calls(rank, size, count, round)) seconds.back().push_back(run(call));
  }
  return seconds;
}

RankGroups groups_from_probe_times(int size, std::size_t count,
                                   const std::vector<std::vector<std::vector<double>>>& seconds) {
  if (size < 2) return one_group(size);
  const ProbeSamples samples = probe_samples(size, count, seconds);
  return rank_groups(probe_groups(embed(samples.latency_distances()).coordinates));
}

}  // namespace atp::plink
