// Tests of the job plan: addresses, ports and shortest-path routes of a topology, and each job's groups,
// bitmaps, fan-ins, aggregation roles, admission and multicast ports (docs/protocol.md).
#include "atp/plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace atp {
namespace {

constexpr Address ip(std::uint32_t last) { return 0x0A000000u | last; }  // 10.0.0.<last>

SwitchSpec atp_switch(std::string name, std::uint32_t aggregators = 4096, std::uint16_t width = 1024) {
  SwitchSpec s;
  s.name = std::move(name);
  s.config.num_aggregators = aggregators;
  s.config.aggregator_width = width;
  return s;
}
SwitchSpec plain_switch(std::string name) {
  SwitchSpec s;
  s.name = std::move(name);
  s.config.atp_capable = false;
  return s;
}

// Runs f and checks that it throws PlanError whose message contains every one of `parts`.
void expect_plan_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no PlanError; expected one mentioning " << parts.front();
  } catch (const PlanError& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

JobSpec job_of(std::vector<std::string> workers, std::vector<std::string> ps) {
  JobSpec job;
  job.name = "a";
  job.id = 7;
  job.workers = std::move(workers);
  job.ps = std::move(ps);
  return job;
}

std::vector<PortId> ports(std::initializer_list<PortId> p) { return p; }

// The aggregation tree towards job.ps[k] as "ps(sw2(sw0(w0 w1) sw1(w2 w3) w4 w5))": the PS's
// config gives its shape, the workers' routes and the switches' roles name its nodes. Every
// role must list its node's children of that shape in order, with their fan-ins, and every node
// must be named once (a mismatch fails the test).
std::string tree_of(const JobPlan& p, const JobSpec& job, std::size_t k = 0) {
  const std::vector<std::uint16_t>& tree = p.ps.at(k).tree;
  std::vector<std::vector<std::uint16_t>> children(tree.size());
  for (std::size_t i = 1; i < tree.size(); ++i) children.at(tree[i]).push_back(static_cast<std::uint16_t>(i));
  std::vector<std::string> name(tree.size());
  name[0] = job.ps.at(k);
  for (std::size_t i = 0; i < job.workers.size(); ++i) {
    const std::uint16_t node = p.workers.at(i).ps.at(k).node;
    EXPECT_TRUE(name.at(node).empty() && children.at(node).empty()) << job.workers[i] << " at node " << node;
    name.at(node) = job.workers[i];
  }
  for (const auto& [switch_name, plan] : p.switches) {
    for (const AggregationRole& role : plan.entry.roles) {
      if (role.ps != p.ps[k].self) continue;
      EXPECT_TRUE(name.at(role.node).empty()) << switch_name << " at node " << role.node;
      name.at(role.node) = switch_name;
      std::vector<std::uint16_t> listed;
      for (const TreeChild& c : role.children) {
        listed.push_back(c.node);
        EXPECT_EQ(c.fan_in, std::max<std::size_t>(1, children.at(c.node).size())) << switch_name;
      }
      EXPECT_EQ(listed, children.at(role.node)) << switch_name;
    }
  }
  const std::function<std::string(std::uint16_t)> draw = [&](std::uint16_t n) {
    EXPECT_FALSE(name[n].empty()) << "node " << n << " has no name";
    std::string out = name[n];
    for (std::size_t c = 0; c < children[n].size(); ++c) out += (c == 0 ? "(" : " ") + draw(children[n][c]);
    return children[n].empty() ? out : out + ")";
  };
  return draw(0);
}

// The paper's Fig. 9: w0,w1 under sw0; w2,w3 under sw1; w4,w5 and the PS under sw2.
// with_core: sw0, sw1 and sw2 hang off an ATP-capable core switch instead of sw0/sw1 off sw2.
Topology fig9(bool with_core) {
  Topology t;
  t.switches = {atp_switch("sw0", 1000), atp_switch("sw1", 2000), atp_switch("sw2", 3000)};
  t.hosts = {{"w0", "sw0"}, {"w1", "sw0"}, {"w2", "sw1"}, {"w3", "sw1"}, {"w4", "sw2"}, {"w5", "sw2"}, {"ps", "sw2"}};
  if (with_core) {
    t.switches.push_back(atp_switch("core", 10, 8));  // small: it bounds a job it aggregates
    t.switch_links = {{"sw0", "core"}, {"sw1", "core"}, {"sw2", "core"}};
  } else {
    t.switch_links = {{"sw0", "sw2"}, {"sw1", "sw2"}};
  }
  return t;
}

// ------------------------------------------------------------------------------------------
// plan_network

TEST(PlanNetwork, AddressesPortsAndLinks) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  EXPECT_EQ(n.topology, &t);
  EXPECT_EQ(n.host_address.at("w0"), ip(1));
  EXPECT_EQ(n.host_address.at("w5"), ip(6));
  EXPECT_EQ(n.host_address.at("ps"), ip(7));
  EXPECT_EQ(n.host_by_address.at(ip(3)), "w2");
  EXPECT_EQ(n.host_by_address.size(), 7u);
  EXPECT_EQ(n.switch_port_count.at("sw0"), 3);
  EXPECT_EQ(n.switch_port_count.at("sw1"), 3);
  EXPECT_EQ(n.switch_port_count.at("sw2"), 5);

  // Host links first (host order, host port 0), then switch links; hosts before links at a switch.
  ASSERT_EQ(n.links.size(), 9u);
  const std::vector<std::pair<std::string, PortId>> host_ends = {{"sw0", 0}, {"sw0", 1}, {"sw1", 0}, {"sw1", 1},
                                                                 {"sw2", 0}, {"sw2", 1}, {"sw2", 2}};
  for (std::size_t h = 0; h < 7; ++h) {
    EXPECT_EQ(n.links[h].a.node, t.hosts[h].name);
    EXPECT_EQ(n.links[h].a.port, 0);
    EXPECT_EQ(n.links[h].b.node, host_ends[h].first);
    EXPECT_EQ(n.links[h].b.port, host_ends[h].second);
  }
  EXPECT_EQ(n.links[7].a.node, "sw0");
  EXPECT_EQ(n.links[7].a.port, 2);
  EXPECT_EQ(n.links[7].b.node, "sw2");
  EXPECT_EQ(n.links[7].b.port, 3);
  EXPECT_EQ(n.links[8].a.node, "sw1");
  EXPECT_EQ(n.links[8].a.port, 2);
  EXPECT_EQ(n.links[8].b.node, "sw2");
  EXPECT_EQ(n.links[8].b.port, 4);
}

TEST(PlanNetwork, RoutesFollowTheTree) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  const std::map<Address, PortId> sw0 = {{ip(1), 0}, {ip(2), 1}, {ip(3), 2}, {ip(4), 2},
                                         {ip(5), 2}, {ip(6), 2}, {ip(7), 2}};
  const std::map<Address, PortId> sw1 = {{ip(1), 2}, {ip(2), 2}, {ip(3), 0}, {ip(4), 1},
                                         {ip(5), 2}, {ip(6), 2}, {ip(7), 2}};
  const std::map<Address, PortId> sw2 = {{ip(1), 3}, {ip(2), 3}, {ip(3), 4}, {ip(4), 4},
                                         {ip(5), 0}, {ip(6), 1}, {ip(7), 2}};
  EXPECT_EQ(n.routes.at("sw0"), sw0);
  EXPECT_EQ(n.routes.at("sw1"), sw1);
  EXPECT_EQ(n.routes.at("sw2"), sw2);
}

