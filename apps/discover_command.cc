// `atp discover FILE.yaml`: PLink's ProbeEmbed on a backend (include/atp/backends/discover.h): the
// scenario's hosts probed pairwise, their distances embedded and grouped, each scored against the
// topology (PAIA); with --write-topology, a scenario file whose topology is the one the groups
// suggest, for the planners where nobody publishes the network.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "atp/backends/backend.h"
#include "atp/backends/discover.h"
#include "atp/plink/probing.h"
#include "atp/scenario/scenario.h"
#include "atp/scenario/topologies.h"
#include "commands.h"

namespace atp::cli {
namespace {

struct DiscoverFlags {
  std::string backend;
  std::string file;
  bool json = false;
  std::vector<std::string> hosts;
  std::size_t transfer_bytes = DiscoverOptions{}.transfer_bytes;
  std::string probe = "latency";
  double alpha = plink::EmbedOptions{}.alpha;
  int dimensions = plink::EmbedOptions{}.dimensions;
  bool node_costs = plink::EmbedOptions{}.node_costs;
  int groups = 0;
  double elasticity = plink::GroupingOptions{}.balance_elasticity;
  std::string write_topology;
  bool ina = false;
};

std::string percent(const plink::Paia& p) {
  if (p.triplets == 0) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << 100 * p.score() << "%";
  return s.str();
}

std::vector<std::vector<std::string>> group_members(const Discovery& d) {
  std::vector<std::vector<std::string>> members(static_cast<std::size_t>(d.groups.groups));
  for (std::size_t h = 0; h < d.hosts.size(); ++h) {
    members[static_cast<std::size_t>(d.groups.group[h])].push_back(d.hosts[h]);
  }
  return members;
}

std::string to_text(const Discovery& d, const DiscoverFlags& f, const Backend& backend) {
  std::ostringstream out;
  const std::size_t n = d.hosts.size();
  const plink::ProbeOptions probe;
  out << "probed " << n << " hosts on " << backend.name() << " in " << std::fixed << std::setprecision(3) << d.seconds
      << " s (" << (backend.simulated() ? "simulated" : "wall clock")
      << "): " << plink::pairing_rounds(static_cast<int>(n)).size()
      << " rounds of disjoint pairs for latency, as many for "
      << "bandwidth; per pair and direction " << probe.echoes << " round trips of one value and " << probe.transfers
      << " transfers of " << f.transfer_bytes / sizeof(float) * sizeof(float) << " bytes\n\n";
  out << "PAIA (share of " << d.latency.triplets
      << " comparable triplets whose distances order the hosts as the topology does"
      << (d.latency.triplets == 0 ? "; all hosts are equally close in the topology" : "") << "):\n"
      << "  latency probes            " << percent(d.latency) << "\n"
      << "  bandwidth probes          " << percent(d.bandwidth) << "\n"
      << "  embedded, alpha 1         " << percent(d.embedded_alpha1) << "  (" << f.probe << ")\n"
      << "  embedded, alpha 2         " << percent(d.embedded_alpha2) << "  (" << f.probe << ")\n\n";
  out << std::defaultfloat << d.groups.groups << " groups (constrained k-means of the " << f.probe
      << " embedding, alpha " << f.alpha << "):\n";
  const auto members = group_members(d);
  for (std::size_t g = 0; g < members.size(); ++g) {
    out << "  group" << g << ":";
    for (const std::string& h : members[g]) out << " " << h;
    out << "\n";
  }
  out << "\nhost            ToR             group   round trip to the nearest (us)   coordinates\n";
  for (std::size_t h = 0; h < n; ++h) {
    double nearest = -1;
    for (std::size_t o = 0; o < n; ++o) {
      const double rtt = d.round_trip_s(static_cast<Eigen::Index>(h), static_cast<Eigen::Index>(o));
      if (o != h && (nearest < 0 || rtt < nearest)) nearest = rtt;
    }
    const auto& position = d.positions[h];
    out << std::left << std::setw(16) << d.hosts[h] << std::setw(16) << position[position.size() - 2] << std::setw(8)
        << ("group" + std::to_string(d.groups.group[h])) << std::right << std::setw(12) << std::fixed
        << std::setprecision(1) << nearest * 1e6 << "                     " << std::defaultfloat
        << std::setprecision(4);
    for (Eigen::Index c = 0; c < d.embedding.coordinates.cols(); ++c) {
      out << (c == 0 ? "" : " ") << d.embedding.coordinates(static_cast<Eigen::Index>(h), c);
    }
    out << "\n";
  }
  return out.str();
}

std::string to_json(const Discovery& d, const Backend& backend) {
  using nlohmann::ordered_json;
  const auto matrix = [](const Eigen::MatrixXd& m, double factor) {
    ordered_json rows = ordered_json::array();
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
      ordered_json row = ordered_json::array();
      for (Eigen::Index j = 0; j < m.cols(); ++j) row.push_back(m(i, j) * factor);
      rows.push_back(std::move(row));
    }
    return rows;
  };
  const auto score = [](const plink::Paia& p) {
    return ordered_json{{"score", p.score()}, {"agreeing", p.agreeing}, {"triplets", p.triplets}};
  };
  ordered_json o;
  o["backend"] = backend.name();
  o["seconds"] = d.seconds;
  o["hosts"] = d.hosts;
  o["positions"] = d.positions;
  o["round_trip_us"] = matrix(d.round_trip_s, 1e6);
  o["bandwidth_gbps"] = matrix(d.bytes_per_second, 8e-9);
  o["paia"] = {{"latency", score(d.latency)},
               {"bandwidth", score(d.bandwidth)},
               {"embedded_alpha1", score(d.embedded_alpha1)},
               {"embedded_alpha2", score(d.embedded_alpha2)}};
  o["coordinates"] = matrix(d.embedding.coordinates, 1);
  o["node_costs"] = std::vector<double>(d.embedding.node_costs.begin(), d.embedding.node_costs.end());
  o["groups"] = group_members(d);
  return o.dump(2) + "\n";
}

// A scenario file on the inferred topology: the file's link settings, and its jobs whose hosts
// were all probed (their main keys), or else one plink job over the probed hosts.
std::string scenario_yaml(const Scenario& s, const Discovery& d, const DiscoverFlags& f) {
  std::ostringstream y;
  y << "# atp discover --backend " << f.backend << " " << f.file << ": " << d.groups.groups
    << " groups of probed hosts (" << f.probe << " probes, alpha " << f.alpha << ")\n";
  y << "seed: " << s.seed << "\n";
  const LinkOverrides& l = s.link;
  const sim::ChannelConfig port = link_base(s, false);
  y << "link: {delay_us: " << std::chrono::duration<double, std::micro>(port.delay).count()
    << ", rate_gbps: " << port.rate_gbps;
  if (l.buffer_packets) y << ", buffer_packets: " << *l.buffer_packets;
  if (l.ecn_threshold_packets) y << ", ecn_threshold_packets: " << *l.ecn_threshold_packets;
  y << "}\n";
  y << topology_yaml(inferred_topology(d, f.ina));
  const std::set<std::string> probed(d.hosts.begin(), d.hosts.end());
  const auto list = [](const std::vector<std::string>& names) {
    std::string out = "[";
    for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : ", ") + names[i];
    return out + "]";
  };
  std::ostringstream jobs;
  for (const ScenarioJob& j : s.jobs) {
    const auto in = [&](const std::vector<std::string>& hosts) {
      return std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return probed.contains(h); });
    };
    if (!in(j.spec.workers) || !in(j.spec.ps)) continue;
    jobs << "  - {name: " << j.spec.name << ", algorithm: " << j.algorithm->name
         << ", workers: " << list(j.spec.workers);
    if (!j.spec.ps.empty()) jobs << ", ps: " << list(j.spec.ps);
    jobs << ", elements: " << j.elements;
    if (j.algorithm->timed_calls == nullptr) jobs << ", rounds: " << j.rounds;
    jobs << "}\n";
  }
  if (jobs.str().empty()) {
    jobs << "  - {name: plink, algorithm: plink, workers: " << list(d.hosts) << ", elements: 262144, rounds: 3}\n";
  }
  y << "jobs:\n" << jobs.str();
  return y.str();
}

