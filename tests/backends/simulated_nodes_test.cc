// Unit tests of the simulated runner's nodes (src/backends/simulated/nodes.h, nodes.cc): a
// switch's restarts, a noise source's schedule, a host's dispatch. Time is advanced by hand; a
// scripted network and fake endpoints (support/simulated_fakes.h) stand in for the in-process
// network and a protocol's.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../src/backends/simulated/nodes.h"
#include "../../src/backends/simulated/rounds.h"
#include "support/simulated_fakes.h"
#include "support/test_packets.h"

namespace atp::simulated {
namespace {

using namespace std::chrono_literals;
using atp::test::at;
using atp::test::FakeEndpoint;
using atp::test::packet_of;
using atp::test::RecordingPorts;
using atp::test::ScriptedNetwork;

// test_packets.h's job on one switch s0: workers w0, w1 on ports 0, 1, PS ps0 on port 2, h3 on 3.
// The network plan points into the topology: neither is copied.
struct OneSwitchJob {
  Topology topology;
  NetworkPlan network;
  JobPlan plan = test::plan_one_switch_job(SwitchConfig{}, topology, network);
};

// A switch node given the plan's routes, multicast group and job entry, as the runner installs
// them (simulated_scenario.cc's install_switches).
class SwitchNodeTest : public ::testing::Test {
 protected:
  static constexpr PortId kPsPort = 2, kNoisePort = 3;

  SwitchNodeTest() {
    const auto& routes = job.network.routes.at("s0");
    node.setup.routes.assign(routes.begin(), routes.end());
    const SwitchJobPlan& sw = job.plan.switches.at("s0");
    node.setup.jobs.push_back({multicast_group_address(1), sw.multicast_ports, sw.entry});
    node.setup.install(node.pipeline());
  }
  // Worker w's gradient of fragment `seq` (aggregator 0) arrives on its port w at `now`.
  void gradient(int w, Seq seq, std::int32_t value, Time now) {
    auto p = test::gradient_packet(job.plan.workers[static_cast<std::size_t>(w)], seq, 0, {value, value});
    node.on_packet(static_cast<PortId>(w), p, now, out);
  }
  // The PS's parameter packet of fragment `seq`, multicast to the job's workers.
  void parameter(Seq seq, Time now) {
    Header h;
    h.is_ack = true;
    h.job = 1;
    h.seq = seq;
    h.src = job.network.host_address.at("ps0");
    h.dst = multicast_group_address(1);
    auto p = build_packet(h, std::vector<std::int32_t>{3, 3});
    node.on_packet(kPsPort, p, now, out);
  }
  std::vector<PortId> ports_sent() const {
    std::vector<PortId> ports;
    for (const auto& [port, bytes] : out.sent) ports.push_back(port);
    return ports;
  }

