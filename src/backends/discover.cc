// PLink's ProbeEmbed on a backend (include/atp/backends/discover.h).
#include "atp/backends/discover.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <stdexcept>

#include "atp/plink/positions.h"
#include "atp/plink/probing.h"

namespace atp {
namespace {

// A bound on the probe job, simulated or wall-clock: far above what probing takes (seconds for
// tens of hosts), so that only a hung run meets it.
constexpr Duration kProbeTimeLimit = std::chrono::minutes(10);

// The scenario with one probe job over `hosts` in place of its jobs.
Scenario probe_scenario(const Scenario& scenario, const std::vector<std::string>& hosts, std::size_t transfer_bytes) {
  const Algorithm* probe = find_algorithm("probe");
  Scenario s = scenario;
  s.jobs.clear();
  s.crashes.clear();
  s.restarts.clear();
  s.noise.clear();
  s.time_limit = kProbeTimeLimit;
  ScenarioJob job = scenario_job(*probe, 0, "probe");
  job.spec.workers = hosts;
  job.elements = std::max<std::size_t>(1, transfer_bytes / sizeof(float));
  job.rounds = plink::probe_rounds(static_cast<int>(hosts.size()));
  s.jobs.push_back(std::move(job));
  return s;
}

}  // namespace

Discovery discover(const Backend& backend, const Scenario& scenario, const DiscoverOptions& options) {
  Discovery d;
  d.hosts = options.hosts;
  std::map<std::string, std::size_t> host_index;  // in the topology's order
  for (const HostSpec& h : scenario.topology.hosts) host_index.emplace(h.name, host_index.size());
  if (d.hosts.empty()) {
    for (const HostSpec& h : scenario.topology.hosts) d.hosts.push_back(h.name);
  }
  std::set<std::string> seen;
  for (const std::string& h : d.hosts) {
    if (!host_index.contains(h)) throw ScenarioError("host '" + h + "' is no host of the topology");
    if (!seen.insert(h).second) throw ScenarioError("host '" + h + "' is listed twice");
  }
  if (d.hosts.size() < 2) throw ScenarioError("probing needs at least two hosts");

  if (const AlgorithmSupport support = backend.algorithm_support(); !support.tcp) {
    throw ScenarioError("the probes run over TCP, which " + std::string(support.where) +
                        " does not carry; use --backend ns3, loopback or netns");
  }
  const Scenario probe = probe_scenario(scenario, d.hosts, options.transfer_bytes);
  if (const std::string why = backend.cannot_run(probe, options.run); !why.empty()) throw ScenarioError(why);
  const ScenarioResult result = backend.run(probe, options.run);
  const JobResult& job = result.jobs.front();
  if (!job.correct) throw ProbeFailed("the probes failed: " + job.error);
  d.seconds = job.seconds;

  const plink::ProbeSamples samples =
      plink::probe_samples(static_cast<int>(d.hosts.size()), probe.jobs.front().elements, job.call_seconds);
  d.round_trip_s = samples.latency_distances();
  const Eigen::MatrixXd inverse = samples.bandwidth_distances();
  d.bytes_per_second = inverse.cwiseInverse();
  d.bytes_per_second.diagonal().setZero();

  const std::vector<std::vector<std::string>> all = plink::host_positions(scenario.topology);
  for (const std::string& h : d.hosts) d.positions.push_back(all[host_index.at(h)]);
  d.latency = plink::paia(d.positions, d.round_trip_s);
  d.bandwidth = plink::paia(d.positions, inverse);

  const Eigen::MatrixXd& chosen = options.probe == ProbeKind::kLatency ? d.round_trip_s : inverse;
  plink::EmbedOptions alpha = options.embed;
  alpha.alpha = 1;
  const plink::Embedding one = plink::embed(chosen, alpha);
  alpha.alpha = 2;
  const plink::Embedding two = plink::embed(chosen, alpha);
  d.embedded_alpha1 = plink::paia(d.positions, one.distances());
  d.embedded_alpha2 = plink::paia(d.positions, two.distances());
  d.embedding = options.embed.alpha == 1 ? one : options.embed.alpha == 2 ? two : plink::embed(chosen, options.embed);
  d.groups = plink::probe_groups(d.embedding.coordinates, options.grouping);
  return d;
}

Scenario with_probed_groups(const Backend& backend, Scenario scenario, const DiscoverOptions& options) {
  for (ScenarioJob& job : scenario.jobs) {
    if (job.grouping != JobGrouping::kProbe) continue;
    DiscoverOptions o = options;
    o.hosts = job.spec.workers;
    job.probed_groups = plink::rank_groups(discover(backend, scenario, o).groups);
  }
  return scenario;
}

Topology inferred_topology(const Discovery& d, bool ina) {
  Topology t;
  const auto group_name = [](int g) { return "group" + std::to_string(g); };
  for (int g = 0; g < d.groups.groups; ++g) {
    SwitchSpec& s = t.switches.emplace_back();
    s.name = group_name(g);
    s.config.atp_capable = ina;
  }
  if (d.groups.groups > 1) {
    SwitchSpec& core = t.switches.emplace_back();
    core.name = "core";
    core.config.atp_capable = ina;
    for (int g = 0; g < d.groups.groups; ++g) {
      SwitchLink& link = t.switch_links.emplace_back();
      link.a = group_name(g);
      link.b = "core";
    }
  }
  for (std::size_t h = 0; h < d.hosts.size(); ++h) {
    HostSpec& host = t.hosts.emplace_back();
    host.name = d.hosts[h];
    host.switch_name = group_name(d.groups.group[h]);
  }
  return t;
}

}  // namespace atp
