// Integration tests of the netns backend: a small multi-rack testbed (2 racks of 2 workers, a
// core switch, the PS under the core) built from network namespaces and veth links, with `atp
// switch` on the namespaces' interfaces. Checks exact results with two-level aggregation, a TCP
// connection forwarded transparently through the same switches, and that nothing (namespace,
// veth, process) is left behind. Needs root: skipped with a message otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../../src/backends/processes/testbed.h"
#include "atp/backends/discover.h"
#include "atp/backends/processes.h"
#include "atp/backends/simulated.h"
#include "atp/io/processes.h"
#include "atp/scenario/scenario.h"
#include "support/with_binary.h"

namespace atp {
namespace {

using test::with_binary;

constexpr const char* kTwoRacks = R"(
seed: 4
link: {rate_mbps: %RATE%}
topology:
  switches:
    - {name: tor0, aggregators: 4096}
    - {name: tor1, aggregators: 4096}
    - {name: core, aggregators: 4096}
  hosts:
    - {name: w0, switch: tor0}
    - {name: w1, switch: tor0}
    - {name: w2, switch: tor1}
    - {name: w3, switch: tor1}
    - {name: ps, switch: core}
    - {name: x, switch: tor1}
  links: [[tor0, core], [tor1, core]]
)";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

Scenario two_racks(const std::string& rest, int rate_mbps = 1000) {
  return parse_scenario_yaml(replace_all(kTwoRacks, "%RATE%", std::to_string(rate_mbps)) + rest, "test");
}

// Interfaces of this process's own namespace: a run must not add (or leave) any.
std::string own_links() {
  std::string out;
  processes::run_command({"ip", "-o", "link", "show"}, "", &out);
  // Drop per-run counters that change on their own; keep names and flags.
  std::string names;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end - at);
    names += line.substr(0, line.find(" mtu ")) + "\n";
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return names;
}

// Processes whose parent is this test process (the runner's children are reaped by it).
std::vector<std::string> own_children() {
  std::string out;
  processes::run_command({"pgrep", "-P", std::to_string(::getpid())}, "", &out);
  std::vector<std::string> pids;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t end = out.find('\n', at);
    if (end > at) pids.push_back(out.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return pids;
}

class NetnsIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = netns::unavailable_reason(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
    links_before_ = own_links();
  }
  // Every test: nothing of the run is left, whatever it did.
  void TearDown() override {
    if (IsSkipped()) return;
    const std::string prefix = "atp" + std::to_string(::getpid()) + "-";
    EXPECT_TRUE(netns::namespaces_with_prefix(prefix).empty()) << "namespaces left behind";
    EXPECT_EQ(own_links(), links_before_) << "interfaces appeared in the test's own namespace";
    EXPECT_TRUE(own_children().empty()) << "processes left behind";
  }
  std::string links_before_;
};

TEST_F(NetnsIntegration, TwoRacksTwoLevelAggregationIsExact) {
  // linear indices: in-flight fragments get distinct aggregators, so every fragment is
  // aggregated completely in the switches and the PS gets exactly one packet per fragment.
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: a, workers: [w0, w1, w2, w3], ps: [ps], elements: 100000, rounds: 3, values_per_packet: 1024,
     index: linear, rto_us: 20000}
)"),
                                     with_binary());
  ASSERT_EQ(r.jobs.size(), 1u);
  const JobResult& j = r.jobs[0];
  EXPECT_EQ(r.backend, "netns");
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_EQ(j.completed_rounds, 3u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  // Level 0 at both ToRs, level 1 at the core: every worker packet was absorbed by a switch
  // unless it was a retransmission that went around them.
  EXPECT_GT(j.switch_aggregations.at("tor0"), 0u);
  EXPECT_GT(j.switch_aggregations.at("tor1"), 0u);
  EXPECT_GT(j.switch_aggregations.at("core"), 0u);
  EXPECT_GT(j.in_network_share, 0.5) << to_summary(r);
  EXPECT_GT(j.algbw_gbps, 0.0);
}

