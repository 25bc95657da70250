// Unit tests of the simulated runner's nodes and round drivers (src/backends/simulated/nodes.h,
// rounds.h): a switch's restarts, a noise source's schedule, a host's dispatch, a worker's rounds.
// Time is advanced by hand. A scripted network stands in for the in-process one (it runs what the
// nodes schedule, when the test says), and a fake endpoint for a protocol's: a driver's rounds are
// then seen one call at a time, without planning and running a whole scenario.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../src/backends/simulated/nodes.h"
#include "../../src/backends/simulated/rounds.h"
#include "atp/fixed_point.h"
#include "support/test_packets.h"

namespace atp::simulated {
namespace {

using namespace std::chrono_literals;

Time at(Duration d) { return Time(d); }

// What a node sent, by port.
class RecordingPorts final : public PortSink {
 public:
  void send(PortId port, std::span<const std::uint8_t> packet) override {
    sent.push_back({port, std::vector<std::uint8_t>(packet.begin(), packet.end())});
  }
  std::vector<std::pair<PortId, std::vector<std::uint8_t>>> sent;
};

// A network that moves no packets: it keeps what is scheduled (run by run_until, in time order,
// ties in the order scheduled), the nodes woken, and what is sent through sink_for.
class ScriptedNetwork final : public sim::Network {
 public:
  NodeId add_switch(std::string, std::unique_ptr<sim::Node>, std::map<Address, PortId>) override { return 0; }
  NodeId add_host(std::string, std::unique_ptr<sim::Node>, Address) override { return 0; }
  std::pair<std::size_t, std::size_t> connect(NodeId, PortId, NodeId, PortId, const sim::ChannelConfig&,
                                              const sim::ChannelConfig&) override {
    return {};
  }
  void set_channel_config(std::size_t, const sim::ChannelConfig&) override {}
  sim::ChannelCounters channel_counters(std::size_t) const override { return {}; }
  void schedule(Time t, std::function<void(Time)> f) override { events.emplace(std::max(t, now_), std::move(f)); }
  void wake(NodeId node) override { woken.push_back(node); }
  PortSink& sink_for(NodeId) override { return sent; }
  Time now() const override { return now_; }
  std::uint64_t run_until(Time limit) override {
    std::uint64_t n = 0;
    while (!events.empty() && events.begin()->first <= limit) {
      auto event = events.extract(events.begin());
      now_ = event.key();
      event.mapped()(now_);
      ++n;
    }
    now_ = std::max(now_, limit);
    return n;
  }
  std::uint64_t events_processed() const override { return 0; }
  std::uint32_t mtu_bytes() const override { return 0; }

  std::multimap<Time, std::function<void(Time)>> events;
  std::vector<NodeId> woken;
  RecordingPorts sent;

 private:
  Time now_{};
};

// An endpoint the test steers: start() records the input and succeeds unless `busy`; a packet
// ends the round (kIdle with `result_values`), or fails it when `error_text` is set.
class FakeEndpoint final : public Endpoint {
 public:
  bool start(std::span<const float> input, Time, PacketSink&) override {
    if (busy) return false;
    starts.emplace_back(input.begin(), input.end());
    state_ = WorkerState::kRunning;
    return true;
  }
  bool start_in_place(std::span<float> values, Time now, PacketSink& out) override { return start(values, now, out); }
  void on_packet(std::span<const std::uint8_t>, Time, PacketSink&) override { ADD_FAILURE() << "undecoded packet"; }
  void on_packet(const Header&, std::span<const std::uint8_t>, Time, PacketSink&) override {
    ++packets;
    state_ = error_text.empty() ? WorkerState::kIdle : WorkerState::kFailed;
  }
  void on_timeout(Time, PacketSink&) override { ++timeouts; }
  void on_host_queue_full(Time) override { ++queue_full; }
  Time next_deadline() const override { return deadline; }
  WorkerState state() const override { return state_; }
  const std::string& error() const override { return error_text; }
  std::span<const float> result() const override { return result_values; }
  bool picks_exponents() const override { return false; }
  const std::vector<std::int16_t>& result_exponents() const override { return no_exponents_; }
  std::vector<std::int16_t> next_exponents(std::uint32_t) const override { return {}; }
  const std::vector<std::uint32_t>& float_fragments() const override { return no_fragments_; }
  std::string_view protocol() const override { return "fake"; }
  JobId job() const override { return 1; }
  Address self() const override { return 0; }
  std::vector<Address> sources() const override { return {}; }
  std::uint16_t values_per_packet() const override { return 4; }
  Seq resume_seq() const override { return 0; }
  Linger linger() const override { return {}; }
  std::uint32_t window() const override { return 1; }
  EndpointCounts counts() const override { return counts_value; }
  std::vector<EndpointCounter> counters() const override { return {}; }

