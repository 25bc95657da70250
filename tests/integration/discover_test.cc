// Tests of PLink's ProbeEmbed on the backends (include/atp/backends/discover.h): the probe job's
// round trips follow the topology on ns-3 (PAIA 100% without noise, the groups are the racks), a
// plink job grouped by probes runs correct, the process backends run the probes between real
// processes, and what cannot be probed is refused in one sentence.
#include "atp/backends/discover.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "atp/backends/processes.h"
#include "atp/backends/simulated.h"
#include "atp/plan/plan.h"
#include "atp/scenario/topologies.h"
#if ATP_WITH_NS3
#include "atp/backends/ns3.h"
#endif

namespace atp {
namespace {

// Three racks of three hosts under one core switch; 10 Gbit/s links of 2 us.
Scenario three_racks(const std::string& jobs = "") {
  std::string hosts;
  for (int r = 0; r < 3; ++r) {
    for (int h = 0; h < 3; ++h) {
      hosts += "    - {name: h" + std::to_string(r) + std::to_string(h) + ", switch: tor" + std::to_string(r) + "}\n";
    }
  }
  return parse_scenario_yaml(
      "link: {rate_gbps: 10, delay_us: 2}\n"
      "topology:\n"
      "  switches: [{name: core}, {name: tor0}, {name: tor1}, {name: tor2}]\n"
      "  hosts:\n" +
      hosts + "  links: [[tor0, core], [tor1, core], [tor2, core]]\n" + jobs);
}


TEST(Discover, InprocHasNoTcpAndSaysSo) {
  try {
    discover(inproc_backend(), three_racks(), {});
    ADD_FAILURE() << "inproc probed";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("TCP"), std::string::npos) << e.what();
  }
}

TEST(Discover, HostsMustBeTheTopologysAndTwoAtLeast) {
  DiscoverOptions o;
  o.hosts = {"h00", "nope"};
  EXPECT_THROW(discover(inproc_backend(), three_racks(), o), ScenarioError);
  o.hosts = {"h00"};
  EXPECT_THROW(discover(inproc_backend(), three_racks(), o), ScenarioError);
  o.hosts = {"h00", "h00"};
  EXPECT_THROW(discover(inproc_backend(), three_racks(), o), ScenarioError);
}

// The topology of the groups: a switch per group under a core, every host under its group's;
// the planner takes it and the scenario format says it back.
TEST(Discover, TheInferredTopologyIsPlannedAndWritten) {
  Discovery d;
  d.hosts = {"a", "b", "c", "d"};
  d.groups.groups = 2;
  d.groups.group = {0, 1, 0, 1};
  const Topology t = inferred_topology(d, true);
  ASSERT_EQ(t.switches.size(), 3u);
  EXPECT_EQ(t.switches[2].name, "core");
  EXPECT_TRUE(t.switches[0].config.atp_capable);
  EXPECT_EQ(t.hosts[2].switch_name, "group0");
  EXPECT_EQ(t.hosts[3].switch_name, "group1");
  EXPECT_NO_THROW(plan_network(t));
  const Scenario s =
      parse_scenario_yaml(topology_yaml(t) + "jobs: [{algorithm: ring, workers: [a, b], elements: 4}]\n");
  EXPECT_EQ(s.topology.hosts.size(), 4u);
  d.groups.groups = 1;
  d.groups.group = {0, 0, 0, 0};
  EXPECT_EQ(inferred_topology(d, false).switches.size(), 1u);  // one group: no core
}

#if ATP_WITH_NS3
// The partition `groups` makes of the hosts, as sets of names.
std::set<std::set<std::string>> partition(const Discovery& d) {
  std::vector<std::set<std::string>> by(static_cast<std::size_t>(d.groups.groups));
  for (std::size_t h = 0; h < d.hosts.size(); ++h) by[static_cast<std::size_t>(d.groups.group[h])].insert(d.hosts[h]);
  return {by.begin(), by.end()};
}

const std::set<std::set<std::string>> kRacks = {{"h00", "h01", "h02"}, {"h10", "h11", "h12"}, {"h20", "h21", "h22"}};

// Without noise the round trips order every comparable triplet as the racks do (2 links to a
// rack-mate and back, 4 to another rack), so do both embeddings, and the groups are the racks.
// The bandwidths: every path is 10 Gbit/s, of which a 1 MiB transfer gets 35-70% (slow start,
// the longer the round trip the less).
TEST(DiscoverNs3, RoundTripsFollowTheRacksAndTheGroupsAreThem) {
  const Discovery d = discover(ns3_backend(), three_racks(), {});
  ASSERT_EQ(d.hosts.size(), 9u);
  EXPECT_EQ(d.latency.triplets, 9u * 6 * 2);  // per observer: 2 rack-mates x 6 others
  EXPECT_EQ(d.latency.agreeing, d.latency.triplets);
  EXPECT_EQ(d.embedded_alpha1.agreeing, d.embedded_alpha1.triplets);
  EXPECT_EQ(d.embedded_alpha2.agreeing, d.embedded_alpha2.triplets);
  EXPECT_EQ(partition(d), kRacks);
  EXPECT_LT(d.round_trip_s(0, 1), d.round_trip_s(0, 3));
  for (Eigen::Index a = 0; a < 9; ++a) {
    for (Eigen::Index b = 0; b < 9; ++b) {
      if (a == b) continue;
      // Probes between racks share the core's ports, which mark from 20 packets and drop TCP data
      // that is not ECN-capable there: 1.6-10 Gbit/s.
      EXPECT_GT(d.bytes_per_second(a, b), 0.2e9) << a << " " << b;
      EXPECT_LT(d.bytes_per_second(a, b), 1.25e9) << a << " " << b;
    }
  }
  // Deterministic: the same probes give the same distances.
  EXPECT_EQ(discover(ns3_backend(), three_racks(), {}).round_trip_s, d.round_trip_s);
}

// A plink job grouped by probes: the probes run first on the same backend, their groups (the
// racks, here with the ranks interleaved over them) become the job's, and its sums are right.
TEST(DiscoverNs3, APlinkJobGroupedByProbesFollowsThemAndIsCorrect) {
  const Scenario s = three_racks(
      "jobs: [{algorithm: plink, grouping: probe, workers: [h00, h10, h20, h01, h11, h21, h02, h12, h22], "
      "elements: 100003, rounds: 2}]\n");
  EXPECT_NE(ns3_backend().cannot_run(s, {}).find("grouping: probe"), std::string::npos);
  const Scenario probed = with_probed_groups(ns3_backend(), s);
  RankGroups groups = probed.jobs[0].probed_groups;
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  EXPECT_EQ(groups, (RankGroups{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
  const JobResult j = run_ns3(probed).jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.wrong_values, 0u);
}
#endif

// The probe job between real processes (loopback: every host on 127.0.0.1, so no locality to
// find, but every pair measured both ways and each call timed).
TEST(DiscoverLoopback, ProbesRunBetweenProcesses) {
  DiscoverOptions o;
  o.hosts = {"h00", "h01", "h10", "h20", "h21"};  // odd: a node sits out each round
  o.transfer_bytes = 64 << 10;
  o.run.atp_binary = ATP_BINARY;
  const Discovery d = discover(loopback_backend(), three_racks(), o);
  ASSERT_EQ(d.hosts.size(), 5u);
  for (Eigen::Index a = 0; a < 5; ++a) {
    for (Eigen::Index b = 0; b < 5; ++b) {
      if (a == b) continue;
      EXPECT_GT(d.round_trip_s(a, b), 0);
      EXPECT_LT(d.round_trip_s(a, b), 0.1);
      EXPECT_GT(d.bytes_per_second(a, b), 1e6);
    }
  }
  EXPECT_EQ(d.groups.groups, 2);
}

// PLink's connections per pair (`connections:`, schedule lanes) between real processes: each chunk
// on its lane's connection, every sum right, FA and 2LHA alike.
TEST(PlinkLoopback, SeveralConnectionsPerPairSumCorrectly) {
  RunOptions o;
  o.atp_binary = ATP_BINARY;
  for (const char* algorithm : {"plink", "plink_fa"}) {
    const Scenario s = three_racks(std::string("jobs: [{algorithm: ") + algorithm +
                                   ", connections: 3, workers: [h00, h10, h01, h11, h20], elements: 200003, "
                                   "rounds: 2}]\n");
    ASSERT_EQ(s.jobs[0].connections, 3);
    const JobResult j = loopback_backend().run(s, o).jobs.at(0);
    EXPECT_TRUE(j.correct) << algorithm << ": " << j.error;
    EXPECT_EQ(j.completed_rounds, 2u) << algorithm;
  }
}

// Autotune between real processes on loopback: the workers report their connections with each
// round and take the runner's "go"; nothing throttles here, every sum is right.
TEST(PlinkLoopback, AutotuneJobsRunAndSumCorrectly) {
  RunOptions o;
  o.atp_binary = ATP_BINARY;
  const Scenario s = three_racks(
      "jobs: [{algorithm: plink, autotune: true, connections: 2, workers: [h00, h10, h01, h11, h20], "
      "elements: 100003, rounds: 4}]\n");
  const JobResult j = loopback_backend().run(s, o).jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.completed_rounds, 4u);
}

}  // namespace
}  // namespace atp