// PLink's probes across the switches (docs/plink.md): the round trips order the hosts as the
// racks do, the groups are the racks, and a plink job grouped by probes (its ranks interleaved
// over the racks) follows them and is correct.
TEST_F(NetnsIntegration, ProbesFindTheRacksAndAPlinkJobFollowsThem) {
  const Scenario s = two_racks(R"(
jobs:
  - {name: p, algorithm: plink, grouping: probe, workers: [w0, w2, w1, w3], elements: 100000, rounds: 2}
)",
                               200);
  DiscoverOptions o;
  o.hosts = {"w0", "w1", "w2", "w3"};
  o.transfer_bytes = 256 << 10;
  o.run = with_binary();
  const Discovery d = discover(netns_backend(), s, o);
  EXPECT_EQ(d.latency.triplets, 8u);  // per host: its rack-mate against the 2 others
  EXPECT_GE(d.latency.agreeing, 7u);
  EXPECT_EQ(d.groups.group[0], d.groups.group[1]);
  EXPECT_EQ(d.groups.group[2], d.groups.group[3]);
  EXPECT_NE(d.groups.group[0], d.groups.group[2]);
  const Scenario probed = with_probed_groups(netns_backend(), s, o);
  RankGroups groups = probed.jobs[0].probed_groups;
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  EXPECT_EQ(groups, (RankGroups{{0, 2}, {1, 3}}));
  const ScenarioResult r = run_netns(probed, with_binary());
  EXPECT_TRUE(r.jobs[0].correct) << to_summary(r);
}

// PLink's Autotune between real processes: the runner reads every worker's connections (TCP_INFO)
// after each round and, when w0's link drops to a fifth and the rounds slow down, sends a new plan
// with the next "go"; the workers install it between rounds and every sum stays right.
TEST_F(NetnsIntegration, AutotuneReplansWhenALinkSlowsAndStaysCorrect) {
  const ScenarioResult r = run_netns(two_racks(R"(
faults:
  - {link: [w0, tor0], rate_gbps: 0.04, from_us: 600000}
jobs:
  - {name: fa, algorithm: plink_fa, autotune: true, workers: [w0, w1, w2, w3], elements: 262144, rounds: 24}
)",
                                               200),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_EQ(j.completed_rounds, 24u);
  EXPECT_GE(j.replans, 1u) << to_summary(r);
}

TEST_F(NetnsIntegration, LossDuplicationAndReorderingOnLinksKeepResultsExact) {
  // Both directions of two workers' links and of a switch link lose, duplicate and reorder:
  // lost parameter packets are recovered by resends the PS answers by unicast, lost gradients
  // by retransmission; every worker checks its results exactly.
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: a, workers: [w0, w1, w2, w3], ps: [ps], elements: 50000, rounds: 3, values_per_packet: 256,
     rto_us: 20000}
faults:
  - {link: [w0, tor0], loss: 0.02, duplicate: 0.01, reorder: 0.02}
  - {link: [w3, tor1], loss: 0.02, duplicate: 0.01, reorder: 0.02}
  - {link: [tor0, core], loss: 0.01}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  std::uint64_t lost = 0;
  for (const LinkResult& l : r.links) lost += l.lost;
  EXPECT_GT(lost, 0u) << "the faults did not apply: " << to_summary(r);
  EXPECT_GT(j.retransmissions, 0u);
}

// Rina on the Ethernet switches: each rack one member of the ring (its ToR adds its workers'
// values and multicasts finals to them by IP), ranks interleaved over the racks, with loss on a
// worker's link and the core's; every worker checks its sums exactly.
TEST_F(NetnsIntegration, RinaRacksAsRingMembersAreExactUnderLoss) {
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: r, algorithm: rina, workers: [w0, w2, w1, w3, x], elements: 100000, rounds: 3}
faults:
  - {link: [w0, tor0], loss: 0.03}
  - {link: [tor1, core], loss: 0.01}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_EQ(j.completed_rounds, 3u);
  EXPECT_EQ(j.wrong_values, 0u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  EXPECT_GT(j.switch_aggregations.at("tor0"), 0u);
  EXPECT_GT(j.switch_aggregations.at("tor1"), 0u);
  EXPECT_EQ(j.switch_aggregations.at("core"), 0u) << "the core joins no rack";
  EXPECT_GT(j.retransmissions, 0u) << "nothing was resent: the loss was not applied";
}