int run_discover(const DiscoverFlags& f) {
  const Backend* backend = find_backend(f.backend);
  if (backend == nullptr) {
    std::cerr << "atp discover: " << no_backend_reason(f.backend) << "\n";
    return kExitBadInput;
  }
  DiscoverOptions o;
  o.hosts = f.hosts;
  o.transfer_bytes = f.transfer_bytes;
  if (f.probe != "latency" && f.probe != "bandwidth") {
    std::cerr << "atp discover: --probe must be latency or bandwidth, got " << f.probe << "\n";
    return kExitBadInput;
  }
  o.probe = f.probe == "latency" ? ProbeKind::kLatency : ProbeKind::kBandwidth;
  // The embedding's options are checked before the probes, which take a while.
  if (!(f.alpha >= 1 && f.alpha <= 2) || f.dimensions < 1) {
    std::cerr << "atp discover: --alpha must be between 1 and 2 and --dimensions at least 1\n";
    return kExitBadInput;
  }
  o.embed.alpha = f.alpha;
  o.embed.dimensions = f.dimensions;
  o.embed.node_costs = f.node_costs;
  o.grouping.groups = f.groups;
  o.grouping.balance_elasticity = f.elasticity;
  Scenario scenario;
  Discovery d;
  try {
    scenario = load_scenario_file(f.file);
    d = discover(*backend, scenario, o);
  } catch (const ScenarioError& e) {
    std::cerr << "atp discover: " << with_file(f.file, e.what()) << "\n";
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "atp discover: " << e.what() << "\n";  // an embedding or grouping option
    return kExitBadInput;
  } catch (const ProbeFailed& e) {
    std::cerr << "atp discover: " << e.what() << "\n";
    return kExitFailed;
  } catch (const std::runtime_error& e) {
    if (backend->simulated()) throw;
    std::cerr << "atp discover: " << e.what() << "\n";  // a process that did not start, or Ctrl-C
    return kExitFailed;
  }
  std::cout << (f.json ? to_json(d, *backend) : to_text(d, f, *backend));
  if (!f.write_topology.empty()) {
    std::ofstream out(f.write_topology);
    out << scenario_yaml(scenario, d, f);
    if (!out.flush()) {
      std::cerr << "atp discover: cannot write " << f.write_topology << "\n";
      return kExitFailed;
    }
    if (!f.json) std::cout << "\nwrote " << f.write_topology << ": the topology of these groups\n";
  }
  return kExitOk;
}

}  // namespace

