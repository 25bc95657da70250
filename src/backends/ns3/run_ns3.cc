// `atp run --backend ns3`: the scenario runner (SimulatedScenario) on the ns-3 adapter, plus
// what needs ns-3's TCP: ring allreduce jobs and background flows (tcp_apps.h).
#include <chrono>
#include <memory>
#include <string>

#include "atp/backends/ns3.h"
#include "atp/backends/simulated.h"
#include "atp/scenario/scenario.h"
#include "atp/sim/ns3_network.h"
#include "tcp_apps.h"

namespace atp {
namespace {

// What the ns-3 links cannot do, said before anything runs (a fault would otherwise fail mid-run).
void check_ns3_can_model(const Scenario& scenario) {
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const Algorithm a = scenario.jobs[j].algorithm;
    if (a == Algorithm::kGloo || a == Algorithm::kGlooHalvingDoubling) {
      throw ScenarioError("jobs[" + std::to_string(j) + "].algorithm: " + std::string(to_string(a)) +
                          " is Gloo's code on real sockets; on ns3 use ring (the same ring algorithm as an ns-3 "
                          "application), or --backend netns");
    }
  }
  for (std::size_t f = 0; f < scenario.link_faults.size(); ++f) {
    const LinkFault& fault = scenario.link_faults[f];
    const std::string key = "faults[" + std::to_string(f) + "]";
    if (fault.overrides.delay && (fault.one_way || fault.from > Duration::zero() || fault.until)) {
      throw ScenarioError(key +
                          ": on ns3 a link has one delay for both directions for the whole run; "
                          "a delay fault must be two-way and last from the start");
    }
  }
  reject_worker_hosted_ps(scenario, "the ns3 backend");
}

}  // namespace

ScenarioResult run_ns3(const Scenario& scenario, const SimulationOptions& options) {
  check_ns3_can_model(scenario);
  const auto wall_start = std::chrono::steady_clock::now();
  ns3adapter::Ns3Network network(scenario.seed);
  std::unique_ptr<SimulatedScenario> run;
  try {
    run = std::make_unique<SimulatedScenario>(scenario, network);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(std::string("link: ") + e.what());
  }
  if (options.series_interval > Duration::zero()) run->record_series(options.series_interval);
  ns3adapter::TcpApps tcp(scenario, network, *run, options);
  ScenarioResult result = run->run("ns3");
  tcp.report(result);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  result.link_packets = network.link_packets();
  return result;
}

}  // namespace atp
