// The registry of allreduce algorithms (atp/scenario/algorithm.h): their data, and the refusals
// every backend words from it.
#include "atp/scenario/algorithm.h"

#include <map>
#include <stdexcept>

#include "atp/plan/plan.h"
#include "atp/plink/aggregation.h"
#include "atp/plink/grouping.h"
#include "atp/plink/probing.h"
#include "atp/scenario/scenario.h"
#include "atp/schedule/builders.h"

namespace atp {
namespace {

using enum AlgorithmRuntime;
using enum ResultCheck;

// The flat schedules, which place ranks without regard to racks.
template <Schedule (*Build)(int, int, std::size_t)>
Schedule flat(int rank, int size, std::size_t count, const RankGroups&, int) {
  return Build(rank, size, count);
}

Schedule hierarchical(int rank, int size, std::size_t count, const RankGroups& racks, int) {
  return hierarchical_allreduce_schedule(rank, size, count, racks);
}

// PLink's plans (docs/plink.md): 2LHA with the job's racks as its groups; FA, one group.
Schedule plink_two_level(int rank, int size, std::size_t count, const RankGroups& racks, int connections) {
  return plink::two_level_schedule(rank, size, count, racks, plink::kDefaultChunkElements, connections);
}
Schedule plink_flat(int rank, int size, std::size_t count, const RankGroups&, int connections) {
  return plink::flat_aggregation_schedule(rank, size, count, plink::kDefaultChunkElements, connections);
}
// PLink's probes (plink/probing.h): a connection to every other worker, and each pairing round's calls.
Schedule probe_connections(int rank, int size, std::size_t, const RankGroups&, int) {
  return plink::all_pairs(rank, size);
}
std::vector<Schedule> probe_round(int rank, int size, std::size_t count, std::uint32_t round) {
  return plink::probe_calls(rank, size, count, round);
}

// The registry: one entry per algorithm, the default first.
constexpr Algorithm kAlgorithms[] = {
    {.name = "atp",
     .summary = "in-network aggregation in the switches, PS fallback (the default)",
     .runtime = kProtocol,
     .in_network_aggregation = true,
     .check = kExact,
     .protocol = "atp",
     .parameter_servers = true},
    {.name = "ps",
     .summary = "ATP's protocol, switches only forward: a BytePS-style PS, sharded over the ps hosts (N-to-N "
                "on netns: the workers' own)",
     .runtime = kProtocol,
     .check = kExact,
     .protocol = "atp",
     .parameter_servers = true},
    {.name = "ring",
     .summary = "bandwidth-optimal ring allreduce over TCP between the workers; no ps",
     .runtime = kSchedule,
     .check = kFloat32Rounding,
     .schedule = flat<ring_allreduce_schedule>},
    {.name = "gloo",
     .summary = "Gloo's ring allreduce over TCP (what PyTorch's gloo backend runs); no ps",
     .runtime = kGloo,
     .check = kFloat32Rounding,
     .variant = "ring",
     .instead = "algorithm ring (the same algorithm)"},
    {.name = "gloo_hd",
     .summary = "Gloo's halving-doubling allreduce over TCP; no ps",
     .runtime = kGloo,
     .check = kFloat32Rounding,
     .variant = "halving_doubling",
     .instead = "algorithm ring"},
    {.name = "halving_doubling",
     .summary = "Rabenseifner's halving-doubling allreduce over TCP (this project's schedule); no ps",
     .runtime = kSchedule,
     .check = kFloat32Rounding,
     .schedule = flat<halving_doubling_allreduce_schedule>},
    {.name = "rina",
     .summary = "Rina: a ring in which each rack whose ToR aggregates (atp: true) is one member, its switch adding "
                "the rack's values (docs/rina.md); no ps",
     .runtime = kProtocol,
     .in_network_aggregation = true,
     .check = kExact,
     .protocol = "rina"},
    {.name = "hierarchical",
     .summary = "hierarchical allreduce over TCP (H-AR, as Horovod and NCCL): ring reduce-scatter in each rack, "
                "ring allreduce across racks, ring allgather in each rack; no ps",
     .runtime = kSchedule,
     .check = kFloat32Rounding,
     .schedule = hierarchical,
     .follows_racks = true},
    {.name = "plink",
     .summary = "PLink's two-level hierarchical aggregation over TCP (2LHA): each 64 KiB chunk summed at a local "
                "master in every rack, then at a global master, and sent back down; the racks are the groups "
                "(docs/plink.md); no ps",
     .runtime = kSchedule,
     .check = kFloat32Rounding,
     .schedule = plink_two_level,
     .follows_racks = true,
     .takes_grouping = true,
     .takes_connections = true,
     .tunes_masters = true},
    {.name = "plink_fa",
     .summary = "PLink's flat aggregation over TCP (FA): every worker the master of 1/n of the 64 KiB chunks; no ps",
     .runtime = kSchedule,
     .check = kFloat32Rounding,
     .schedule = plink_flat,
     .one_group = true,
     .takes_connections = true,
     .tunes_masters = true},
    {.name = "probe",
     .summary = "PLink's probes between the workers, not an allreduce: round trips of one value and timed transfers "
                "of `elements` values, every pair once in rounds of disjoint pairs (rounds: set by the workers); "
                "the result is the distances (atp discover); no ps",
     .runtime = kSchedule,
     .check = kFloat32Rounding,
     .schedule = probe_connections,
     .timed_calls = probe_round},
};

}  // namespace

RankGroups job_racks(const Topology& topology, const std::vector<std::string>& workers) {
  std::map<std::string, const HostSpec*> hosts;
  for (const HostSpec& h : topology.hosts) hosts.emplace(h.name, &h);
  RankGroups racks;
  std::map<std::string, std::size_t> rack_of_switch;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    const auto host = hosts.find(workers[w]);
    if (host == hosts.end())
      throw std::invalid_argument("worker " + std::to_string(w) + " (" + workers[w] + ") is no host of the topology");
    const auto [rack, fresh] = rack_of_switch.emplace(host->second->switch_name, racks.size());
    if (fresh) racks.emplace_back();
    racks[rack->second].push_back(static_cast<int>(w));
  }
  return racks;
}

