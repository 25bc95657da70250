// The process backends of `atp run`: loopback (every process on 127.0.0.1) and netns (network
// namespaces joined by veth links), what each refuses, and the run itself (process_run.h), written
// once for both.
#include <stdexcept>

#include "atp/backends/processes.h"
#include "atp/io/netns.h"
#include "process_run.h"

namespace atp {
namespace {

class ProcessBackend final : public Backend {
 public:
  // `loopback`: every process on 127.0.0.1; else in network namespaces (placement.h).
  explicit ProcessBackend(bool loopback) : loopback_(loopback) {}
  std::string_view name() const override { return loopback_ ? "loopback" : "netns"; }
  std::string_view summary() const override {
    return loopback_ ? "real processes on 127.0.0.1 (also called udp); wall-clock times"
                     : "real processes in network namespaces and veth links, switches on Ethernet ports (needs "
                       "root); wall-clock times";
  }
  bool simulated() const override { return false; }
  AlgorithmSupport algorithm_support() const override {
    return {.where = name(), .tcp = true, .real_sockets = true, .gloo_built = ATP_WITH_GLOO != 0};
  }

  std::string cannot_run(const Scenario& scenario, const RunOptions& options) const override {
    const bool loopback = loopback_;
    if (options.series_interval > Duration::zero()) {
      return "series: real processes record no series; use a simulated backend (inproc or ns3)";
    }
    if (std::string why = cannot_run_algorithms(scenario, algorithm_support()); !why.empty()) return why;
    if (loopback && !scenario.background.empty()) {
      return "background: background flows need real links; use --backend netns";
    }
    // A host runs at most one worker (of one job) and one PS (of any number of jobs). On
    // loopback a host is one UDP peer of its switch, so it runs one of the two; in namespaces
    // both can share the host's address (the worker's socket is bound to 0.0.0.0, the PS's to
    // the host's address, both with SO_REUSEADDR), as BytePS's colocated PS shards (N-to-N).
    // A PS's unicast answer to a resend, addressed to the host, reaches the PS's socket, which
    // relays it to the worker (control::PsDaemonCounters::relayed_to_local_worker).
    std::map<std::string, std::string> worker_job;  // host -> the job it is a worker of
    for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
      const JobSpec& spec = scenario.jobs[j].spec;
      for (const std::string& w : spec.workers) {
        const auto [it, fresh] = worker_job.emplace(w, spec.name);
        if (!fresh) {
          return "jobs[" + std::to_string(j) + "]: host '" + w + "' is a worker of job '" + it->second +
                 "' and of job '" + spec.name + "'; a host runs one worker (use separate hosts)";
        }
      }
    }
    for (const ScenarioJob& job : scenario.jobs) {
      for (const std::string& p : job.spec.ps) {
        if (loopback && worker_job.contains(p)) {
          return "host '" + p + "' is both a worker of job '" + worker_job.at(p) +
                 "' and a PS; the loopback backend runs one process per host (use separate hosts, or --backend netns)";
        }
      }
    }
    if (loopback) return "";
    // Connected, so as many links as switches or more close a cycle.
    if (scenario.topology.switch_links.size() >= scenario.topology.switches.size()) {
      return "topology.links: the links form a cycle, and the netns testbed's switches pass ARP and TCP by MAC "
             "learning and flooding, which loops around a cycle; give netns links that form a tree (inproc, ns3 "
             "and loopback take cycles)";
    }
    // Probing runs `ip` and `ethtool` and makes a namespace: once per process, not at every check
    // (run() checks again, and the benchmark checks each algorithm before it runs each size).
    static const std::string unavailable = netns::unavailable_reason();
    return unavailable;
  }

  ScenarioResult run(const Scenario& scenario, const RunOptions& options) const override {
    if (const std::string why = cannot_run(scenario, options); !why.empty()) throw ScenarioError(why);
    const std::string binary = daemon_binary(options.atp_binary);
    // ~ProcessRun stops and reaps every process (and, in namespaces, removes every namespace and veth).
    return ProcessRun(scenario, binary, options.on_round, loopback_ ? loopback_placement() : namespace_placement())
        .run();
  }

 private:
  bool loopback_;
};

}  // namespace

const Backend& loopback_backend() {
  static const ProcessBackend backend(true);
  return backend;
}

const Backend& netns_backend() {
  static const ProcessBackend backend(false);
  return backend;
}

ScenarioResult run_loopback(const Scenario& scenario, const RunOptions& options) {
  return loopback_backend().run(scenario, options);
}

ScenarioResult run_netns(const Scenario& scenario, const RunOptions& options) {
  return netns_backend().run(scenario, options);
}

}  // namespace atp