// A deeper tree (core - 3 aggregation switches - 2 ToRs each - 2 hosts each): following the
// routes from any switch reaches every host, in as many hops as the tree distance.
TEST(PlanNetwork, RoutesReachEveryHostFromEverySwitch) {
  Topology t;
  t.switches.push_back(atp_switch("core"));
  for (int a = 0; a < 3; ++a) {
    const std::string agg = "agg" + std::to_string(a);
    t.switches.push_back(plain_switch(agg));
    t.switch_links.push_back({"core", agg});
    for (int r = 0; r < 2; ++r) {
      const std::string tor = "tor" + std::to_string(a) + std::to_string(r);
      t.switches.push_back(atp_switch(tor));
      t.switch_links.push_back({tor, agg});  // either orientation is fine
      for (int h = 0; h < 2; ++h)
        t.hosts.push_back({"h" + std::to_string(a) + std::to_string(r) + std::to_string(h), tor});
    }
  }
  const NetworkPlan n = plan_network(t);
  std::map<std::pair<std::string, PortId>, std::string> peer;
  for (const PlannedLink& l : n.links) {
    peer[{l.a.node, l.a.port}] = l.b.node;
    peer[{l.b.node, l.b.port}] = l.a.node;
  }
  for (const SwitchSpec& s : t.switches) {
    ASSERT_EQ(n.routes.at(s.name).size(), t.hosts.size());
    for (const HostSpec& h : t.hosts) {
      std::string at = s.name;
      int hops = 0;
      while (at != h.name && hops < 10) {
        at = peer.at({at, n.routes.at(at).at(n.host_address.at(h.name))});
        ++hops;
      }
      EXPECT_EQ(at, h.name) << "from " << s.name;
      // Hops = tree distance to the host's ToR + 1. Names encode the position: tor<agg><rack>,
      // h<agg><rack><i>; so the distance follows from the shared prefix.
      int want;
      if (s.name == "core") {
        want = 3;
      } else if (s.name.starts_with("agg")) {
        want = s.name[3] == h.name[1] ? 2 : 4;
      } else if (s.name[3] != h.name[1]) {
        want = 5;
      } else {
        want = s.name[4] == h.name[2] ? 1 : 3;
      }
      EXPECT_EQ(hops, want) << s.name << " -> " << h.name;
    }
  }
}

// Switch graphs with cycles: a ring of four switches (two shortest paths between opposite ones)
// and a leaf-spine (every leaf linked to both spines), two hosts under each leaf or ring switch.
Topology ring_of_four() {
  Topology t;
  for (int s = 0; s < 4; ++s) {
    t.switches.push_back(atp_switch("r" + std::to_string(s)));
    for (int h = 0; h < 2; ++h)
      t.hosts.push_back({"h" + std::to_string(s) + std::to_string(h), t.switches.back().name});
  }
  t.switch_links = {{"r0", "r1"}, {"r1", "r2"}, {"r2", "r3"}, {"r3", "r0"}};
  return t;
}
Topology leaf_spine() {
  Topology t;
  t.switches = {plain_switch("spine0"), plain_switch("spine1")};
  for (int l = 0; l < 4; ++l) {
    const std::string leaf = "leaf" + std::to_string(l);
    t.switches.push_back(atp_switch(leaf));
    for (const char* spine : {"spine0", "spine1"}) t.switch_links.push_back({leaf, spine});
    for (int h = 0; h < 2; ++h) t.hosts.push_back({"h" + std::to_string(l) + std::to_string(h), leaf});
  }
  return t;
}

// Switch -> neighbour switches, from the topology (for distances computed apart from the plan).
std::map<std::string, std::vector<std::string>> neighbours(const Topology& t) {
  std::map<std::string, std::vector<std::string>> n;
  for (const SwitchLink& l : t.switch_links) {
    n[l.a].push_back(l.b);
    n[l.b].push_back(l.a);
  }
  return n;
}
int switch_distance(const Topology& t, const std::string& from, const std::string& to) {
  const auto n = neighbours(t);
  std::map<std::string, int> d{{from, 0}};
  std::vector<std::string> frontier{from};
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    for (const std::string& next : n.count(frontier[i]) ? n.at(frontier[i]) : std::vector<std::string>{}) {
      if (d.emplace(next, d[frontier[i]] + 1).second) frontier.push_back(next);
    }
  }
  return d.at(to);
}

// (node, port) -> the node at the link's other end, and its port there.
std::map<std::pair<std::string, PortId>, PortRef> peers_of(const NetworkPlan& n) {
  std::map<std::pair<std::string, PortId>, PortRef> peer;
  for (const PlannedLink& l : n.links) {
    peer[{l.a.node, l.a.port}] = l.b;
    peer[{l.b.node, l.b.port}] = l.a;
  }
  return peer;
}

TEST(PlanNetwork, LinksWithCyclesAreRoutedByShortestPaths) {
  for (const Topology& t : {ring_of_four(), leaf_spine()}) {
    const NetworkPlan n = plan_network(t);
    const auto peer = peers_of(n);
    for (const SwitchSpec& s : t.switches) {
      for (const HostSpec& h : t.hosts) {
        std::string at = s.name;
        int hops = 0;
        while (at != h.name && hops < 10) {
          at = peer.at({at, n.routes.at(at).at(n.host_address.at(h.name))}).node;
          ++hops;
        }
        ASSERT_EQ(at, h.name) << "from " << s.name;
        EXPECT_EQ(hops, switch_distance(t, s.name, h.switch_name) + 1) << s.name << " -> " << h.name;
      }
    }
  }
  // Ties go to the path a breadth-first search finds first, neighbours in link order: r0 reaches
  // r2 (two hops either way) through r1, whose link is listed before r3's.
  const Topology ring = ring_of_four();
  const NetworkPlan n = plan_network(ring);
  EXPECT_EQ(peers_of(n).at({"r0", n.routes.at("r0").at(n.host_address.at("h20"))}).node, "r1");
}

// Where links form cycles, the PS's multicast still reaches every worker exactly once, through
// admitted ports only, and no switch gets it twice: it follows the workers' paths to the PS
// backwards, not the unicast routes from the PS (which may enter one switch through two ports).
// A connected graph of `switches` switches with extra links, seeded: a random tree, then random
// chords; one host under each switch.
Topology random_graph(int switches, int chords, std::uint32_t seed) {
  std::uint32_t x = seed * 2654435761u + 1;
  auto next = [&x](int below) {
    x = x * 1664525u + 1013904223u;
    return static_cast<int>((x >> 8) % static_cast<std::uint32_t>(below));
  };
  Topology t;
  std::set<std::pair<int, int>> linked;
  for (int s = 0; s < switches; ++s) {
    t.switches.push_back(atp_switch("s" + std::to_string(s)));
    t.hosts.push_back({"h" + std::to_string(s), "s" + std::to_string(s)});
    if (s > 0) {
      const int parent = next(s);
      linked.insert({parent, s});
      t.switch_links.push_back({"s" + std::to_string(parent), "s" + std::to_string(s)});
    }
  }
  for (int c = 0; c < chords; ++c) {
    const int a = next(switches), b = next(switches);
    if (a == b || linked.contains({std::min(a, b), std::max(a, b)})) continue;
    linked.insert({std::min(a, b), std::max(a, b)});
    t.switch_links.push_back({"s" + std::to_string(a), "s" + std::to_string(b)});
  }
  return t;
}