  bool busy = false;
  std::vector<std::vector<float>> starts;
  std::vector<float> result_values;
  Time deadline = kNever;
  int packets = 0, timeouts = 0, queue_full = 0;
  std::string error_text;
  EndpointCounts counts_value;

 private:
  WorkerState state_ = WorkerState::kIdle;
  std::vector<std::int16_t> no_exponents_;
  std::vector<std::uint32_t> no_fragments_;
};

// A parameter packet of job `job` (what a worker hears), or a gradient (what a PS hears).
std::vector<std::uint8_t> packet_of(JobId job, bool parameter) {
  Header h;
  h.job = job;
  h.is_ack = parameter;
  h.fan_in = 1;
  h.bitmap = 1;
  return build_packet(h, std::vector<std::int32_t>{1, 2, 3, 4});
}

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

// Job 1 of two workers, on hosts h0 and h1 (nodes 10, 11) with fake endpoints: 2 rounds of 10
// values, 4 per fragment, 1 ms of compute between them. A JobRuntime built by hand, as the runner
// builds one (add_endpoints), without a plan: a driver reads only the job, seed, fragment width
// and network.
class RoundDriverTest : public ::testing::Test {
 protected:
  static constexpr JobId kJob = 1;
  static constexpr std::uint64_t kSeed = 5;
  static constexpr std::uint16_t kWidth = 4;

  RoundDriverTest() {
    job.spec.id = kJob;
    job.spec.workers = {"h0", "h1"};
    job.elements = 10;
    job.rounds = 2;
    job.magnitude = 2;
    job.compute_time = 1ms;
    jobs.push_back(std::make_unique<JobRuntime>());
    rt().job = &job;
    rt().network = &network;
    rt().seed = kSeed;
    rt().values_per_packet = kWidth;
    for (std::size_t w = 0; w < 2; ++w) {
      rt().drivers.push_back(std::make_unique<RoundDriver>(rt(), w, *hosts[w], static_cast<NodeId>(10 + w)));
      auto endpoint = std::make_unique<FakeEndpoint>();
      endpoints[w] = endpoint.get();
      hosts[w]->workers.emplace(kJob, HostNode::LocalWorker{std::move(endpoint), rt().drivers.back().get()});
    }
  }
  JobRuntime& rt() { return *jobs[0]; }
  RoundDriver& driver(std::size_t w) { return *rt().drivers[w]; }
  // Worker w's input in `round`: its own seeded stream.
  std::vector<float> input(std::size_t w, std::uint32_t round) const {
    std::vector<float> v(job.elements);
    scenario_inputs::generate_input(scenario_inputs::input_seed(kSeed, kJob, w, round), job.magnitude, v);
    return v;
  }
  // The sums of `round` as an ATP job's PS sends them: int sums at each fragment's exponent.
  std::vector<float> exact(std::uint32_t round) const {
    scenario_inputs::RoundReference ref;
    scenario_inputs::make_reference(kSeed, kJob, 2, round, job.elements, job.magnitude, job.spec.scale, kWidth, ref);
    std::vector<float> sums(job.elements);
    for (std::size_t i = 0; i < sums.size(); ++i)
      sums[i] = dequantize_one(ref.int_sum[i], std::ldexp(1.0, ref.exponents[i / kWidth]));
    return sums;
  }
  // Worker w's round ends at `now` with `result`: a packet to its host completes it.
  void finish(std::size_t w, std::vector<float> result, Time now) {
    endpoints[w]->result_values = std::move(result);
    std::vector<std::uint8_t> packet = packet_of(kJob, true);
    hosts[w]->on_packet(0, packet, now, network.sent);
  }

