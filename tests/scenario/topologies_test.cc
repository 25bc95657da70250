// Tests of the topology generators (fat-tree, dragonfly, leaf-spine: counts, degrees, names, order,
// INA switches, refusals) and of the YAML writer, read back by the scenario parser.
#include "atp/scenario/topologies.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "atp/scenario/scenario.h"

namespace atp {
namespace {

// Switch -> the switches it is linked to, each link counted once per end.
std::map<std::string, std::vector<std::string>> neighbours(const Topology& t) {
  std::map<std::string, std::vector<std::string>> out;
  for (const SwitchSpec& s : t.switches) out[s.name];
  for (const SwitchLink& l : t.switch_links) {
    out[l.a].push_back(l.b);
    out[l.b].push_back(l.a);
  }
  return out;
}

// Names are unique, hosts hang under switches of the topology, links join two distinct switches
// of it and no two join the same pair, and every switch is reached from the first.
void expect_well_formed(const Topology& t) {
  std::set<std::string> switches, names;
  for (const SwitchSpec& s : t.switches) {
    switches.insert(s.name);
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate name " << s.name;
  }
  for (const HostSpec& h : t.hosts) {
    EXPECT_TRUE(names.insert(h.name).second) << "duplicate name " << h.name;
    EXPECT_EQ(switches.count(h.switch_name), 1u) << h.name << " is under an unknown switch";
  }
  std::set<std::pair<std::string, std::string>> pairs;
  for (const SwitchLink& l : t.switch_links) {
    EXPECT_EQ(switches.count(l.a), 1u) << l.a;
    EXPECT_EQ(switches.count(l.b), 1u) << l.b;
    EXPECT_NE(l.a, l.b);
    EXPECT_TRUE(pairs.insert(std::minmax(l.a, l.b)).second) << "duplicate link " << l.a << "-" << l.b;
  }
  ASSERT_FALSE(t.switches.empty());
  const auto adjacent = neighbours(t);
  std::set<std::string> seen{t.switches.front().name};
  std::queue<std::string> next;
  next.push(t.switches.front().name);
  while (!next.empty()) {
    for (const std::string& n : adjacent.at(next.front())) {
      if (seen.insert(n).second) next.push(n);
    }
    next.pop();
  }
  EXPECT_EQ(seen.size(), t.switches.size()) << "not every switch is connected";
}

std::vector<std::string> switch_names(const Topology& t) {
  std::vector<std::string> out;
  for (const SwitchSpec& s : t.switches) out.push_back(s.name);
  return out;
}
std::vector<std::string> link_texts(const Topology& t) {
  std::vector<std::string> out;
  for (const SwitchLink& l : t.switch_links) out.push_back(l.a + "-" + l.b);
  return out;
}
std::vector<std::string> ina_switches(const Topology& t) {
  std::vector<std::string> out;
  for (const SwitchSpec& s : t.switches) {
    if (s.config.atp_capable) out.push_back(s.name);
  }
  return out;
}

GeneratedSwitches switches(InaSwitches ina, std::optional<std::uint32_t> aggregators = std::nullopt) {
  GeneratedSwitches s;
  s.ina = ina;
  s.aggregators = aggregators;
  return s;
}

// The sentence `generate` throws as std::invalid_argument ("" when it does not throw).
std::string refusal(const std::function<void()>& generate) {
  try {
    generate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// --- fat-tree

TEST(FatTree, K4HasTwentySwitchesSixteenHostsAndThirtyTwoLinks) {
  const Topology t = fat_tree(4);
  expect_well_formed(t);
  EXPECT_EQ(t.switches.size(), 20u);
  EXPECT_EQ(t.hosts.size(), 16u);
  EXPECT_EQ(t.switch_links.size(), 32u);
  const auto adjacent = neighbours(t);
  for (const auto& [name, peers] : adjacent) {
    // Edge: k/2 aggregation switches; aggregation: k/2 edge and k/2 core; core: one aggregation switch a pod.
    EXPECT_EQ(peers.size(), name.starts_with("edge") ? 2u : 4u) << name;
  }
  // Each pod's edge and aggregation switches form a complete bipartite graph, inside the pod.
  for (int pod = 0; pod < 4; ++pod) {
    for (int e = 0; e < 2; ++e) {
      const std::string edge = "edge" + std::to_string(pod) + "_" + std::to_string(e);
      std::vector<std::string> peers = adjacent.at(edge);
      std::sort(peers.begin(), peers.end());
      EXPECT_EQ(peers,
                (std::vector<std::string>{"agg" + std::to_string(pod) + "_0", "agg" + std::to_string(pod) + "_1"}))
          << edge;
    }
  }
}

TEST(FatTree, NamesAndOrder) {
  const Topology t = fat_tree(4);
  const std::vector<std::string> names = switch_names(t);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 10),
            (std::vector<std::string>{"core0", "core1", "core2", "core3", "agg0_0", "agg0_1", "edge0_0", "edge0_1",
                                      "agg1_0", "agg1_1"}));
  EXPECT_EQ(names.back(), "edge3_1");
  EXPECT_EQ(t.hosts[0].name, "h0_0_0");
  EXPECT_EQ(t.hosts[0].switch_name, "edge0_0");
  EXPECT_EQ(t.hosts[1].name, "h0_0_1");
  EXPECT_EQ(t.hosts[2].name, "h0_1_0");
  EXPECT_EQ(t.hosts[2].switch_name, "edge0_1");
  EXPECT_EQ(t.hosts.back().name, "h3_1_1");
  EXPECT_EQ(t.hosts.back().switch_name, "edge3_1");
  const std::vector<std::string> links = link_texts(t);
  EXPECT_EQ(
      std::vector<std::string>(links.begin(), links.begin() + 9),
      (std::vector<std::string>{"edge0_0-agg0_0", "edge0_0-agg0_1", "edge0_1-agg0_0", "edge0_1-agg0_1", "agg0_0-core0",
                                "agg0_0-core1", "agg0_1-core2", "agg0_1-core3", "edge1_0-agg1_0"}));
  EXPECT_EQ(links.back(), "agg3_1-core3");
}

class FatTreeK : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(FatTreeK, CountsDegreesAndCoreWiring) {
  const std::uint32_t k = GetParam(), half = k / 2;
  const Topology t = fat_tree(k);
  expect_well_formed(t);
  EXPECT_EQ(t.switches.size(), 5u * k * k / 4);
  EXPECT_EQ(t.hosts.size(), k * k * k / 4);
  EXPECT_EQ(t.switch_links.size(), k * k * k / 2);
  const auto adjacent = neighbours(t);
  for (std::uint32_t c = 0; c < half * half; ++c) {
    // Core c is linked to aggregation switch c / (k/2) of every pod.
    std::vector<std::string> peers = adjacent.at("core" + std::to_string(c));
    std::sort(peers.begin(), peers.end());
    std::vector<std::string> expected;
    for (std::uint32_t pod = 0; pod < k; ++pod)
      expected.push_back("agg" + std::to_string(pod) + "_" + std::to_string(c / half));
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(peers, expected) << "core" << c;
  }
  std::map<std::string, int> hosts_under;
  for (const HostSpec& h : t.hosts) ++hosts_under[h.switch_name];
  for (const auto& [name, peers] : adjacent) {
    EXPECT_EQ(peers.size(), name.starts_with("edge") ? half : k) << name;
    EXPECT_EQ(hosts_under[name], name.starts_with("edge") ? static_cast<int>(half) : 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(K, FatTreeK, ::testing::Values(2u, 4u, 6u, 8u));

TEST(FatTree, HostsPerEdge) {
  const Topology t = fat_tree(4, 3);
  EXPECT_EQ(t.hosts.size(), 24u);
  EXPECT_EQ(t.hosts[2].name, "h0_0_2");
  EXPECT_EQ(t.hosts[3].name, "h0_1_0");
}

// --- dragonfly

TEST(Dragonfly, A4G9H2) {
  const Topology t = dragonfly(4, 9, 2);
  expect_well_formed(t);
  EXPECT_EQ(t.switches.size(), 36u);
  EXPECT_EQ(t.hosts.size(), 72u);  // p = h = 2 under each router
  EXPECT_EQ(t.switch_links.size(), 54u + 36u);
  const auto group = [](const std::string& router) { return router.substr(1, router.find('_') - 1); };
  std::map<std::string, int> global_links, local_links;
  std::map<std::pair<std::string, std::string>, int> between_groups;
  for (std::size_t i = 0; i < t.switch_links.size(); ++i) {
    const SwitchLink& l = t.switch_links[i];
    const bool local = group(l.a) == group(l.b);
    EXPECT_EQ(local, i < 54) << "local links come first: " << l.a << "-" << l.b;
    (local ? local_links : global_links)[l.a]++;
    (local ? local_links : global_links)[l.b]++;
    if (!local) between_groups[std::minmax(group(l.a), group(l.b))]++;
  }
  for (const SwitchSpec& s : t.switches) {
    EXPECT_EQ(local_links[s.name], 3) << s.name;   // all-to-all inside the group
    EXPECT_EQ(global_links[s.name], 2) << s.name;  // h
  }
  EXPECT_EQ(between_groups.size(), 36u);  // C(9, 2): every pair of groups
  for (const auto& [pair, links] : between_groups) EXPECT_EQ(links, 1) << pair.first << "-" << pair.second;
  EXPECT_EQ(t.switches[0].name, "r0_0");
  EXPECT_EQ(t.switches[4].name, "r1_0");
  EXPECT_EQ(t.hosts[0].name, "h0_0_0");
  EXPECT_EQ(t.hosts[2].name, "h0_1_0");
  EXPECT_EQ(t.hosts[2].switch_name, "r0_1");
  EXPECT_EQ(link_texts(t)[0], "r0_0-r0_1");
  // Group 0's link j = 0 goes from r0_0 to group 1, where it is link (0 - 1 - 1) mod 9 = 7: r1_3.
  EXPECT_EQ(link_texts(t)[54], "r0_0-r1_3");
  EXPECT_EQ(dragonfly(4, 9, 2, 1).hosts.size(), 36u);
}

// Router r of group k has exactly the global links j = r*h .. r*h + h-1, to groups (k + j + 1) mod g.
class DragonflyShape : public ::testing::TestWithParam<std::pair<std::uint32_t, std::uint32_t>> {};

TEST_P(DragonflyShape, EveryRouterHasItsGlobalLinks) {
  const auto [a, h] = GetParam();
  const std::uint32_t g = a * h + 1;
  const Topology t = dragonfly(a, g, h);
  expect_well_formed(t);
  EXPECT_EQ(t.switches.size(), a * g);
  EXPECT_EQ(t.switch_links.size(), g * a * (a - 1) / 2 + g * (g - 1) / 2);
  std::map<std::string, std::multiset<std::uint32_t>> far_groups;  // router -> groups of its global links
  const auto group = [](const std::string& r) { return static_cast<std::uint32_t>(std::stoul(r.substr(1))); };
  for (const SwitchLink& l : t.switch_links) {
    if (group(l.a) == group(l.b)) continue;
    far_groups[l.a].insert(group(l.b));
    far_groups[l.b].insert(group(l.a));
  }
  for (std::uint32_t k = 0; k < g; ++k) {
    for (std::uint32_t r = 0; r < a; ++r) {
      std::multiset<std::uint32_t> expected;
      for (std::uint32_t j = r * h; j < r * h + h; ++j) expected.insert((k + j + 1) % g);
      EXPECT_EQ(far_groups["r" + std::to_string(k) + "_" + std::to_string(r)], expected) << "r" << k << "_" << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AH, DragonflyShape,
                         ::testing::Values(std::pair{1u, 1u}, std::pair{2u, 1u}, std::pair{4u, 2u}, std::pair{3u, 3u},
                                           std::pair{2u, 4u}));

// --- leaf-spine

TEST(LeafSpine, CountsNamesAndOrder) {
  const Topology t = leaf_spine(4, 2);
  expect_well_formed(t);
  EXPECT_EQ(switch_names(t), (std::vector<std::string>{"spine0", "spine1", "leaf0", "leaf1", "leaf2", "leaf3"}));
  EXPECT_EQ(t.hosts.size(), 8u);  // hosts_per_leaf = spines
  EXPECT_EQ(t.hosts[1].name, "h0_1");
  EXPECT_EQ(t.hosts[2].name, "h1_0");
  EXPECT_EQ(t.hosts[2].switch_name, "leaf1");
  EXPECT_EQ(link_texts(t), (std::vector<std::string>{"leaf0-spine0", "leaf0-spine1", "leaf1-spine0", "leaf1-spine1",
                                                     "leaf2-spine0", "leaf2-spine1", "leaf3-spine0", "leaf3-spine1"}));
  EXPECT_EQ(leaf_spine(3, 5, 7).hosts.size(), 21u);
  EXPECT_EQ(leaf_spine(3, 5, 7).switch_links.size(), 15u);
}

// --- INA switches

TEST(GeneratedSwitches, InaModes) {
  EXPECT_TRUE(ina_switches(fat_tree(4)).empty());  // the default: atp: false everywhere
  EXPECT_EQ(ina_switches(fat_tree(4, std::nullopt, switches(InaSwitches::kAll))).size(), 20u);
  std::vector<std::string> tors = ina_switches(fat_tree(4, std::nullopt, switches(InaSwitches::kTors)));
  EXPECT_EQ(tors.size(), 8u);
  for (const std::string& s : tors) EXPECT_TRUE(s.starts_with("edge")) << s;
  EXPECT_EQ(ina_switches(leaf_spine(3, 2, 1, switches(InaSwitches::kTors))),
            (std::vector<std::string>{"leaf0", "leaf1", "leaf2"}));
  EXPECT_EQ(ina_switches(dragonfly(2, 3, 1, 1, switches(InaSwitches::kTors))).size(), 6u);  // every router

  // --aggregators sets the INA switches' tables only; without it they keep SwitchConfig's.
  const Topology t = leaf_spine(2, 1, 1, switches(InaSwitches::kTors, 100));
  EXPECT_EQ(t.switches[0].config.num_aggregators, SwitchConfig{}.num_aggregators);  // spine0
  EXPECT_EQ(t.switches[1].config.num_aggregators, 100u);                            // leaf0
  EXPECT_EQ(leaf_spine(2, 1, 1, switches(InaSwitches::kAll)).switches[1].config.num_aggregators,
            SwitchConfig{}.num_aggregators);

  EXPECT_EQ(parse_ina_switches("none"), InaSwitches::kNone);
  EXPECT_EQ(parse_ina_switches("all"), InaSwitches::kAll);
  EXPECT_EQ(parse_ina_switches("tors"), InaSwitches::kTors);
  for (InaSwitches ina : {InaSwitches::kNone, InaSwitches::kAll, InaSwitches::kTors}) {
    EXPECT_EQ(parse_ina_switches(to_string(ina)), ina);
  }
}

// --- refusals: one sentence naming the flag and the rule

TEST(Generators, RefuseBadParameters) {
  EXPECT_EQ(refusal([] { fat_tree(3); }), "--k must be an even number of at least 2, got 3");
  EXPECT_EQ(refusal([] { fat_tree(0); }), "--k must be an even number of at least 2, got 0");
  EXPECT_EQ(refusal([] { fat_tree(4, 0); }), "--hosts-per-edge must be at least 1, got 0");
  EXPECT_EQ(refusal([] { dragonfly(0, 1, 2); }), "--a must be at least 1, got 0");
  EXPECT_EQ(refusal([] { dragonfly(4, 9, 0); }), "--h must be at least 1, got 0");
  EXPECT_EQ(refusal([] { dragonfly(4, 9, 2, 0); }), "--p must be at least 1, got 0");
  EXPECT_EQ(refusal([] { dragonfly(4, 5, 2); }),
            "--g must be a*h + 1 = 9 for --a 4 --h 2 (the balanced dragonfly: one global link between every pair of "
            "groups), got 5");
  EXPECT_EQ(refusal([] { leaf_spine(0, 2); }), "--leaves must be at least 1, got 0");
  EXPECT_EQ(refusal([] { leaf_spine(2, 0); }), "--spines must be at least 1, got 0");
  EXPECT_EQ(refusal([] { leaf_spine(2, 2, 0); }), "--hosts-per-leaf must be at least 1, got 0");
  EXPECT_EQ(refusal([] { leaf_spine(2, 2, 1, switches(InaSwitches::kNone, 64)); }),
            "--aggregators needs --ina all or --ina tors: a switch with atp: false holds no aggregators");
  EXPECT_EQ(refusal([] { leaf_spine(2, 2, 1, switches(InaSwitches::kAll, 0)); }),
            "--aggregators must be between 1 and 16777216, got 0");
  EXPECT_EQ(refusal([] { fat_tree(1024); }),
            "--k 1024 --hosts-per-edge 512 gives 806617088 switches, hosts and links, more than the 4194304 a "
            "generated topology may have");
  // a*h + 1 does not fit 32 bits: refused for its size before g is looked at.
  EXPECT_EQ(refusal([] { dragonfly(65536, 0, 65536); }),
            "--a 65536 --g 4294967297 --h 65536 --p 65536 gives over 2^64 switches, hosts and links, more than the "
            "4194304 a generated topology may have");
  EXPECT_EQ(refusal([] { leaf_spine(1, 1, 70000); }),
            "--leaves 1 --spines 1 --hosts-per-leaf 70000 gives each leaf 70001 ports, more than the 65535 a switch "
            "has (port numbers are 16 bits)");
  EXPECT_EQ(refusal([] { leaf_spine(70000, 1, 1); }),
            "--leaves 70000 --spines 1 --hosts-per-leaf 1 gives each spine 70000 ports, more than the 65535 a switch "
            "has (port numbers are 16 bits)");
  EXPECT_EQ(refusal([] { parse_ina_switches("edges"); }), "--ina must be none, all or tors, got 'edges'");
}

// --- YAML

TEST(TopologyYaml, LeafSpineGolden) {
  EXPECT_EQ(topology_yaml(leaf_spine(2, 2, 1, switches(InaSwitches::kTors, 1024))),
            "topology:\n"
            "  switches:\n"
            "    - {name: spine0, atp: false}\n"
            "    - {name: spine1, atp: false}\n"
            "    - {name: leaf0, atp: true, aggregators: 1024}\n"
            "    - {name: leaf1, atp: true, aggregators: 1024}\n"
            "  hosts:\n"
            "    - {name: h0_0, switch: leaf0}\n"
            "    - {name: h1_0, switch: leaf1}\n"
            "  links:\n"
            "    - [leaf0, spine0]\n"
            "    - [leaf0, spine1]\n"
            "    - [leaf1, spine0]\n"
            "    - [leaf1, spine1]\n");
}

TEST(TopologyYaml, OtherKeysQuotingAndWhatItCannotSay) {
  Topology t;
  t.switches.push_back({.name = "null", .config = {}});
  t.switches.back().config.aggregator_width = 62;
  t.switches.back().config.reclaim_timeout = std::chrono::nanoseconds(1500);
  t.hosts.push_back({.name = "a \"b\"", .switch_name = "null"});
  EXPECT_EQ(topology_yaml(t),
            "topology:\n"
            "  switches:\n"
            "    - {name: \"null\", atp: true, width: 62, reclaim_timeout_us: 1.5}\n"
            "  hosts:\n"
            "    - {name: \"a \\\"b\\\"\", switch: \"null\"}\n"
            "  links: []\n");
  t.hosts.back().attached = HostAttachment{.address = kFirstHostAddress, .port = 0};
  EXPECT_EQ(refusal([&] { topology_yaml(t); }),
            "host 'a \"b\"' is attached to a running switch, which a scenario file has no key for");
}

// What parse_scenario_yaml reads back from topology_yaml(t), with one job so the file is a scenario.
Topology read_back(const Topology& t) {
  const auto quoted = [](const std::string& name) {  // for the job's line; the tests' names have no '\\'
    std::string out = "\"";
    for (char c : name) out += c == '"' ? std::string("\\\"") : std::string(1, c);
    return out + "\"";
  };
  const std::string text = topology_yaml(t) + "jobs:\n  - {workers: [" + quoted(t.hosts.front().name) + "], ps: [" +
                           quoted(t.hosts.back().name) + "], elements: 1}\n";
  return parse_scenario_yaml(text, "generated").topology;
}

void expect_same(const Topology& got, const Topology& want) {
  ASSERT_EQ(got.switches.size(), want.switches.size());
  for (std::size_t i = 0; i < want.switches.size(); ++i) {
    const SwitchSpec &g = got.switches[i], &w = want.switches[i];
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.config.atp_capable, w.config.atp_capable) << w.name;
    EXPECT_EQ(g.config.num_aggregators, w.config.num_aggregators) << w.name;
    EXPECT_EQ(g.config.aggregator_width, w.config.aggregator_width) << w.name;
    EXPECT_EQ(g.config.reclaim_timeout, w.config.reclaim_timeout) << w.name;
  }
  ASSERT_EQ(got.hosts.size(), want.hosts.size());
  for (std::size_t i = 0; i < want.hosts.size(); ++i) {
    EXPECT_EQ(got.hosts[i].name, want.hosts[i].name);
    EXPECT_EQ(got.hosts[i].switch_name, want.hosts[i].switch_name);
  }
  EXPECT_EQ(link_texts(got), link_texts(want));
}

// Tree-shaped outputs, which every parser takes: a one-spine leaf-spine, the k = 2 fat-tree, a
// two-group dragonfly, and names and settings that need quoting or non-default keys.
TEST(TopologyYaml, TreesReadBackTheSame) {
  for (const Topology& t : {leaf_spine(3, 1, 2, switches(InaSwitches::kTors, 16)), fat_tree(2),
                            dragonfly(1, 2, 1, 3, switches(InaSwitches::kAll, 1))}) {
    expect_same(read_back(t), t);
  }
  Topology odd;
  for (const char* name : {"null", "1", "x: y", "[z]", "tab\there", "~"})
    odd.switches.push_back({.name = name, .config = {}});
  odd.switches[0].config.atp_capable = false;
  odd.switches[1].config.aggregator_width = 62;
  odd.switches[1].config.num_aggregators = 7;
  odd.switches[2].config.reclaim_timeout = std::chrono::nanoseconds(1500);
  odd.switches[3].config.reclaim_timeout = Duration::zero();
  odd.hosts = {{.name = "h \"q\"", .switch_name = "null"}, {.name = "#h", .switch_name = "~"}};
  for (std::size_t i = 1; i < odd.switches.size(); ++i)
    odd.switch_links.push_back({.a = odd.switches[0].name, .b = odd.switches[i].name});
  expect_same(read_back(odd), odd);
}

// Cyclic outputs: every fat-tree with k >= 4, every dragonfly with more than one router or two
// groups, every leaf-spine with two spines or more. These read back only where the parser takes
// switch links that are any connected graph, not just a tree (issue 16): a parser that still
// refuses cycles fails here with "closes a cycle", and only for that reason.
TEST(TopologyYaml, CyclicTopologiesReadBackTheSame) {
  for (const Topology& t : {fat_tree(4), dragonfly(4, 9, 2), leaf_spine(4, 2, 3, switches(InaSwitches::kTors, 8))}) {
    expect_same(read_back(t), t);
  }
}

}  // namespace
}  // namespace atp