TEST(PlanJob, MulticastOverCyclesReachesEveryWorkerOnce) {
  std::vector<Topology> graphs = {ring_of_four(), leaf_spine()};
  for (std::uint32_t seed = 1; seed <= 40; ++seed) graphs.push_back(random_graph(10, 12, seed));
  for (const Topology& t : graphs) {
    const std::string ps = t.hosts.front().name;
    const NetworkPlan n = plan_network(t);
    std::vector<std::string> workers;
    for (const HostSpec& h : t.hosts) {
      if (h.name != ps) workers.push_back(h.name);
    }
    const JobPlan p = plan_job(n, job_of(workers, {ps}));
    const auto peer = peers_of(n);
    std::map<std::string, int> received;  // node -> copies
    std::vector<PortRef> in_flight{peer.at({ps, 0})};
    while (!in_flight.empty()) {
      const PortRef at = in_flight.back();
      in_flight.pop_back();
      ++received[at.node];
      if (!n.switch_port_count.contains(at.node)) continue;  // a host
      const SwitchJobPlan& entry = p.switches.at(at.node);
      const auto& admitted = entry.entry.admitted_ports;
      ASSERT_TRUE(std::find(admitted.begin(), admitted.end(), at.port) != admitted.end()) << at.node << " " << at.port;
      for (const PortId out : entry.multicast_ports) {
        if (out != at.port) in_flight.push_back(peer.at({at.node, out}));
      }
    }
    for (const std::string& w : workers) EXPECT_EQ(received[w], 1) << w;
    for (const auto& [node, copies] : received) EXPECT_EQ(copies, 1) << node;
    EXPECT_FALSE(received.contains(ps));
  }
}

TEST(PlanNetwork, RejectsBadTopologies) {
  auto plan = [](Topology t) { return [t = std::move(t)] { (void)plan_network(t); }; };
  Topology base = fig9(false);

  expect_plan_error(plan(Topology{}), {"no switches"});
  Topology t = base;
  t.switches.push_back(atp_switch("sw1"));
  expect_plan_error(plan(t), {"'sw1'", "unique"});
  t = base;
  t.hosts.push_back({"sw2", "sw0"});
  expect_plan_error(plan(t), {"'sw2'", "unique"});
  t = base;
  t.hosts.push_back({"w0", "sw0"});
  expect_plan_error(plan(t), {"'w0'", "unique"});
  t = base;
  t.hosts.push_back({"w9", "sw9"});
  expect_plan_error(plan(t), {"host 'w9'", "'sw9'", "not a switch"});
  t = base;
  t.hosts.push_back({"w9", "w0"});  // attached to a host
  expect_plan_error(plan(t), {"host 'w9'", "'w0'", "not a switch"});
  t = base;
  t.switch_links.push_back({"sw0", "sw7"});
  expect_plan_error(plan(t), {"'sw7'", "not a switch"});
  t = base;
  t.switch_links.push_back({"sw1", "sw1"});
  expect_plan_error(plan(t), {"'sw1'-'sw1'", "itself"});
  t = base;
  t.switch_links.push_back({"sw2", "sw0"});  // same link, other orientation
  expect_plan_error(plan(t), {"'sw2'-'sw0'", "twice"});
  t = base;
  t.switch_links.pop_back();  // sw1 is cut off
  expect_plan_error(plan(t), {"switch 'sw1'", "not connected", "connect every switch"});
  t = base;
  t.switches[0].config.num_aggregators = 0;
  expect_plan_error(plan(t), {"switch 'sw0'", "aggregators"});
  t = base;
  t.switches[0].config.atp_capable = false;
  t.switches[0].config.num_aggregators = 0;  // irrelevant for a plain switch
  EXPECT_NO_THROW((void)plan_network(t));
}

// ------------------------------------------------------------------------------------------
// plan_job