// Nothing lost, nothing asked for: each rack's switch hands its workers the finals it completes.
// Regression: it sent them from the address of the worker whose contribution completed them,
// which that worker's kernel dropped (a martian source), so every worker asked for about a half
// of its rack's finals here (racks of two) at the end of every round.
TEST_F(NetnsIntegration, RinaWorkersGetTheirRacksFinalsWithoutAsking) {
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: r, algorithm: rina, workers: [w0, w2, w1, w3], elements: 100000, rounds: 3}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  // The switch's fault made 129-135 asks here; a worker held up by a busy machine may ask for a few.
  EXPECT_LT(j.final_requests, 32u) << to_summary(r);
}

// Rina's failures on real processes (docs/rina.md "Failures"): tor1's agent (w2) crashes before
// round 1, and tor0's second worker (w1) before round 2, which leaves w0 alone in its rack. The
// runner re-forms the ring each time (tor1 stays one member of two workers, w0 becomes one of its
// own), and every round from then on is the others' exact sum, checked by each of them.
TEST_F(NetnsIntegration, RinaGoesOnWithoutCrashedWorkers) {
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: r, algorithm: rina, workers: [w0, w1, w2, w3, x], elements: 50000, rounds: 4}
faults:
  - {crash: w2, at_round: 1}
  - {crash: w1, at_round: 2}
  - {link: [w0, tor0], loss: 0.02}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_EQ(j.completed_rounds, 4u);
  EXPECT_EQ(j.wrong_values, 0u);
  ASSERT_EQ(j.excluded_workers.size(), 2u) << to_summary(r);
  EXPECT_EQ(j.excluded_workers[0].host, "w2");
  EXPECT_LE(j.excluded_workers[0].from_round, 1u);
  EXPECT_EQ(j.excluded_workers[1].host, "w1");
  EXPECT_LE(j.excluded_workers[1].from_round, 2u);
  EXPECT_GE(j.excluded_workers[1].from_round, j.excluded_workers[0].from_round);
  EXPECT_GT(j.switch_aggregations.at("tor1"), 0u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
}

TEST_F(NetnsIntegration, BadPacketsFromAHostAreAllRejectedAndHarmless) {
  // x sends garbage, spoofed and unknown-job packets to the ATP port: every one must be counted
  // by a switch (the unparseable ones as malformed frames) and the job must stay exact.
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: a, workers: [w0, w1, w2, w3], ps: [ps], elements: 50000, rounds: 3, values_per_packet: 256,
     rto_us: 20000}
faults:
  - {noise: x, rate_pps: 2000}
)"),
                                     with_binary());
  EXPECT_TRUE(r.jobs.at(0).correct) << to_summary(r);
  EXPECT_GT(r.noise_packets, 0u);
  EXPECT_EQ(r.rejected_packets, r.noise_packets) << to_summary(r);
}

// An ATP job beside a CUBIC flow into one of its workers, every setting at its default (issue 19,
// experiments/netns/tcp-share): the job finishes exact and neither starves while they overlap.
// Measured 0.48-0.49 of the link for each (tcp-share, since the switch ports mark and drop at 20
// packets); the bounds here, 0.3, leave room for a busy machine (passed 3 of 3 beside a core kept
// busy); the issue's 0.4 is a benchmark's goal, not this test's. (Before the queue defaults the
// test held 0.2: the job got 0.24 beside Reno.)
TEST_F(NetnsIntegration, AnAtpJobBesideATcpFlowFinishesAndNeitherStarves) {
  const ScenarioResult r = run_netns(two_racks(R"(
background: [{from: x, to: w3, from_us: 500000, until_us: 2500000}]
jobs:
  - {name: a, workers: [w2, w3], ps: [ps], elements: 262144, rounds: 40}
)",
                                               200),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  ASSERT_TRUE(j.correct) << to_summary(r);
  ASSERT_EQ(r.flows.size(), 1u);
  const FlowResult& f = r.flows[0];
  // The flow's samples from its second 100 ms on (slow start done), while the job still runs.
  std::vector<double> tcp;
  for (std::size_t i = 1; i < f.goodput_mbps.size() && f.start_seconds + (i + 1) * f.interval_s < j.seconds; ++i)
    tcp.push_back(f.goodput_mbps[i]);
  ASSERT_GE(tcp.size(), 3u) << to_summary(r);
  std::sort(tcp.begin(), tcp.end());
  EXPECT_GT(tcp[tcp.size() / 2], 0.3 * 200) << to_summary(r);
  // The job's rounds that ended while the flow ran: tensor bytes per round at 0.3 of the link or more.
  std::vector<double> atp;
  for (std::size_t k = 1; k < j.round_end_seconds.size(); ++k) {
    const double end = j.round_end_seconds[k], took = end - j.round_end_seconds[k - 1];
    if (end > f.start_seconds + 0.2 && end < f.start_seconds + 2.0) atp.push_back(j.tensor_bytes * 8 / took / 1e6);
  }
  ASSERT_GE(atp.size(), 3u) << to_summary(r);
  std::sort(atp.begin(), atp.end());
  EXPECT_GT(atp[atp.size() / 2], 0.3 * 200) << to_summary(r);
}

