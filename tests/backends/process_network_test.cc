// The network side of a process run on loopback (process_network.h): every switch and PS started
// and answering, a switch restart of the fault timeline taking its switch away and back, a host
// crash left to the runner, and every switch's counters collected at the end. Runs the freshly
// built atp (ATP_BINARY).
#include "../../src/backends/processes/process_network.h"

#include <gtest/gtest.h>

#include "atp/control/daemon_clients.h"
#include "atp/scenario/timeline.h"

namespace atp {
namespace {

const char* const kScenario = R"(
seed: 1
topology:
  switches: [{name: tor0}, {name: tor1}, {name: core}]
  hosts:
    - {name: w0, switch: tor0}
    - {name: w1, switch: tor1}
    - {name: ps, switch: core}
  links: [[tor0, core], [tor1, core]]
jobs:
  - {name: a, workers: [w0, w1], ps: [ps], elements: 1000, rounds: 1}
faults:
  - {restart: tor0, at_us: 1000, down_us: 1000}
  - {crash: w1, at_us: 5000}
)";

TEST(ProcessNetwork, StartsEveryDaemonAndTakesARestartedSwitchAwayAndBack) {
  const Scenario s = parse_scenario_yaml(kScenario);
  ProcessNetwork net(s, ATP_BINARY, loopback_placement());
  net.plan();
  net.start({"ps"});
  net.begin();
  for (const std::string name : {"tor0", "tor1", "core"}) {
    EXPECT_TRUE(net.is_switch(name));
    const auto stats = stats_or_none(net.orchestrator().switch_client(name));
    ASSERT_TRUE(stats.has_value()) << name;
    EXPECT_EQ(stats->name, name);
  }
  EXPECT_FALSE(net.is_switch("ps"));
  EXPECT_TRUE(stats_or_none(net.orchestrator().ps_client("ps")).has_value());

  const std::vector<TimedFault> timeline = fault_timeline(s);
  ASSERT_EQ(timeline.size(), 3u);
  ASSERT_EQ(timeline[0].kind, TimedFault::Kind::kSwitchDown);
  EXPECT_TRUE(net.apply(timeline[0]));
  EXPECT_FALSE(stats_or_none(net.orchestrator().switch_client("tor0")).has_value()) << "stopped";
  EXPECT_TRUE(stats_or_none(net.orchestrator().switch_client("tor1")).has_value()) << "only tor0";
  ASSERT_EQ(timeline[1].kind, TimedFault::Kind::kSwitchUp);
  EXPECT_TRUE(net.apply(timeline[1]));
  EXPECT_TRUE(stats_or_none(net.orchestrator().switch_client("tor0")).has_value()) << "back";
  ASSERT_EQ(timeline[2].kind, TimedFault::Kind::kHostCrash);
  EXPECT_FALSE(net.apply(timeline[2])) << "a host crash is the runner's";

  ScenarioResult result;
  const std::map<std::string, control::SwitchStats> stats = net.collect(result);
  EXPECT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats.at("tor0").name, "tor0");
}

}  // namespace
}  // namespace atp