RankGroups job_groups(const Scenario& scenario, const ScenarioJob& job) {
  const std::vector<std::string>& workers = job.spec.workers;
  RankGroups racks = job_racks(scenario.topology, workers);  // also the check that every worker is a host
  if (job.algorithm->one_group) return plink::one_group(static_cast<int>(workers.size()));
  switch (job.grouping) {
    case JobGrouping::kTopology:
      return racks;
    case JobGrouping::kProbe:
      if (job.probed_groups.empty()) {
        throw std::invalid_argument("job '" + job.spec.name + "' is grouped by probes that have not run");
      }
      return job.probed_groups;
    case JobGrouping::kRandom:
      break;
  }
  const auto n = static_cast<int>(workers.size());
  return plink::rank_groups(plink::balanced_random_groups(n, plink::group_count(n), scenario.seed ^ job.spec.id));
}

std::span<const Algorithm> algorithms() { return kAlgorithms; }

const Algorithm& default_algorithm() { return kAlgorithms[0]; }

const Algorithm* find_algorithm(std::string_view name) {
  for (const Algorithm& a : algorithms()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string algorithm_names() {
  const auto all = algorithms();
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i].name);
  }
  return out;
}

// The backends named here are what each kind of support means in this project (atp/backends/):
// ns-3 carries TCP, the process backends have real sockets.
std::string cannot_run(const Algorithm& a, const AlgorithmSupport& s) {
  const std::string name(a.name);
  const std::string instead = a.instead.empty() ? "" : std::string(a.instead) + ", or ";
  switch (a.runtime) {
    case kProtocol:
      return "";
    case kSchedule:
      if (s.tcp) return "";
      return name + " runs over TCP, which " + std::string(s.where) +
             " does not carry; use --backend ns3, loopback or netns";
    case kGloo:
      if (!s.real_sockets) {
        return name + " is Gloo's code on real sockets, which " + std::string(s.where) + " does not have; use " +
               instead + "--backend loopback or netns";
      }
      if (!s.gloo_built) {
        return name + ": this atp was built without Gloo (configured with -DATP_WITH_GLOO=OFF)" +
               (a.instead.empty() ? "" : "; use " + std::string(a.instead));
      }
      return "";
  }
  return name + ": no backend runs it";  // not reached: every runtime is handled above
}

std::string cannot_run_algorithms(const Scenario& scenario, const AlgorithmSupport& support) {
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const ScenarioJob& job = scenario.jobs[j];
    if (const std::string why = cannot_run(*job.algorithm, support); !why.empty()) {
      return "jobs[" + std::to_string(j) + "].algorithm: " + why;
    }
    if (job.grouping == JobGrouping::kProbe && job.probed_groups.empty()) {
      return "jobs[" + std::to_string(j) +
             "].grouping: probe groups the workers by probing them first, which atp run does before the run "
             "(in code: with_probed_groups, atp/backends/discover.h)";
    }
  }
  return "";
}

}  // namespace atp
