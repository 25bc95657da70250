// Tests of what every job plan is built from (atp/plan/paths.h): the port graph and the path
// between two hosts, the job spec's checks, its fragment width.
#include "atp/plan/paths.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace atp {
namespace {

// Two racks under a core: a0, a1 under tor0; b0 under tor1.
Topology two_racks() {
  Topology t;
  SwitchConfig core;
  core.atp_capable = false;
  t.switches = {{"core", core}, {"tor0", SwitchConfig{}}, {"tor1", SwitchConfig{}}};
  t.switch_links = {{"tor0", "core"}, {"tor1", "core"}};
  t.hosts = {{"a0", "tor0"}, {"a1", "tor0"}, {"b0", "tor1"}};
  return t;
}

// A path visits each switch once, entering where the last hop left: in a rack, its ToR alone;
// across, ToR, core, ToR. route_switches names the same switches.
TEST(Paths, APathCrossesEachSwitchOnceFromPortToPort) {
  const Topology t = two_racks();
  const NetworkPlan n = plan_network(t);
  const PortGraph g = build_port_graph(n);
  EXPECT_EQ(g.tor.at("b0"), "tor1");
  std::vector<std::pair<std::string, PortId>> hops;  // switch, egress
  walk_path(n, g, "a0", "b0", [&](const std::string& s, PortId ingress, PortId egress) {
    if (!hops.empty()) {
      const PortRef came = g.peer.at(hops.back().first).at(hops.back().second);
      EXPECT_EQ(came.node, s);
      EXPECT_EQ(came.port, ingress) << "enters where the last hop left";
    }
    hops.emplace_back(s, egress);
  });
  ASSERT_EQ(hops.size(), 3u);
  EXPECT_EQ(hops[0].first, "tor0");
  EXPECT_EQ(hops[1].first, "core");
  EXPECT_EQ(hops[2].first, "tor1");
  EXPECT_EQ(g.peer.at("tor1").at(hops[2].second).node, "b0");
  EXPECT_EQ(route_switches(n, "a0", "a1"), std::vector<std::string>{"tor0"});
  EXPECT_EQ(route_switches(n, "a0", "b0"), (std::vector<std::string>{"tor0", "core", "tor1"}));
  EXPECT_THROW(build_port_graph(NetworkPlan{}), PlanError) << "a plan without its topology";
}

TEST(Paths, AJobSpecIsCheckedAndItsFragmentFitsTheMtu) {
  const Topology t = two_racks();
  NetworkPlan n = plan_network(t);
  JobSpec job;
  job.name = "j";
  job.workers = {"a0", "b0"};
  job.ps = {"a1"};
  EXPECT_NO_THROW(check_job_spec(n, job));
  job.ps.clear();
  EXPECT_THROW(check_job_spec(n, job), PlanError) << "ATP's protocol needs a PS";
  EXPECT_NO_THROW(check_job_spec(n, job, false)) << "Rina's ignores the PS list";
  job.workers = {"a0", "a0"};
  try {
    check_job_spec(n, job, false);
    FAIL() << "a worker listed twice passed";
  } catch (const PlanError& e) {
    EXPECT_STREQ(e.what(), "job 'j' lists worker 'a0' twice");
  }
  // The width: the job's own, or the widest the narrowest aggregator and the MTU take.
  n.mtu_bytes = 1500;
  job.values_per_packet = 0;
  const std::uint16_t width = job_fragment_width(n, job, 1024);
  EXPECT_EQ(width, fragment_width(1500, 1024));
  EXPECT_LE(kIpUdpBytes + packet_size(width), 1500u);
  job.values_per_packet = 1024;
  EXPECT_THROW(job_fragment_width(n, job, 1024), PlanError) << "1024 values do not fit 1500 bytes";
}

}  // namespace
}  // namespace atp