  OneSwitchJob job;
  Activity activity;
  SwitchNode node{job.topology.switches.at(0).config, activity};
  RecordingPorts out;
};

// A dead process drops whatever arrives, and asks for no timer: not even when its pipeline holds
// an aggregator (reform() reaches a down switch's pipeline through pipeline()).
TEST_F(SwitchNodeTest, WhileDownItDropsEveryPacketAndAsksForNoTimer) {
  gradient(0, 0, 1, at(1us));
  ASSERT_NE(node.next_deadline(), kNever) << "an aggregator is held";
  node.restart(at(10us), 1ms);
  EXPECT_EQ(node.next_deadline(), kNever);
  gradient(0, 1, 1, at(20us));
  gradient(1, 1, 1, at(21us));
  parameter(1, at(22us));
  EXPECT_TRUE(out.sent.empty());
  EXPECT_EQ(node.pipeline().counters().packets, 0u);
  EXPECT_EQ(node.counters().packets, 1u) << "the one before the restart";
  node.setup.install(node.pipeline());
  auto p = test::gradient_packet(job.plan.workers[0], 5, 0, {1, 1});
  node.pipeline().process(0, p, at(30us), out);
  ASSERT_NE(node.pipeline().next_deadline(), kNever);
  EXPECT_EQ(node.next_deadline(), kNever);
}

// Back up, the switch has a fresh pipeline (the aggregator it held is gone) with the setup again:
// routes, the multicast group and the job.
TEST_F(SwitchNodeTest, ComingBackReinstallsTheSetupIntoAFreshPipeline) {
  gradient(0, 0, 100, at(1us));
  node.restart(at(10us), 1ms);
  node.come_back(at(10us) + 1ms);
  EXPECT_EQ(node.pipeline().table().in_use(), 0u) << "the aggregator held before the restart";
  gradient(1, 0, 2, at(2ms));
  EXPECT_TRUE(out.sent.empty()) << "the first of a fresh aggregator";
  gradient(0, 0, 3, at(3ms));
  parameter(0, at(4ms));
  EXPECT_EQ(ports_sent(), (std::vector<PortId>{kPsPort, 0, 1}));
}

// A second restart while down moves the end of the down time to its own end, never earlier: the
// first restart's come_back finds it still down.
TEST_F(SwitchNodeTest, ARestartWhileDownExtendsTheDownTime) {
  node.restart(at(0ms), 1ms);
  node.restart(at(500us), 1ms);
  node.come_back(at(1ms));
  gradient(0, 0, 1, at(1ms));
  EXPECT_EQ(node.counters().packets, 0u) << "down until 1.5 ms";
  node.restart(at(1ms), 100us);  // ends before 1.5 ms: changes nothing
  node.come_back(at(1100us));
  gradient(0, 0, 1, at(1100us));
  EXPECT_EQ(node.counters().packets, 0u);
  node.come_back(at(1500us));
  gradient(0, 0, 1, at(1500us));
  gradient(1, 0, 1, at(1500us));
  EXPECT_EQ(node.counters().packets, 2u);
  EXPECT_EQ(ports_sent(), std::vector<PortId>{kPsPort}) << "the job is installed";
}

// The switch's counters and its job's add up every pipeline of its life, those restarts threw
// away included; the running pipeline's alone count since the last restart. (A restart of no
// down time comes straight back, with its job: its packets are aggregated.)
TEST_F(SwitchNodeTest, CountersKeepWhatRestartsThrewAway) {
  gradient(0, 0, 1, at(1us));
  gradient(1, 0, 1, at(2us));
  node.restart(at(3us), 0ns);
  gradient(0, 1, 1, at(4us));
  node.restart(at(5us), 0ns);
  gradient(1, 2, 1, at(6us));
  EXPECT_EQ(node.pipeline().counters().packets, 1u);
  EXPECT_EQ(node.counters().packets, 4u);
  EXPECT_EQ(node.pipeline().job_counters(1).aggregations, 1u);
  EXPECT_EQ(node.job_counters(1).aggregations, 4u);
  EXPECT_EQ(node.job_counters(1).completions, 1u);
  EXPECT_EQ(node.job_counters(2).aggregations, 0u) << "a job never seen";
}

// noise_received: packets on a noise host's port that a running switch took in; not the jobs'
// own, not what a dead switch dropped.
TEST_F(SwitchNodeTest, NoiseReceivedCountsOnlyNoisePortsWhileUp) {
  node.noise_ports = {kNoisePort};
  std::vector<std::uint8_t> junk = {1, 2, 3};
  node.on_packet(kNoisePort, junk, at(1us), out);
  gradient(0, 0, 1, at(2us));
  EXPECT_EQ(node.noise_received, 1u);
  node.restart(at(3us), 1ms);
  node.on_packet(kNoisePort, junk, at(4us), out);
  EXPECT_EQ(node.noise_received, 1u);
  node.come_back(at(3us) + 1ms);
  node.on_packet(kNoisePort, junk, at(2ms), out);
  EXPECT_EQ(node.noise_received, 2u);
  EXPECT_EQ(node.counters().malformed, 2u);
}

class NoiseSenderTest : public ::testing::Test {
 protected:
  NoiseSender sender() {
    return NoiseSender(source, 42, targets, [this] {
      ++asked;
      return running;
    });
  }
  // The first `count` packets of a sender seeded 42, on a host's uplink (port 0).
  std::vector<std::pair<PortId, std::vector<std::uint8_t>>> expected(std::uint64_t count) const {
    std::vector<std::pair<PortId, std::vector<std::uint8_t>>> v;
    for (std::uint64_t n = 0; n < count; ++n) v.emplace_back(0, scenario_inputs::noise_packet(42, n, targets));
    return v;
  }