TEST(PlanJob, SingleRackIsOneSwitchAboveItsWorkers) {
  Topology t;
  t.switches = {atp_switch("tor0", 500)};
  t.hosts = {{"w0", "tor0"}, {"w1", "tor0"}, {"ps", "tor0"}, {"w2", "tor0"}};
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w0", "w1", "w2"}, {"ps"});
  const JobPlan p = plan_job(n, job);

  ASSERT_EQ(p.workers.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(p.workers[i].ps.size(), 1u);
    EXPECT_EQ(p.workers[i].ps[0].ps, ip(3));
    EXPECT_EQ(p.workers[i].ps[0].node, 2 + i);  // breadth first: tor0 is node 1
  }
  ASSERT_EQ(p.ps.size(), 1u);
  EXPECT_EQ(p.ps[0].tree, (std::vector<std::uint16_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(tree_of(p, job), "ps(tor0(w0 w1 w2))");
  EXPECT_EQ(p.num_aggregators, 500u);

  ASSERT_EQ(p.switches.size(), 1u);
  const SwitchJobPlan& s = p.switches.at("tor0");
  EXPECT_EQ(s.entry.job, 7);
  ASSERT_EQ(s.entry.roles.size(), 1u);
  EXPECT_EQ(s.entry.roles[0].ps, ip(3));
  EXPECT_EQ(s.entry.roles[0].node, 1);
  EXPECT_EQ(s.entry.admitted_ports, ports({0, 1, 2, 3}));
  EXPECT_EQ(s.multicast_ports, ports({0, 1, 3}));  // the workers, not the PS
}

// Hosts attached to a running switch (the PyTorch backend's workers and PS) keep the address
// and port that switch gave them; the job's entries name those ports.
TEST(PlanJob, AttachedHostsKeepTheirAddressesAndPorts) {
  Topology t;
  t.switches = {atp_switch("tor0", 500)};
  t.hosts = {{"w0", "tor0", HostAttachment{ip(9), 5}},
             {"w1", "tor0", HostAttachment{ip(4), 2}},
             {"ps", "tor0", HostAttachment{ip(1), 0}}};
  const NetworkPlan n = plan_network(t);
  EXPECT_EQ(n.host_address.at("w0"), ip(9));
  EXPECT_EQ(n.routes.at("tor0").at(ip(9)), 5);
  EXPECT_EQ(n.routes.at("tor0").at(ip(4)), 2);
  EXPECT_EQ(n.switch_port_count.at("tor0"), 6);
  const JobPlan p = plan_job(n, job_of({"w0", "w1"}, {"ps"}));
  EXPECT_EQ(p.workers[0].self, ip(9));
  EXPECT_EQ(p.workers[1].ps[0].ps, ip(1));
  EXPECT_EQ(tree_of(p, job_of({"w0", "w1"}, {"ps"})), "ps(tor0(w0 w1))");
  const SwitchJobPlan& s = p.switches.at("tor0");
  EXPECT_EQ(s.entry.admitted_ports, ports({0, 2, 5}));
  EXPECT_EQ(s.multicast_ports, ports({2, 5}));

  Topology mixed = t;
  mixed.hosts[1].attached.reset();
  expect_plan_error([&] { plan_network(mixed); }, {"'w1' has no attachment", "every host"});
  Topology same_port = t;
  same_port.hosts[1].attached->port = 5;
  expect_plan_error([&] { plan_network(same_port); }, {"host 'w1' and host 'w0' both have port 5 of switch 'tor0'"});
  Topology same_address = t;
  same_address.hosts[2].attached->address = ip(9);
  expect_plan_error([&] { plan_network(same_address); }, {"'w0' and 'ps'", "10.0.0.9"});
}

// Racks of running switches: hosts attached at run time to two ToRs linked through a core by
// their configured ports. The plan keeps every port, routes across the links, and says which
// switches' pools overlap when two hosts got one address.
TEST(PlanJob, LinksBetweenRunningSwitchesKeepTheirPorts) {
  Topology t;
  t.switches = {atp_switch("tor0", 500), atp_switch("tor1", 500), atp_switch("core", 500)};
  t.hosts = {{"w0", "tor0", HostAttachment{0x0A010001, 2}},
             {"w1", "tor0", HostAttachment{0x0A010002, 3}},
             {"w2", "tor1", HostAttachment{0x0A020001, 1}},
             {"ps", "core", HostAttachment{0x0A030001, 4}}};
  t.switch_links = {{"tor0", "core", std::pair<PortId, PortId>{0, 1}},
                    {"tor1", "core", std::pair<PortId, PortId>{0, 0}}};
  const NetworkPlan n = plan_network(t);
  EXPECT_EQ(n.routes.at("tor0").at(0x0A020001), 0);  // to w2: up the link
  EXPECT_EQ(n.routes.at("tor0").at(0x0A030001), 0);
  EXPECT_EQ(n.routes.at("core").at(0x0A010002), 1);  // to w1: down to tor0
  EXPECT_EQ(n.routes.at("core").at(0x0A020001), 0);
  EXPECT_EQ(n.routes.at("core").at(0x0A030001), 4);
  EXPECT_EQ(n.switch_port_count.at("tor0"), 4);
  EXPECT_EQ(n.switch_port_count.at("core"), 5);
  const JobPlan p = plan_job(n, job_of({"w0", "w1", "w2"}, {"ps"}));
  EXPECT_EQ(p.switches.at("tor0").entry.admitted_ports, ports({0, 2, 3}));
  EXPECT_EQ(p.switches.at("core").entry.admitted_ports, ports({0, 1, 4}));
  EXPECT_EQ(p.switches.at("core").multicast_ports, ports({0, 1}));
  // Each switch gets its routes to the job's hosts, installed with the job where it lacks them.
  using Routes = std::vector<std::pair<Address, PortId>>;
  EXPECT_EQ(p.switches.at("tor0").routes, (Routes{{0x0A010001, 2}, {0x0A010002, 3}, {0x0A020001, 0}, {0x0A030001, 0}}));
  EXPECT_EQ(p.switches.at("tor1").routes, (Routes{{0x0A010001, 0}, {0x0A010002, 0}, {0x0A020001, 1}, {0x0A030001, 0}}));

  Topology clash = t;
  clash.switch_links[0].ports->first = 2;
  expect_plan_error([&] { plan_network(clash); }, {"host 'w0' and switch link 'tor0'-'core' both have port 2"});
  Topology one_pool = t;
  one_pool.hosts[2].attached->address = 0x0A010001;
  expect_plan_error([&] { plan_network(one_pool); },
                    {"'w0' and 'w2' have the same address 10.1.0.1", "switches 'tor0' and 'tor1'", "own host_pool"});
}

TEST(PlanJob, Figure9TwoLevels) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w0", "w1", "w2", "w3", "w4", "w5"}, {"ps"});
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(tree_of(p, job), "ps(sw2(sw0(w0 w1) sw1(w2 w3) w4 w5))");

  ASSERT_EQ(p.switches.size(), 3u);
  const auto& sw0 = p.switches.at("sw0");
  const auto& sw1 = p.switches.at("sw1");
  const auto& sw2 = p.switches.at("sw2");
  ASSERT_EQ(sw0.entry.roles.size(), 1u);
  EXPECT_EQ(sw0.entry.roles[0].ps, ip(7));
  ASSERT_EQ(sw1.entry.roles.size(), 1u);
  ASSERT_EQ(sw2.entry.roles.size(), 1u);
  EXPECT_EQ(sw2.entry.roles[0].ps, ip(7));

  EXPECT_EQ(sw0.entry.admitted_ports, ports({0, 1, 2}));
  EXPECT_EQ(sw1.entry.admitted_ports, ports({0, 1, 2}));
  EXPECT_EQ(sw2.entry.admitted_ports, ports({0, 1, 2, 3, 4}));
  EXPECT_EQ(sw0.multicast_ports, ports({0, 1}));
  EXPECT_EQ(sw1.multicast_ports, ports({0, 1}));
  EXPECT_EQ(sw2.multicast_ports, ports({0, 1, 3, 4}));
  EXPECT_EQ(p.num_aggregators, 1000u);  // smallest of sw0, sw1, sw2
}

// Every ATP switch where paths meet aggregates: the core too, three levels deep (docs/protocol.md
// "Aggregation tree"). Its 10 aggregators of 8 values then bound the job's indices and width.
TEST(PlanJob, Figure9ThroughAnAtpCoreAggregatesAtEveryLevel) {
  const Topology t = fig9(true);
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w0", "w1", "w2", "w3", "w4", "w5"}, {"ps"});
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(tree_of(p, job), "ps(sw2(core(sw0(w0 w1) sw1(w2 w3)) w4 w5))");
  EXPECT_EQ(p.num_aggregators, 10u);
  EXPECT_EQ(p.values_per_packet, 8);
}

TEST(PlanJob, Figure9ThroughAnAtpCoreTooNarrowForTheJobsPackets) {
  const Topology t = fig9(true);
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w2", "w3", "w4", "w5"}, {"ps"});
  job.values_per_packet = 62;  // wider than the core's 8-value aggregators: it only forwards the job
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(tree_of(p, job), "ps(sw2(sw0(w0 w1) sw1(w2 w3) w4 w5))");

  ASSERT_EQ(p.switches.size(), 4u);
  const auto& core = p.switches.at("core");
  EXPECT_TRUE(core.entry.roles.empty());
  // Core ports: sw0 link 0, sw1 link 1, sw2 link 2. Every one carries the job in some direction;
  // the PS's multicast comes in from sw2 and only has workers to reach behind sw0 and sw1.
  EXPECT_EQ(core.entry.admitted_ports, ports({0, 1, 2}));
  EXPECT_EQ(core.multicast_ports, ports({0, 1}));
  EXPECT_EQ(p.switches.at("sw2").entry.admitted_ports, ports({0, 1, 2, 3}));
  EXPECT_EQ(p.switches.at("sw2").multicast_ports, ports({0, 1, 3}));
  EXPECT_EQ(p.num_aggregators, 1000u);  // the core's 10 aggregators do not count
}

// A switch where one path goes on adds nothing: its child takes its place. Workers under a plain
// ToR are children of the first ATP switch above.
TEST(PlanJob, WorkersUnderAPlainTorAreChildrenOfTheSwitchAbove) {
  Topology t;
  t.switches = {plain_switch("tor0"), atp_switch("tor1", 300), atp_switch("tor2", 400)};
  t.hosts = {{"w0", "tor0"}, {"w1", "tor0"}, {"w2", "tor1"}, {"ps", "tor2"}};
  t.switch_links = {{"tor0", "tor2"}, {"tor1", "tor2"}};
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w0", "w2", "w1"}, {"ps"});
  const JobPlan p = plan_job(n, job);

  // Children in the order of their first worker in the job's list.
  EXPECT_EQ(tree_of(p, job), "ps(tor2(w0 w2 w1))");
  EXPECT_TRUE(p.switches.at("tor0").entry.roles.empty());
  EXPECT_EQ(p.switches.at("tor0").multicast_ports, ports({0, 1}));
  EXPECT_TRUE(p.switches.at("tor1").entry.roles.empty());  // one worker: nothing to add up
  EXPECT_EQ(p.num_aggregators, 400u);
}

TEST(PlanJob, APlainPsTorLeavesTheSumsToThePs) {
  Topology t;
  t.switches = {atp_switch("tor0", 300), atp_switch("tor1", 200), plain_switch("tor2")};
  t.hosts = {{"w0", "tor0"}, {"w1", "tor0"}, {"w2", "tor1"}, {"ps", "tor2"}};
  t.switch_links = {{"tor0", "tor2"}, {"tor1", "tor2"}};
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w0", "w1", "w2"}, {"ps"});
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(tree_of(p, job), "ps(tor0(w0 w1) w2)");
  EXPECT_TRUE(p.switches.at("tor2").entry.roles.empty());
  EXPECT_TRUE(p.switches.at("tor1").entry.roles.empty());
  EXPECT_EQ(p.num_aggregators, 300u);

  // One remote rack only: nothing to add at the PS's ATP ToR.
  const JobSpec one_rack = job_of({"w0", "w1"}, {"w2"});
  const JobPlan one = plan_job(n, one_rack);
  EXPECT_EQ(tree_of(one, one_rack), "w2(tor0(w0 w1))");
  EXPECT_TRUE(one.switches.at("tor1").entry.roles.empty());

  // A single rack under a plain switch: nothing aggregates.
  Topology plain;
  plain.switches = {plain_switch("tor")};
  plain.hosts = {{"w0", "tor"}, {"w1", "tor"}, {"ps", "tor"}};
  const NetworkPlan pn = plan_network(plain);
  const JobSpec flat = job_of({"w0", "w1"}, {"ps"});
  const JobPlan pp = plan_job(pn, flat);
  EXPECT_EQ(tree_of(pp, flat), "ps(w0 w1)");
  EXPECT_EQ(pp.ps[0].tree, flat_tree(2));
  EXPECT_TRUE(pp.switches.at("tor").entry.roles.empty());
  EXPECT_EQ(pp.num_aggregators, 1u);
}

TEST(PlanJob, TwoPsInDifferentRacksHaveDifferentTrees) {
  Topology t;
  t.switches = {atp_switch("tor0"), atp_switch("tor1")};
  t.hosts = {{"w0", "tor0"}, {"w1", "tor0"}, {"ps0", "tor0"}, {"w2", "tor1"}, {"w3", "tor1"}, {"ps1", "tor1"}};
  t.switch_links = {{"tor0", "tor1"}};
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w2", "w3"}, {"ps0", "ps1"});
  job.congestion.max_window = 300;
  const JobPlan p = plan_job(n, job);

  EXPECT_EQ(tree_of(p, job, 0), "ps0(tor0(w0 w1 tor1(w2 w3)))");
  EXPECT_EQ(tree_of(p, job, 1), "ps1(tor1(tor0(w0 w1) w2 w3))");
  EXPECT_EQ(p.workers[0].ps[0].ps, ip(3));
  EXPECT_EQ(p.workers[0].ps[1].ps, ip(6));
  EXPECT_EQ(p.ps[0].max_window_seqs, 600u);
  EXPECT_EQ(p.ps[1].max_window_seqs, 600u);
  // Each ToR has a role towards each PS.
  EXPECT_EQ(p.switches.at("tor0").entry.roles.size(), 2u);
  EXPECT_EQ(p.switches.at("tor1").entry.roles.size(), 2u);
  // tor0: hosts w0 0, w1 1, ps0 2, link 3. Multicast from ps1 enters on 3 and must reach w0, w1;
  // from ps0 it must reach w0, w1 and tor1.
  EXPECT_EQ(p.switches.at("tor0").entry.admitted_ports, ports({0, 1, 2, 3}));
  EXPECT_EQ(p.switches.at("tor0").multicast_ports, ports({0, 1, 3}));
  EXPECT_EQ(p.switches.at("tor1").multicast_ports, ports({0, 1, 3}));
}

TEST(PlanJob, OnlySwitchesOnTheJobsPathsGetEntries) {
  Topology t = fig9(true);
  t.switches.push_back(atp_switch("sw3"));
  t.hosts.push_back({"x", "sw3"});
  t.switch_links.push_back({"sw3", "core"});
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w0", "w1"}, {"ps"});
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(p.switches.size(), 3u);  // sw0, core, sw2
  EXPECT_TRUE(p.switches.contains("sw0"));
  EXPECT_TRUE(p.switches.contains("core"));
  EXPECT_TRUE(p.switches.contains("sw2"));
  // The core and sw2 carry sw0's sum alone: it goes straight to the PS.
  EXPECT_EQ(tree_of(p, job), "ps(sw0(w0 w1))");
  EXPECT_TRUE(p.switches.at("sw2").entry.roles.empty());
  EXPECT_EQ(p.switches.at("sw2").entry.admitted_ports, ports({2, 3}));
  EXPECT_EQ(p.switches.at("sw2").multicast_ports, ports({3}));
}

// tor0 - tor1 - tor2 (PS): tor1 adds tor0's sum and its own workers' (a resend or a partial sum
// from tor0 is not one of its children's whole sums, so it is never merged there).
TEST(PlanJob, ASwitchOnAnotherRacksPathAddsItsSumToItsOwnWorkers) {
  Topology t;
  t.switches = {atp_switch("tor0"), atp_switch("tor1"), atp_switch("tor2")};
  t.hosts = {{"w0", "tor0"}, {"w1", "tor0"}, {"w2", "tor1"}, {"w3", "tor1"}, {"ps", "tor2"}};
  t.switch_links = {{"tor0", "tor1"}, {"tor1", "tor2"}};
  const NetworkPlan n = plan_network(t);
  const JobSpec job = job_of({"w2", "w0", "w1", "w3"}, {"ps"});
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(tree_of(p, job), "ps(tor1(w2 tor0(w0 w1) w3))");
  EXPECT_TRUE(p.switches.at("tor2").entry.roles.empty());

  const JobSpec only_tor1 = job_of({"w2", "w3"}, {"ps"});
  EXPECT_EQ(tree_of(plan_job(n, only_tor1), only_tor1), "ps(tor1(w2 w3))");
}

TEST(PlanJob, CopiesJobSettingsIntoEndpoints) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w3", "w0"}, {"ps"});
  job.id = 513;
  job.values_per_packet = 100;
  job.scale = 1e6;
  job.index_policy = IndexPolicy::kLinear;
  job.congestion.initial_window = 17;
  job.retransmit_timeout = std::chrono::milliseconds(3);
  job.progress_timeout = std::chrono::seconds(9);
  job.initial_seq = 0xFFFFFFF0u;
  const JobPlan p = plan_job(n, job);
  ASSERT_EQ(p.workers.size(), 2u);
  const WorkerConfig& w = p.workers[0];
  EXPECT_EQ(w.job, 513);
  EXPECT_EQ(w.self, ip(4));
  EXPECT_EQ(p.workers[1].self, ip(1));
  EXPECT_EQ(w.values_per_packet, 100);
  EXPECT_EQ(w.scale, 1e6);
  EXPECT_EQ(w.index_policy, IndexPolicy::kLinear);
  EXPECT_EQ(w.congestion.initial_window, 17u);
  EXPECT_EQ(w.retransmit_timeout, std::chrono::milliseconds(3));
  EXPECT_GE(w.max_retransmit_timeout, w.retransmit_timeout);
  EXPECT_EQ(w.progress_timeout, std::chrono::seconds(9));
  EXPECT_EQ(w.initial_seq, 0xFFFFFFF0u);
  EXPECT_EQ(w.aggregators, (AggregatorRange{0, p.num_aggregators}));  // dynamic sharing: the whole table
  const PsConfig& ps = p.ps[0];
  EXPECT_EQ(ps.job, 513);
  EXPECT_EQ(ps.self, ip(7));
  EXPECT_EQ(ps.multicast_group, multicast_group_address(513));
  EXPECT_EQ(ps.values_per_packet, 100);
  EXPECT_EQ(ps.aggregators, w.aggregators);
  EXPECT_EQ(ps.max_window_seqs, job.congestion.max_window);
  EXPECT_EQ(p.num_aggregators, 3000u);  // only sw2 adds up (w3's and w0's ToRs hold one each)

  job.retransmit_timeout = std::chrono::seconds(1);  // above the default cap: the cap follows
  EXPECT_EQ(plan_job(n, job).workers[0].max_retransmit_timeout, std::chrono::seconds(1));
}