TEST_F(NetnsIntegration, PsBaselineOnTheSameSwitchesIsExactAndAggregatesNothing) {
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: p, algorithm: ps, workers: [w0, w1, w2, w3], ps: [ps], elements: 50000, rounds: 2,
     values_per_packet: 1024, rto_us: 20000}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  for (const auto& [name, count] : j.switch_aggregations) EXPECT_EQ(count, 0u) << name;
  // Every worker's packet reached the PS: at least workers x fragments.
  EXPECT_GE(j.ps_packets_received, j.fragments * 4);
}

TEST_F(NetnsIntegration, PsShardsOnTheWorkersHostsNToNAreExact) {
  // BytePS's N-to-N: every worker's host also runs a PS shard; each shard gets every worker's
  // packets of its fragments (its own host's through the kernel, the others' through switches).
  // Losses on w0's link make workers resend; a PS answers by unicast to the worker's host,
  // where the PS shard's socket receives it and relays it to the worker.
  const ScenarioResult r = run_netns(two_racks(R"(
jobs:
  - {name: nn, algorithm: ps, workers: [w0, w1, w2, w3], ps: [w0, w1, w2, w3], elements: 50000, rounds: 3,
     values_per_packet: 1024, rto_us: 20000}
faults:
  - {link: [w0, tor0], loss: 0.03}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_GE(j.ps_packets_received, j.fragments * 4) << to_summary(r);
  EXPECT_GT(j.retransmissions, 0u) << "the losses did not apply: " << to_summary(r);
  for (const auto& [name, count] : j.switch_aggregations) EXPECT_EQ(count, 0u) << name;
}

TEST_F(NetnsIntegration, TcpFlowIsForwardedThroughTheSwitchesAlongsideAJob) {
  // x (rack 1) -> w0 (rack 0): the flow crosses tor1, core and tor0 while job a runs.
  const ScenarioResult r = run_netns(two_racks(R"(
background: [{from: x, to: w0}]
jobs:
  - {name: a, workers: [w0, w1, w2, w3], ps: [ps], elements: 100000, rounds: 4, values_per_packet: 1024,
     rto_us: 20000}
)",
                                               200),
                                     with_binary());
  EXPECT_TRUE(r.jobs.at(0).correct) << to_summary(r);
  ASSERT_EQ(r.flows.size(), 1u);
  const FlowResult& f = r.flows[0];
  EXPECT_EQ(f.from, "x");
  EXPECT_EQ(f.to, "w0");
  EXPECT_GT(f.bytes, 100'000u) << to_summary(r);
  // A 200 Mbit/s path: the flow cannot beat it (the switches' rate limits apply to TCP too).
  EXPECT_LT(f.goodput_gbps, 0.2 * 1.05) << to_summary(r);
  EXPECT_FALSE(f.goodput_mbps.empty());
}

// The TCP baselines run on the same hosts through the same switches (as plain Ethernet traffic):
// every worker checks its float32 sum against the reference within the rounding bound.
class NetnsBaselines : public NetnsIntegration, public ::testing::WithParamInterface<const char*> {};

TEST_P(NetnsBaselines, TcpCollectiveCrossesTheSwitchesAndIsCorrect) {
  const ScenarioResult r = run_netns(two_racks(std::string(R"(
jobs:
  - {name: b, algorithm: )") + GetParam() + R"(, workers: [w0, w1, w2, w3], elements: 300000, rounds: 2}
)"),
                                     with_binary());
  const JobResult& j = r.jobs.at(0);
  EXPECT_EQ(j.algorithm, GetParam());
  EXPECT_TRUE(j.correct) << to_summary(r);
  EXPECT_EQ(j.ps_packets_received, 0u);
  // Each of them sends about 2(n-1)/n of the tensor per worker per round; every byte crossed a
  // switch port (rack to rack through the core).
  std::uint64_t core_bytes = 0;
  for (const LinkResult& l : r.links) {
    if (l.from == "core" || l.to == "core") core_bytes += l.bytes;
  }
  EXPECT_GT(core_bytes, 300000u * 4) << to_summary(r);
}

// Our three schedules, and Gloo's two where this build has Gloo (ATP_WITH_GLOO).
INSTANTIATE_TEST_SUITE_P(Algorithms, NetnsBaselines,
                         ::testing::ValuesIn(ATP_WITH_GLOO ? std::vector<const char*>{"ring", "halving_doubling",
                                                                                      "hierarchical", "gloo", "gloo_hd"}
                                                           : std::vector<const char*>{"ring", "halving_doubling",
                                                                                      "hierarchical"}));

TEST_F(NetnsIntegration, LeftoversOfAKilledRunAreRemovedByTheNextRun) {
  // A namespace named like a run whose process is gone (pid 4194303 is above any pid_max in use).
  const std::string stale = "atp4194303-leftover";
  ASSERT_EQ(processes::run_command({"ip", "netns", "add", stale}), 0);
  run_netns(two_racks(R"(
jobs:
  - {name: a, workers: [w0, w1], ps: [ps], elements: 1000, rounds: 1}
)"),
            with_binary());
  const bool still_there = !netns::namespaces_with_prefix(stale).empty();
  if (still_there) processes::run_command({"ip", "netns", "del", stale});
  EXPECT_FALSE(still_there);
}

TEST_F(NetnsIntegration, BackgroundFlowsAreRefusedWhereThereAreNoLinks) {
  const Scenario s = two_racks(R"(
background: [{from: x, to: w0}]
jobs:
  - {name: a, workers: [w0, w1], ps: [ps], elements: 1000}
)");
  EXPECT_THROW(run_inproc(s), ScenarioError);
  EXPECT_THROW(run_loopback(s, with_binary()), ScenarioError);
}

// Switch links with a cycle would loop the flooded ARP: refused in one sentence before anything
// starts (examples/leaf-spine.yaml runs on the other backends).
TEST_F(NetnsIntegration, LinksWithACycleAreRefusedInOneSentence) {
  const Scenario s = parse_scenario_yaml(R"(
topology:
  switches: [{name: a}, {name: b}, {name: c}]
  hosts: [{name: w0, switch: a}, {name: w1, switch: b}, {name: ps, switch: c}]
  links: [[a, b], [b, c], [c, a]]
jobs:
  - {name: j, workers: [w0, w1], ps: [ps], elements: 1000}
)");
  try {
    run_netns(s);
    FAIL() << "a topology with a cycle ran on netns";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("topology.links: the links form a cycle", 0), 0u) << e.what();
  }
}

TEST_F(NetnsIntegration, AWorkerHostRunsNoPsWhereItHasOneAddressForBoth) {
  // On loopback a host is one UDP peer of its switch: a colocated PS shard is refused there
  // (and in process, below), with a sentence that names the backend that can.
  const Scenario s = two_racks(R"(
jobs:
  - {name: nn, algorithm: ps, workers: [w0, w1], ps: [w0, w1], elements: 1000}
)");
  try {
    run_loopback(s, with_binary());
    FAIL() << "a worker host with a PS shard ran on the udp backend";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("--backend netns"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_inproc(s), ScenarioError);  // no kernel there to loop the PS's multicast back
  // With in-network aggregation, a colocated PS would bypass the switches: refused when parsed.
  EXPECT_THROW(two_racks(R"(
jobs:
  - {name: nn, workers: [w0, w1], ps: [w0], elements: 1000}
)"),
               ScenarioError);
}

}  // namespace
}  // namespace atp