Command add_discover_command(CLI::App& parent) {
  auto f = std::make_shared<DiscoverFlags>();
  f->backend = find_backend("ns3") != nullptr ? "ns3" : "loopback";
  Command c;
  c.app = parent.add_subcommand(
      "discover",
      "probe a scenario's hosts pairwise, embed and group them as PLink does, and score both against the "
      "topology (PAIA)");
  c.app->add_option("file", f->file, "Scenario file (YAML): its topology, links and faults; its jobs are not run")
      ->required();
  c.app->add_option("--backend", f->backend, "where the probes run: " + backend_names() + " (inproc has no TCP)")
      ->capture_default_str();
  c.app->add_flag("--json", f->json,
                  "print the hosts, their positions, the round trips (us) and bandwidths (Gbit/s) of every pair, PAIA, "
                  "coordinates and groups as JSON");
  c.app->add_option("--hosts", f->hosts, "the hosts to probe (default: every host of the topology)")->delimiter(',');
  c.app->add_option("--transfer-bytes", f->transfer_bytes, "bytes of each timed transfer (a bandwidth sample)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{4}, std::size_t{1} << 30));
  c.app->add_option("--probe", f->probe, "the distances embedded and grouped: latency (the paper's) or bandwidth")
      ->capture_default_str();
  c.app->add_option("--alpha", f->alpha, "the embedding's exponent, in [1, 2] (equation (1))")->capture_default_str();
  c.app->add_option("--dimensions", f->dimensions, "of the embedding")->capture_default_str();
  c.app->add_flag("--node-costs,!--no-node-costs", f->node_costs,
                  "fit a cost per host beside the coordinates (equation (1)'s h_i: a host's own stack and link)");
  c.app->add_option("--groups", f->groups, "how many groups (default: sqrt of the hosts, rounded)");
  c.app
      ->add_option("--elasticity", f->elasticity,
                   "balance elasticity, >= 1: a group may shrink to hosts / groups / elasticity")
      ->capture_default_str();
  c.app->add_option("--write-topology", f->write_topology,
                    "also write a scenario file whose topology is the groups (a switch per group under a core switch) "
                    "with the file's link settings and its jobs on the probed hosts; atp run and ATP_TOPOLOGY take it");
  c.app->add_flag("--ina", f->ina, "with --write-topology: the inferred switches aggregate (atp: true)");
  c.app->footer(
      "The probes are a job of algorithm probe over the hosts, on the file's links, faults and background flows: "
      "every pair once, in rounds of disjoint pairs. PAIA counts, for each host and two others the topology ranks "
      "differently (a longer shared chain of switches is closer), whether the distances rank them the same way. "
      "docs/plink.md says more.");
  c.run = [f] { return run_discover(*f); };
  return c;
}

}  // namespace atp::cli
