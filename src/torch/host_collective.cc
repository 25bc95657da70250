// The host collectives of the "atp" backend (host_collective.h): the racks' exchange in the store,
// PLink's probes run over TCP with their times exchanged there, and the allreduce's join.
#include "host_collective.h"

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/plink/aggregation.h"
#include "atp/plink/probe_exchange.h"
#include "atp/plink/probing.h"

namespace atp::torch_backend {
namespace {

// ATP_GROUPING=probe (plink): the ranks' groups from PLink's probes (docs/plink.md): every pair of
// ranks probes once over TCP (plink::probe_calls, 256 KiB transfers), each rank publishes its call
// times in the store, and every rank computes the same embedding and groups from all of them.
RankGroups probed_groups(Store& store, int rank, int size, std::uint32_t bind_ip, Duration timeout) {
  if (size < 2) return plink::one_group(size);
  constexpr std::size_t kTransferElements = plink::kProbeTransferElements;
  const auto probes = TcpScheduleAllreduce::join(
      "probe", [](int r, int n, std::size_t) { return plink::all_pairs(r, n); }, store, rank, size, bind_ip, timeout);
  std::vector<float> buffer(kTransferElements);
  const std::vector<std::vector<double>> mine =
      plink::time_probe_calls(rank, size, kTransferElements, [&](const Schedule& call) {
        const auto t0 = std::chrono::steady_clock::now();
        probes->run(call, buffer);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
  store.set("probe/" + std::to_string(rank), plink::probe_times_text(mine));
  std::vector<std::vector<std::vector<double>>> seconds;
  for (int r = 0; r < size; ++r)
    seconds.push_back(plink::probe_times_from_text(store.get("probe/" + std::to_string(r), timeout)));
  return plink::groups_from_probe_times(size, kTransferElements, seconds);
}

// The racks by the names the ranks gave them (HostCollectiveOptions::rack), in the order of their
// first rank, as job_racks gives them.
RankGroups named_racks(Store& store, int rank, int size, const std::string& rack, Duration timeout) {
  store.set("rack/" + std::to_string(rank), rack);
  RankGroups racks;
  std::map<std::string, std::size_t> index;
  for (int r = 0; r < size; ++r) {
    const auto [it, fresh] = index.emplace(store.get("rack/" + std::to_string(r), timeout), racks.size());
    if (fresh) racks.emplace_back();
    racks[it->second].push_back(r);
  }
  return racks;
}

}  // namespace

std::unique_ptr<Allreduce> join_host_collective(const Algorithm& algorithm, const HostCollectiveOptions& options,
                                                Store& store, int rank, int size, Duration timeout) {
  const RankGroups racks = options.probe_groups ? probed_groups(store, rank, size, options.bind_ip, timeout)
                                                : named_racks(store, rank, size, options.rack, timeout);
  ScheduleBuilder build = [&algorithm, racks, connections = options.connections](int r, int n, std::size_t count) {
    return algorithm.schedule(r, n, count, racks, connections);
  };
  return TcpScheduleAllreduce::join(std::string(algorithm.name), std::move(build), store, rank, size, options.bind_ip,
                                    timeout);
}

}  // namespace atp::torch_backend