  NoiseSource source{"h3", 3, 1ms, std::nullopt};  // the sender keeps a reference: it outlives them
  scenario_inputs::NoiseTargets targets{{1}, {0x0A000001, 0x0A000002}, 4};
  bool running = true;
  int asked = 0;
  RecordingPorts ports;
  HostUplink out{ports};
};

// Packet n leaves at from + n / rate, rounded once: at 3 packets/s packet 3 is at exactly 1 s
// after `from`, where adding a rounded 1/3 s three times would give 999,999,999 ns. Each packet is
// noise_packet(seed, n), so the in-process and ns-3 backends send the same ones.
TEST_F(NoiseSenderTest, PacketNLeavesAtFromPlusNOverRateWithoutDrift) {
  NoiseSender s = sender();
  EXPECT_EQ(s.next_deadline(), at(1ms));
  EXPECT_FALSE(s.on_timeout(at(1ms) - 1ns, out));
  EXPECT_TRUE(s.on_timeout(at(1ms), out));
  EXPECT_EQ(s.next_deadline(), at(1ms) + 333'333'333ns);
  EXPECT_TRUE(s.on_timeout(at(1ms) + 1s, out));  // packets 1, 2 and 3
  EXPECT_EQ(s.sent(), 4u);
  EXPECT_EQ(s.next_deadline(), at(1ms) + 1s + 333'333'333ns);
  EXPECT_EQ(ports.sent, expected(4));
}

// No packet at or after `until`; then the source has no deadline.
TEST_F(NoiseSenderTest, StopsAtUntil) {
  source.rate_pps = 1000;
  source.until = 3ms;  // packets at 1 ms and 2 ms only
  NoiseSender s = sender();
  s.on_timeout(at(1s), out);
  EXPECT_EQ(s.sent(), 2u);
  EXPECT_EQ(s.next_deadline(), kNever);
  EXPECT_FALSE(s.on_timeout(at(2s), out));
  EXPECT_EQ(ports.sent, expected(2));
}

// Once no job runs the source stops for good, even if asked again later, so that it cannot keep a
// simulation alive on its own. It asks only when a packet is due.
TEST_F(NoiseSenderTest, StopsForGoodOnceNoJobRuns) {
  NoiseSender s = sender();
  s.on_timeout(at(1ms), out);
  EXPECT_EQ(asked, 1);
  running = false;
  EXPECT_FALSE(s.on_timeout(at(1ms) + 1s, out));
  EXPECT_EQ(s.next_deadline(), kNever);
  EXPECT_EQ(s.sent(), 1u);
  running = true;
  EXPECT_FALSE(s.on_timeout(at(10s), out));
  EXPECT_EQ(s.next_deadline(), kNever);
  EXPECT_EQ(ports.sent.size(), 1u);
  EXPECT_EQ(asked, 2);
}

class HostNodeTest : public ::testing::Test {
 protected:
  // A worker of job `id` here, with a fake endpoint. Its driver runs no round: it only hears
  // that the endpoint was called (after_endpoint_call returns at once), so its job is never read.
  FakeEndpoint& add_worker(JobId id) {
    auto endpoint = std::make_unique<FakeEndpoint>();
    FakeEndpoint& e = *endpoint;
    drivers.push_back(std::make_unique<RoundDriver>(runtime, 0, host, 0));
    host.workers.emplace(id, HostNode::LocalWorker{std::move(endpoint), drivers.back().get()});
    return e;
  }
  void receive(std::vector<std::uint8_t> packet, Time now) { host.on_packet(0, packet, now, out); }

