// Tests of the process backends' placement (src/backends/processes/placement.h): the settings a
// link direction has at a time, and where loopback's processes bind and send.
#include "../../src/backends/processes/placement.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "../../src/backends/processes/worker_process.h"
#include "atp/cluster/daemon_processes.h"
#include "atp/scenario/scenario.h"

namespace atp {
namespace {

using namespace std::chrono_literals;

const char* const kScenario = R"(
link: {delay_us: 3, rate_gbps: 10, buffer_packets: 256}
topology:
  switches: [{name: t0}]
  hosts: [{name: h0, switch: t0}, {name: h1, switch: t0}, {name: n, switch: t0}]
jobs:
  - {name: j, workers: [h0], ps: [h1], elements: 100, rounds: 1}
faults:
  - {link: [h0, t0], one_way: true, loss: 0.25, delay_us: 7, from_us: 100, until_us: 200}
  - {noise: n, rate_pps: 1000}
)";

// Real processes have their own latency: the file's delay is not added, a fault's is, and only in
// its window and its direction.
TEST(DirectionSettings, TheDefaultsThenTheFaultsActiveThen) {
  const Scenario s = parse_scenario_yaml(kScenario);
  const EgressConfig before = direction_settings(s, "h0", "t0", 50us);
  EXPECT_EQ(before.rate_gbps, 10);
  EXPECT_EQ(before.delay, Duration::zero());
  EXPECT_EQ(before.loss, 0);
  const EgressConfig during = direction_settings(s, "h0", "t0", 150us);
  EXPECT_EQ(during.loss, 0.25);
  EXPECT_EQ(during.delay, Duration(7us));
  EXPECT_EQ(direction_settings(s, "t0", "h0", 150us).loss, 0) << "one_way: the other direction is untouched";
  EXPECT_EQ(direction_settings(s, "h0", "t0", 200us).loss, 0) << "until_us is the first time without it";
}

// Loopback: every node a distinct UDP port on 127.0.0.1; a host sends to its switch's, and a noise
// host's socket is held by the runner, which sends its packets.
TEST(LoopbackPlacement, EachNodeHasItsOwnPortAndHostsSendToTheirSwitch) {
  const Scenario s = parse_scenario_yaml(kScenario);
  const std::unique_ptr<Placement> p = loopback_placement();
  EXPECT_EQ(p->backend(), "loopback");
  p->prepare(s, NetworkPlan{});
  EXPECT_EQ(p->namespace_of("h0"), "");
  const SocketAddress tor = *p->switch_listen("t0");
  EXPECT_EQ(tor.ip, SocketAddress::loopback(0).ip);
  worker_process::WorkerSpec spec;
  p->place_worker("h0", spec);
  EXPECT_EQ(spec.uplink, tor);
  EXPECT_EQ(p->port_endpoint(0, "h0").peer, spec.local) << "the switch's port names the host's socket";
  EXPECT_EQ(p->ps_options("h1").uplink, tor);
  const std::set<std::string> ports{tor.to_string(), spec.local.to_string(), p->ps_options("h1").listen.to_string(),
                                    p->noise_socket("n")->local_endpoint().to_string()};
  EXPECT_EQ(ports.size(), 4u) << "one port per node";
  EXPECT_EQ(p->noise_destination("n"), tor);
  EXPECT_EQ(p->noise_socket("h0"), nullptr) << "only noise hosts keep a socket";
  const std::vector<SocketAddress> ranks = p->tcp_ranks({"h0", "h1"});
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_NE(ranks[0], ranks[1]);
}

}  // namespace
}  // namespace atp