// Static sharing: share k of K is [k * c, k * c + c) of the smallest aggregating table (sw0's
// 1000 here), c = floor(1000 / K); workers and the PS get the same range.
TEST(PlanJob, StaticShareIsAnEqualSliceOfTheSmallestTable) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w2", "w3", "w4", "w5"}, {"ps"});
  const JobPlan dynamic = plan_job(n, job);
  EXPECT_EQ(dynamic.aggregators, (AggregatorRange{0, 1000}));

  // 1000 = 3 x 333 + 1: with three shares, aggregator 999 is nobody's.
  const std::pair<AggregatorShare, AggregatorRange> cases[] = {{{0, 1}, {0, 1000}},  {{0, 2}, {0, 500}},
                                                               {{1, 2}, {500, 500}}, {{0, 3}, {0, 333}},
                                                               {{2, 3}, {666, 333}}, {{999, 1000}, {999, 1}}};
  for (const auto& [share, range] : cases) {
    SCOPED_TRACE(testing::Message() << "share " << share.index << " of " << share.count);
    job.aggregator_share = share;
    const JobPlan p = plan_job(n, job);
    EXPECT_EQ(p.num_aggregators, 1000u);  // still the smallest table
    EXPECT_EQ(p.aggregators, range);
    for (const WorkerConfig& w : p.workers) EXPECT_EQ(w.aggregators, range);
    ASSERT_EQ(p.ps.size(), 1u);
    EXPECT_EQ(p.ps[0].aggregators, range);
  }

  // Nothing aggregates a PS-baseline job: a share changes nothing and costs nothing.
  job.in_network_aggregation = false;
  job.aggregator_share = AggregatorShare{1, 2000};
  EXPECT_EQ(plan_job(n, job).aggregators, (AggregatorRange{0, 1}));
}