  Activity activity;
  HostNode host{"h0", activity};
  JobRuntime runtime;
  std::vector<std::unique_ptr<RoundDriver>> drivers;
  RecordingPorts out;
};

// Parameters and Rina's packets go to the job's worker, gradients to its PS (a worker's, planned
// for it); what does not decode, or is for a job with no endpoint of that kind here, is counted
// and dropped. Each is activity: the run's end is the latest time any node acted.
TEST_F(HostNodeTest, HandsPacketsToTheirEndpointsAndDropsTheRest) {
  FakeEndpoint& worker = add_worker(1);
  const OneSwitchJob job;
  host.ps.emplace(1, PsEndpoint(job.plan.ps[0]));
  receive({1, 2, 3}, at(1us));
  receive(packet_of(2, true), at(2us));   // no worker of job 2
  receive(packet_of(2, false), at(3us));  // a gradient: no PS of job 2
  EXPECT_EQ(host.dropped, 3u);
  EXPECT_EQ(worker.packets, 0);
  receive(packet_of(1, true), at(4us));
  Header rina;
  rina.job = 1;
  rina.rina = RinaKind::kContribution;
  receive(build_packet(rina, std::vector<std::int32_t>{1}), at(5us));
  EXPECT_EQ(worker.packets, 2);
  receive(test::gradient_packet(job.plan.workers[0], 0, 0, {1, 2, 3, 4}), at(6us));
  EXPECT_EQ(host.ps.at(1).stats().packets_received, 1u);
  EXPECT_EQ(host.dropped, 3u);
  receive({1}, at(2us));  // late news of an earlier time: the end stays the latest
  EXPECT_EQ(activity.last, at(6us));
}

// A timer calls only the endpoints that are due. It is activity only when something acted: a
// noise source that finds no job running and stops does not stretch the run's end.
TEST_F(HostNodeTest, TimesOutOnlyWhatIsDueAndCountsOnlyWhatActed) {
  FakeEndpoint& worker = add_worker(1);
  worker.deadline = at(5ms);
  const NoiseSource source{"h0", 1000, 1ms, std::nullopt};
  host.noise.emplace_back(source, 1, scenario_inputs::NoiseTargets{}, [] { return false; });
  EXPECT_EQ(host.next_deadline(), at(1ms));
  host.on_timeout(at(1ms), out);
  EXPECT_TRUE(out.sent.empty());
  EXPECT_EQ(worker.timeouts, 0);
  EXPECT_EQ(activity.last, Time{});
  EXPECT_EQ(host.next_deadline(), at(5ms)) << "the noise source stopped";
  host.on_timeout(at(5ms), out);
  EXPECT_EQ(worker.timeouts, 1);
  EXPECT_EQ(activity.last, at(5ms));
}

// A full NIC queue slows every worker on the host. A crashed host ignores packets, timers and its
// queue, asks for no timer, and its crash hooks run once, scheduled at the crash's time.
TEST_F(HostNodeTest, ACrashedHostIgnoresEverythingAndRunsItsHooksOnce) {
  FakeEndpoint& a = add_worker(1);
  FakeEndpoint& b = add_worker(2);
  a.deadline = at(5ms);
  host.on_egress_full(at(1ms));
  EXPECT_EQ(a.queue_full, 1);
  EXPECT_EQ(b.queue_full, 1);
  ScriptedNetwork network;
  std::vector<Time> hooks;
  host.on_crash.push_back([&hooks](Time t) { hooks.push_back(t); });
  crash_host(host, at(2ms), network, 7);
  crash_host(host, at(3ms), network, 7);
  EXPECT_TRUE(host.crashed);
  EXPECT_EQ(host.crash_time, at(2ms));
  EXPECT_EQ(network.woken, std::vector<NodeId>{7}) << "the network re-reads its deadline";
  network.run_until(at(10ms));
  EXPECT_EQ(hooks, std::vector<Time>{at(2ms)});
  EXPECT_EQ(host.next_deadline(), kNever);
  receive(packet_of(1, true), at(4ms));
  receive({1, 2, 3}, at(4ms));
  host.on_timeout(at(5ms), out);
  host.on_egress_full(at(6ms));
  EXPECT_EQ(a.packets, 0);
  EXPECT_EQ(a.timeouts, 0);
  EXPECT_EQ(a.queue_full, 1);
  EXPECT_EQ(host.dropped, 0u);
  EXPECT_EQ(activity.last, Time{});
}

}  // namespace
}  // namespace atp::simulated
