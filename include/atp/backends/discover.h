// PLink's ProbeEmbed on a backend (PLink, MLSys'20, §4.1 and §5.5; docs/plink.md): a scenario's
// hosts probed by a job of algorithm probe (atp/plink/probing.h) on any backend with TCP, their
// distances embedded and grouped, and both scored against the topology's ground truth (PAIA).
// What `atp discover` prints and what a job's `grouping: probe` follows.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/backends/backend.h"
#include "atp/plan/plan.h"
#include "atp/plink/embed.h"
#include "atp/plink/grouping.h"
#include "atp/plink/paia.h"
#include "atp/scenario/scenario.h"

namespace atp {

enum class ProbeKind : std::uint8_t {
  kLatency,    // round trips of one value: the paper's choice (PAIA 95.6% against iperf's 77.4%)
  kBandwidth,  // timed transfers, as inverse bandwidths
};

// The probe job failed (its error): a peer gone, a stall, a time limit.
class ProbeFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DiscoverOptions {
  std::vector<std::string> hosts;         // the hosts to probe; empty: every host of the topology
  std::size_t transfer_bytes = 1 << 20;   // per bandwidth sample (rounded down to whole floats)
  ProbeKind probe = ProbeKind::kLatency;  // the distances that are embedded and grouped
  plink::EmbedOptions embed;              // the embedding that the groups are made of (alpha 2)
  plink::GroupingOptions grouping;        // k = sqrt(n), balance elasticity 2, 10 clusterings
  RunOptions run;                         // how the backend runs the probe job
};

struct Discovery {
  std::vector<std::string> hosts;    // probed, in probe order (the matrices' rows)
  Eigen::MatrixXd round_trip_s;      // symmetric: each pair's median round trip, seconds
  Eigen::MatrixXd bytes_per_second;  // symmetric: each pair's bandwidth (the inverse of the median's inverse)
  plink::Embedding embedding;        // of the chosen probe's distances, options.embed
  plink::Grouping groups;            // of the embedding's coordinates, options.grouping
  // Each host's chain of switches from the topology's centre down (plink::host_positions): the
  // ground truth of PAIA.
  std::vector<std::vector<std::string>> positions;
  // PAIA of the raw latency and bandwidth distances, and of the chosen probe's embedding with
  // alpha 1 and alpha 2 (the paper's §5.5 columns).
  plink::Paia latency, bandwidth, embedded_alpha1, embedded_alpha2;
  double seconds = 0;  // the probe job's time (simulated on ns3, wall-clock on the process backends)
};

// Probes `options.hosts` of `scenario` on `backend`: the scenario's topology, links, link faults
// and background flows, with one job of algorithm probe over those hosts in place of its jobs
// (crashes, restarts and noise dropped: they name the jobs' hosts and rounds). Throws
// ScenarioError for hosts that are not the topology's, fewer than two, or a scenario the backend
// cannot run (its sentence: inproc has no TCP); ProbeFailed when the probe job fails (its error);
// what Backend::run throws (a process backend's std::runtime_error when a process cannot start);
// std::invalid_argument for bad embedding or grouping options.
Discovery discover(const Backend& backend, const Scenario& scenario, const DiscoverOptions& options);

// `scenario` with every `grouping: probe` job's probed_groups filled: its workers probed on
// `backend` (discover, the job's workers as options.hosts) and grouped, as its ranks by group.
// Throws what discover throws.
Scenario with_probed_groups(const Backend& backend, Scenario scenario, const DiscoverOptions& options = {});

// The topology the groups suggest, for planners where nobody publishes one: a switch per group
// ("group0", ...) holding its hosts, all under one switch "core" (none with one group); every
// switch aggregating when `ina` (SwitchConfig's defaults otherwise).
Topology inferred_topology(const Discovery& discovery, bool ina);

}  // namespace atp