TEST(PlanJob, StaticSharesAreCutFromTheSmallestAtpTableSoTheyAreDisjointEverywhere) {
  // A job of w2,w3 only crosses sw1 (2000) and sw2 (3000), but sw0 has 1000: shares of 500 for
  // both jobs, so the first job's range cannot reach into the second's on sw2.
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  JobSpec a = job_of({"w2", "w3"}, {"ps"});
  a.aggregator_share = AggregatorShare{0, 2};
  JobSpec b = job_of({"w0", "w1"}, {"ps"});
  b.aggregator_share = AggregatorShare{1, 2};
  EXPECT_EQ(plan_job(n, a).num_aggregators, 2000u);
  EXPECT_EQ(plan_job(n, a).aggregators, (AggregatorRange{0, 500}));
  EXPECT_EQ(plan_job(n, b).aggregators, (AggregatorRange{500, 500}));
  // SwitchML's slots: no more fragments in flight than aggregators in the share.
  EXPECT_EQ(plan_job(n, a).workers[0].congestion.max_window, 500u);
  // The default first window (0), which AimdWindow caps by max_window.
  EXPECT_EQ(plan_job(n, a).workers[0].congestion.initial_window, 0u);
  b.ps = {"ps", "w5"};  // two shards, two flows: 250 each
  EXPECT_EQ(plan_job(n, b).workers[0].congestion.max_window, 250u);
  a.aggregator_share.reset();
  EXPECT_EQ(plan_job(n, a).workers[0].congestion.max_window, 1024u);
}

// Dynamic sharing with hashed_slots: a job's fragments in flight, and so its slots (the PS's
// max_window_seqs), stop at its part of the smallest table, so that the sharing jobs' slots fit
// it together; the other indices keep the paper's windows.
TEST(PlanJob, DynamicJobsWithSlotsKeepToTheirPartOfTheSmallestTable) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w2", "w3", "w4", "w5"}, {"ps"});  // sw0's 1000 is the smallest
  job.index_policy = IndexPolicy::kHashedSlots;
  const std::pair<std::uint32_t, std::uint32_t> cases[] = {{1, 1000}, {3, 333}, {4, 250}, {1000, 1}, {5000, 1}};
  for (const auto& [sharing, window] : cases) {
    SCOPED_TRACE(testing::Message() << sharing << " jobs");
    job.sharing_jobs = sharing;
    const JobPlan p = plan_job(n, job);
    EXPECT_EQ(p.aggregators, (AggregatorRange{0, 1000}));  // still the whole table
    for (const WorkerConfig& w : p.workers) {
      EXPECT_EQ(w.congestion.max_window, window);
      EXPECT_LE(w.congestion.initial_ssthresh, window);
    }
    EXPECT_EQ(p.ps[0].max_window_seqs, window);
  }
  JobSpec sharded = job_of({"w0", "w1", "w2", "w3"}, {"ps", "w5"});  // two shards: 333 slots, two flows of 166
  sharded.index_policy = IndexPolicy::kHashedSlots;
  sharded.sharing_jobs = 3;
  ASSERT_EQ(plan_job(n, sharded).num_aggregators, 1000u);
  EXPECT_EQ(plan_job(n, sharded).workers[0].congestion.max_window, 166u);
  EXPECT_EQ(plan_job(n, sharded).ps[0].max_window_seqs, 332u);
  // Where each job's slots start: a part of its own among the jobs planned together, else HASH(job).
  job.sharing_jobs = 1;
  EXPECT_EQ(plan_job(n, job).workers[0].slot_home, hashed_slot_home(job.id, 1000));
  job.sharing_jobs = 3;
  for (std::uint32_t k = 0; k < 3; ++k) {
    job.sharing_index = k;
    for (const WorkerConfig& w : plan_job(n, job).workers) EXPECT_EQ(w.slot_home, k * 333);
  }
  job.sharing_index = 3;  // not a place among 3: refused, not wrapped round to another job's part
  expect_plan_error([&] { plan_job(n, job); }, {"sharing_index 3; it must be below sharing_jobs (3)"});
  job.sharing_index = 0;
  job.congestion.max_window = 100;  // a job's own smaller bound stays
  EXPECT_EQ(plan_job(n, job).workers[0].congestion.max_window, 100u);
  job.congestion = CongestionConfig{};
  for (IndexPolicy paper : {IndexPolicy::kHashed, IndexPolicy::kLinear}) {
    job.index_policy = paper;
    EXPECT_EQ(plan_job(n, job).workers[0].congestion.max_window, 1024u);
  }
}

