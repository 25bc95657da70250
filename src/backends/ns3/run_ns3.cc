// `atp run --backend ns3`: the scenario runner (SimulatedScenario) on the ns-3 adapter, plus
// what needs ns-3's TCP: host collectives and background flows (tcp_apps.h).
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

class Ns3Backend final : public Backend {
 public:
  std::string_view name() const override { return "ns3"; }
  std::string_view summary() const override {
    return "ns-3 simulation with TCP: host collectives and background flows too; simulated time, deterministic";
  }
  bool simulated() const override { return true; }
  // ns-3's TCP carries the host collectives built as schedules (tcp_apps.h), not Gloo's code.
  AlgorithmSupport algorithm_support() const override { return {.where = "ns3", .tcp = true}; }

  // What the ns-3 links cannot do, said before anything runs (a fault would otherwise fail mid-run).
  std::string cannot_run(const Scenario& scenario, const RunOptions&) const override {
    if (std::string why = cannot_run_algorithms(scenario, algorithm_support()); !why.empty()) return why;
    for (std::size_t f = 0; f < scenario.link_faults.size(); ++f) {
      const LinkFault& fault = scenario.link_faults[f];
      if (fault.overrides.delay && (fault.one_way || fault.from > Duration::zero() || fault.until)) {
        return "faults[" + std::to_string(f) +
               "]: on ns3 a link has one delay for both directions for the whole run; "
               "a delay fault must be two-way and last from the start";
      }
    }
    return simulated_cannot_run(scenario, "the ns3 backend");
  }

  ScenarioResult run(const Scenario& scenario, const RunOptions& options) const override {
    if (const std::string why = cannot_run(scenario, options); !why.empty()) throw ScenarioError(why);
    const auto wall_start = std::chrono::steady_clock::now();
    ns3adapter::Ns3Network network(scenario.seed, scenario.mtu_bytes);
    std::unique_ptr<SimulatedScenario> run;
    try {
      run = std::make_unique<SimulatedScenario>(scenario, network);
    } catch (const std::invalid_argument& e) {
      throw ScenarioError(std::string("link: ") + e.what());
    }
    if (options.series_interval > Duration::zero()) run->record_series(options.series_interval);
    ns3adapter::TcpApps tcp(scenario, network, *run, options.series_interval);
    ScenarioResult result = run->run("ns3");
    tcp.report(result);
    result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    result.link_packets = network.link_packets();
    return result;
  }
};

}  // namespace

const Backend& ns3_backend() {
  static const Ns3Backend backend;
  return backend;
}

ScenarioResult run_ns3(const Scenario& scenario, const RunOptions& options) {
  return ns3_backend().run(scenario, options);
}

}  // namespace atp