  ScenarioJob job;
  ScriptedNetwork network;
  Activity activity;
  std::unique_ptr<HostNode> hosts[2] = {std::make_unique<HostNode>("h0", activity),
                                        std::make_unique<HostNode>("h1", activity)};
  std::vector<std::unique_ptr<JobRuntime>> jobs;
  FakeEndpoint* endpoints[2] = {};
};

// A scheduled start begins the round at its time with the worker's own seeded input, and wakes
// its host (the network re-reads the endpoint's deadline). Exact results complete the round; the
// next starts the compute time after the worker's end; a round's reference goes once every worker
// has checked against it; after the last round nothing is scheduled and no job runs.
TEST_F(RoundDriverTest, RunsItsRoundsOneAfterAnotherOnItsSeededInputs) {
  driver(0).schedule_start(at(1ms));
  driver(1).schedule_start(at(1ms));
  network.run_until(at(1ms) - 1ns);
  EXPECT_TRUE(endpoints[0]->starts.empty());
  network.run_until(at(1ms));
  EXPECT_EQ(endpoints[1]->starts, std::vector<std::vector<float>>{input(1, 0)});
  EXPECT_NE(input(1, 0), input(0, 0));
  EXPECT_TRUE(driver(1).running);
  EXPECT_EQ(network.woken, (std::vector<NodeId>{10, 11}));
  finish(0, exact(0), at(2ms));
  EXPECT_EQ(driver(0).rounds_completed, 1u);
  EXPECT_FALSE(driver(0).running);
  EXPECT_EQ(rt().references.size(), 1u) << "worker 1 has yet to check round 0";
  finish(1, exact(0), at(3ms));
  EXPECT_TRUE(rt().references.empty());
  network.run_until(at(3ms) - 1ns);
  EXPECT_EQ(endpoints[0]->starts.size(), 1u);
  network.run_until(at(4ms));
  ASSERT_EQ(endpoints[0]->starts.size(), 2u);
  EXPECT_EQ(endpoints[0]->starts[1], input(0, 1));
  ASSERT_EQ(endpoints[1]->starts.size(), 2u);
  EXPECT_TRUE(any_job_running(jobs));
  finish(0, exact(1), at(5ms));
  finish(1, exact(1), at(6ms));
  for (std::size_t w = 0; w < 2; ++w) {
    EXPECT_EQ(driver(w).rounds_completed, 2u);
    EXPECT_EQ(driver(w).error, "");
    EXPECT_FALSE(driver(w).mismatch);
  }
  EXPECT_TRUE(network.events.empty());
  EXPECT_FALSE(any_job_running(jobs));
}

// One wrong value is a mismatch whose sentence names the worker and the round; the round still
// counts as completed (the run goes on, and reports it), and the other worker is not affected.
TEST_F(RoundDriverTest, AWrongValueIsAMismatchNamingTheWorkerAndRound) {
  driver(0).start_round(at(0ms));
  driver(1).start_round(at(0ms));
  std::vector<float> wrong = exact(0);
  wrong[6] += 1;
  finish(0, wrong, at(1ms));
  finish(1, exact(0), at(1ms));
  EXPECT_TRUE(driver(0).mismatch);
  EXPECT_EQ(driver(0).wrong_values, 1u);
  EXPECT_EQ(driver(0).error.rfind("worker 'h0' round 0: value 6 ", 0), 0u) << driver(0).error;
  EXPECT_EQ(driver(0).rounds_completed, 1u);
  EXPECT_FALSE(driver(1).mismatch) << driver(1).error;
}

// A failed endpoint stops its driver for good with the endpoint's sentence; so does an endpoint
// that will not start; a second reason does not replace the first.
TEST_F(RoundDriverTest, AFailedOrBusyEndpointStopsItsDriverWithOneSentence) {
  driver(0).start_round(at(0ms));
  endpoints[0]->error_text = "no progress for 1 s";
  finish(0, {}, at(1ms));
  EXPECT_TRUE(driver(0).stopped);
  EXPECT_FALSE(driver(0).running);
  EXPECT_EQ(driver(0).error, "worker 'h0' failed in round 0: no progress for 1 s");
  EXPECT_EQ(driver(0).rounds_completed, 0u);
  EXPECT_TRUE(network.events.empty());
  endpoints[1]->busy = true;
  driver(1).start_round(at(2ms));
  EXPECT_TRUE(driver(1).stopped);
  EXPECT_EQ(driver(1).error, "worker 'h1' could not start round 0 (still busy)");
  driver(1).fail("a later reason");
  EXPECT_EQ(driver(1).error, "worker 'h1' could not start round 0 (still busy)");
  EXPECT_FALSE(any_job_running(jobs));
}

// A restart (a Rina job re-formed) begins the given round at once, and the start the driver had
// scheduled before is void.
TEST_F(RoundDriverTest, ARestartVoidsTheStartScheduledBefore) {
  driver(0).start_round(at(0ms));
  finish(0, exact(0), at(1ms));  // round 1 scheduled at 2 ms
  driver(0).restart(0, at(1500us));
  ASSERT_EQ(endpoints[0]->starts.size(), 2u);
  EXPECT_EQ(endpoints[0]->starts[1], input(0, 0));
  EXPECT_EQ(driver(0).rounds_completed, 0u);
  network.run_until(at(10ms));
  EXPECT_EQ(endpoints[0]->starts.size(), 2u);
}

// A job re-formed gives its workers new endpoints: a worker's counts over the run are still those
// of every endpoint it had (the report and the series add them; the series' goodput went below
// zero when they restarted from the new endpoint's).
TEST_F(RoundDriverTest, ReplacedEndpointsCountsStayTheWorkers) {
  endpoints[0]->counts_value.retransmissions = 3;
  endpoints[0]->counts_value.result_values = 40;
  auto next = std::make_unique<FakeEndpoint>();
  next->counts_value.retransmissions = 2;
  FakeEndpoint* fresh = next.get();
  driver(0).replace_endpoint(std::move(next));
  EXPECT_EQ(&driver(0).endpoint(), fresh);
  EXPECT_EQ(driver(0).counts().retransmissions, 5u);
  EXPECT_EQ(driver(0).counts().result_values, 40u);
  EXPECT_EQ(driver(1).counts().retransmissions, 0u);
}

// A host set to crash at a round crashes when its worker would start it: the driver stops, the
// round does not start, and the crash's hooks run; the other worker still runs.
TEST_F(RoundDriverTest, ACrashRoundCrashesTheHostInsteadOfStartingIt) {
  hosts[0]->crash_round = 1;
  bool hook_ran = false;
  hosts[0]->on_crash.push_back([&hook_ran](Time) { hook_ran = true; });
  driver(0).start_round(at(0ms));
  driver(1).start_round(at(0ms));
  finish(0, exact(0), at(1ms));
  network.run_until(at(2ms));
  EXPECT_TRUE(hosts[0]->crashed);
  EXPECT_EQ(hosts[0]->crash_time, at(2ms));
  EXPECT_TRUE(driver(0).stopped);
  EXPECT_EQ(endpoints[0]->starts.size(), 1u);
  EXPECT_TRUE(hook_ran);
  EXPECT_TRUE(any_job_running(jobs)) << "worker 1 has rounds left";
}

}  // namespace
}  // namespace atp::simulated