// The default index (allocated): the switch finds each fragment by <job, seq> and the table brake
// shares the table out, so a job's window may grow to the whole smallest table, however many
// jobs share it, from its part of it. A static share takes it as linear: an allocating switch
// would ignore the share.
TEST(PlanJob, AllocatedJobsMayFillTheSmallestTableAndStaticSharesTakeItAsLinear) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w2", "w3", "w4", "w5"}, {"ps"});  // sw0's 1000 is the smallest
  ASSERT_EQ(job.index_policy, IndexPolicy::kAllocated);
  for (const std::uint32_t sharing : {1u, 3u}) {
    job.sharing_jobs = sharing;
    const JobPlan p = plan_job(n, job);
    EXPECT_EQ(p.workers[0].index_policy, IndexPolicy::kAllocated);
    EXPECT_EQ(p.workers[0].congestion.max_window, 1000u);
    // It starts at its part: the first window and slow start's threshold.
    EXPECT_EQ(p.workers[0].congestion.initial_ssthresh, 1000u / sharing);
    EXPECT_EQ(p.workers[0].congestion.initial_window,
              std::min(1000u / sharing, initial_window_packets({}, packet_size(p.values_per_packet))));
    EXPECT_EQ(p.ps[0].index_policy, IndexPolicy::kAllocated);
    EXPECT_EQ(p.ps[0].max_window_seqs, 1000u);
  }
  job.sharing_jobs = 1;
  job.aggregator_share = AggregatorShare{1, 4};
  const JobPlan p = plan_job(n, job);
  EXPECT_EQ(p.workers[0].index_policy, IndexPolicy::kLinear);
  EXPECT_EQ(p.ps[0].index_policy, IndexPolicy::kLinear);
  EXPECT_EQ(p.workers[0].aggregators, (AggregatorRange{250, 250}));
}

TEST(PlanJob, RejectsStaticSharesOfNoAggregators) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w2"}, {"ps"});
  job.aggregator_share = AggregatorShare{0, 1001};  // sw0 has 1000
  expect_plan_error([&] { (void)plan_job(n, job); },
                    {"job 'a'", "1 of 1001 static shares", "switch 'sw0'", "only 1000", "at least 1001 aggregators"});
  job.aggregator_share = AggregatorShare{2, 2};
  expect_plan_error([&] { (void)plan_job(n, job); }, {"job 'a'", "share 2 of 2"});
  job.aggregator_share = AggregatorShare{0, 0};
  expect_plan_error([&] { (void)plan_job(n, job); }, {"job 'a'", "share 0 of 0"});
}

// A switch adds up at most 32 children (a 32-bit bitmap); where more paths meet it only forwards,
// and they are its parent's children (the PS takes any number).
TEST(PlanJob, ASwitchWhereMoreThanThirtyTwoPathsMeetOnlyForwards) {
  Topology t;
  t.switches = {atp_switch("tor0"), plain_switch("tor1"), atp_switch("tor2")};
  t.switch_links = {{"tor0", "tor2"}, {"tor1", "tor2"}};
  std::vector<std::string> rack0, rack1;
  for (int i = 0; i < 33; ++i) {
    rack0.push_back("a" + std::to_string(i));
    rack1.push_back("b" + std::to_string(i));
    t.hosts.push_back({rack0.back(), "tor0"});
    t.hosts.push_back({rack1.back(), "tor1"});
  }
  t.hosts.push_back({"ps", "tor2"});
  const NetworkPlan n = plan_network(t);
  auto children_of = [](const JobPlan& p, const std::string& s) {
    const auto& roles = p.switches.at(s).entry.roles;
    return roles.empty() ? std::size_t{0} : roles[0].children.size();
  };

  JobSpec job = job_of(std::vector<std::string>(rack0.begin(), rack0.begin() + 32), {"ps"});
  JobPlan p = plan_job(n, job);
  EXPECT_EQ(children_of(p, "tor0"), 32u);
  EXPECT_EQ(p.switches.at("tor0").entry.roles[0].children[31].node, p.workers[31].ps[0].node);
  job.workers.push_back(rack0[32]);
  p = plan_job(n, job);
  EXPECT_EQ(children_of(p, "tor0"), 0u);
  EXPECT_EQ(children_of(p, "tor2"), 0u);
  EXPECT_EQ(p.ps[0].tree, flat_tree(33));

  // Under a plain ToR the workers are tor2's children: 32 it adds up, 33 it forwards.
  job.workers.assign(rack1.begin(), rack1.begin() + 32);
  EXPECT_EQ(children_of(plan_job(n, job), "tor2"), 32u);
  job.workers.push_back(rack1[32]);
  EXPECT_EQ(plan_job(n, job).ps[0].tree, flat_tree(33));
  // 32 under tor0 and 2 under tor1: tor2 adds tor0's sum and the two.
  job.workers.assign(rack0.begin(), rack0.begin() + 32);
  job.workers.insert(job.workers.end(), {rack1[0], rack1[1]});
  p = plan_job(n, job);
  EXPECT_EQ(children_of(p, "tor0"), 32u);
  EXPECT_EQ(children_of(p, "tor2"), 3u);
}

TEST(PlanJob, RejectsBadJobs) {
  const Topology t = fig9(false);
  const NetworkPlan n = plan_network(t);
  auto plan = [&](JobSpec job) { return [&n, job = std::move(job)] { (void)plan_job(n, job); }; };

  expect_plan_error(plan(job_of({}, {"ps"})), {"job 'a'", "no workers"});
  expect_plan_error(plan(job_of({"w0"}, {})), {"job 'a'", "no parameter server"});
  expect_plan_error(plan(job_of({"w0", "zz"}, {"ps"})), {"job 'a'", "worker 'zz'", "not a host"});
  expect_plan_error(plan(job_of({"w0", "sw0"}, {"ps"})), {"worker 'sw0'", "not a host"});
  expect_plan_error(plan(job_of({"w0"}, {"pz"})), {"parameter server 'pz'", "not a host"});
  expect_plan_error(plan(job_of({"w0", "w1", "w0"}, {"ps"})), {"worker 'w0'", "twice"});
  expect_plan_error(plan(job_of({"w0"}, {"ps", "ps"})), {"parameter server 'ps'", "twice"});
  expect_plan_error(plan(job_of({"w0", "w1"}, {"w1"})), {"'w1'", "both a worker and a parameter server"});

  JobSpec job = job_of({"w0", "w1"}, {"ps"});
  job.values_per_packet = kMaxValuesPerPacket + 1;
  expect_plan_error(plan(job), {"values_per_packet must be 1..4096, got 4097"});
  job.values_per_packet = kMaxValuesPerPacket;  // wider than sw0's aggregators: sw0 only forwards it
  EXPECT_TRUE(plan_job(n, job).switches.at("sw0").entry.roles.empty());
  job.values_per_packet = 1024;
  EXPECT_FALSE(plan_job(n, job).switches.at("sw0").entry.roles.empty());
  EXPECT_NO_THROW(plan(job)());
  job.congestion.initial_window = 300;
  job.congestion.max_window = 100;
  expect_plan_error(plan(job), {"job 'a': the window (300) must not exceed max_window (100)"});
  job.congestion.max_window = 300;
  EXPECT_NO_THROW(plan(job)());
  job.scale = 0;
  expect_plan_error(plan(job), {"scale"});

  NetworkPlan no_topology = n;
  no_topology.topology = nullptr;
  EXPECT_THROW((void)plan_job(no_topology, job_of({"w0"}, {"ps"})), PlanError);
}

// Unset, a fragment is as wide as the switches that aggregate the job and the links' MTU take, and
// at most kWidestChosenFragment (kFragmentWithoutMtu where no MTU is known); a width set by hand
// must fit the MTU too.
TEST(PlanJob, AnUnsetFragmentWidthIsTheWidestThePathTakes) {
  EXPECT_EQ(kWidestChosenFragment, kMaxValuesPerPacket);
  EXPECT_EQ(fragment_width(0, kMaxValuesPerPacket), kFragmentWithoutMtu);
  EXPECT_EQ(fragment_width(0, 300), 300);
  EXPECT_EQ(fragment_width(1500, kMaxValuesPerPacket), 358);                   // (1500 - 20 IPv4 - 8 UDP - 40 ATP) / 4
  EXPECT_EQ(fragment_width(9000, kMaxValuesPerPacket), 2233);                  // jumbo frames (the netns testbed)
  EXPECT_EQ(fragment_width(65535, kMaxValuesPerPacket), kMaxValuesPerPacket);  // loopback
  EXPECT_EQ(fragment_width(65536, 300), 300);
  EXPECT_EQ(fragment_width(20 + 8 + 40 + 4, kMaxValuesPerPacket), 1);
  expect_plan_error([] { (void)fragment_width(20 + 8 + 40 + 3, kMaxValuesPerPacket); },
                    {"MTU of 71 bytes", "no room for even one value"});

  // sw0, sw1 and sw2 aggregate; a plain core bounds nothing.
  Topology t = fig9(true);
  t.switches[3].config.atp_capable = false;
  t.switches[1].config.aggregator_width = 300;
  NetworkPlan n = plan_network(t);
  JobSpec job = job_of({"w0", "w1", "w4"}, {"ps"});  // not under sw1
  JobPlan p = plan_job(n, job);
  EXPECT_EQ(p.values_per_packet, 1024);
  EXPECT_EQ(p.workers[0].values_per_packet, 1024);
  EXPECT_EQ(p.ps[0].values_per_packet, 1024);
  job.workers.insert(job.workers.end(), {"w2", "w3"});  // under sw1, which adds them up
  EXPECT_EQ(plan_job(n, job).values_per_packet, 300);
  n.mtu_bytes = 1000;
  EXPECT_EQ(plan_job(n, job).values_per_packet, 233);  // (1000 - 68) / 4

  job.in_network_aggregation = false;  // the PS baseline: no switch bounds it, the same cap does
  n.mtu_bytes = 0;
  EXPECT_EQ(plan_job(n, job).values_per_packet, kFragmentWithoutMtu);

  job.values_per_packet = 230;  // set by hand: kept where it fits
  n.mtu_bytes = 1000;
  EXPECT_EQ(plan_job(n, job).values_per_packet, 230);
  job.values_per_packet = 250;  // 28 + 40 + 1000 bytes
  expect_plan_error([&] { (void)plan_job(n, job); },
                    {"job 'a'", "250 values per packet", "1068-byte IP packets", "MTU of 1000 bytes"});
  n.mtu_bytes = 60;
  job.values_per_packet = 0;
  expect_plan_error([&] { (void)plan_job(n, job); }, {"job 'a'", "MTU of 60 bytes"});
}

// A job whose PSs could be made to hold more than kPsJobMemoryBudget fails at planning, with
// the numbers to change; the default window stays well inside it.
// Workers w0 and w1 and PS hosts ps0..ps7 under one plain switch.
Topology eight_ps_hosts() {
  Topology t;
  t.switches = {plain_switch("tor")};
  t.hosts = {{"w0", "tor"}, {"w1", "tor"}};
  for (int k = 0; k < 8; ++k) t.hosts.push_back({"ps" + std::to_string(k), "tor"});
  return t;
}
const std::vector<std::string> kEightPs = {"ps0", "ps1", "ps2", "ps3", "ps4", "ps5", "ps6", "ps7"};

TEST(PlanJob, PsMemoryAboveTheBudgetIsAPlanError) {
  const Topology t = eight_ps_hosts();  // the plan points into it
  const NetworkPlan n = plan_network(t);
  const std::vector<std::string>& servers = kEightPs;
  JobSpec job = job_of({"w0", "w1"}, servers);
  job.values_per_packet = kMaxValuesPerPacket;  // 1024 x 8 x 4096 values: about 512 MiB per PS
  expect_plan_error([&] { (void)plan_job(n, job); },
                    {"job 'a'", "max_window 1024 x 8 PS shards", "4096 values per packet", "256 MiB"});
  job.congestion.max_window = 256;
  const JobPlan p = plan_job(n, job);
  EXPECT_LE(ps_job_memory_bound(p.ps[0]), kPsJobMemoryBudget);
  job = job_of({"w0", "w1"}, {"ps0"});  // the default window and packet (1024 values): well inside
  EXPECT_LT(ps_job_memory_bound(plan_job(n, job).ps[0]), kPsJobMemoryBudget / 10);
  job.congestion.max_window = kMaxWindowSeqs + 1;
  expect_plan_error([&] { (void)plan_job(n, job); }, {"max_window 1048577"});
}

// Unset, the width is also the widest that keeps every PS within its budget: 8 shards on a
// loopback-sized MTU would hold about 512 MiB with 4096 values, so fewer are chosen.
TEST(PlanJob, AChosenWidthKeepsThePsWithinItsBudget) {
  const Topology t = eight_ps_hosts();  // the plan points into it
  NetworkPlan n = plan_network(t);
  n.mtu_bytes = 65535;
  const JobPlan p = plan_job(n, job_of({"w0", "w1"}, kEightPs));
  EXPECT_LT(p.values_per_packet, kMaxValuesPerPacket);
  EXPECT_GT(p.values_per_packet, kMaxValuesPerPacket / 4);
  EXPECT_LE(ps_job_memory_bound(p.ps[0]), kPsJobMemoryBudget);
  PsConfig wider = p.ps[0];
  wider.values_per_packet = static_cast<std::uint16_t>(p.values_per_packet + 1);
  EXPECT_GT(ps_job_memory_bound(wider), kPsJobMemoryBudget) << "the widest that fits, not narrower";
  EXPECT_EQ(plan_job(n, job_of({"w0", "w1"}, {"ps0"})).values_per_packet, kMaxValuesPerPacket);  // one PS: no cut
}

}  // namespace
}  // namespace atp
