// `atp topology fat-tree|dragonfly|leaf-spine`: prints the `topology:` section of a scenario file
// for a generated network (include/atp/scenario/topologies.h: the generators, names and order).
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/scenario/topologies.h"
#include "commands.h"

namespace atp::cli {
namespace {

struct TopologyOptions {
  std::uint32_t k = 0;
  std::uint32_t hosts_per_edge = 0;
  std::uint32_t a = 0, g = 0, h = 0, p = 0;
  std::uint32_t leaves = 0, spines = 0;
  std::uint32_t hosts_per_leaf = 0;
  std::string ina = "none";
  std::uint32_t aggregators = 0;
  // The flags that have defaults computed from the others: whether they were given.
  CLI::Option* hosts_per_edge_flag = nullptr;
  CLI::Option* g_flag = nullptr;
  CLI::Option* p_flag = nullptr;
  CLI::Option* hosts_per_leaf_flag = nullptr;
  // One per subcommand, each bound to `aggregators`: only the chosen subcommand's can be given.
  std::vector<CLI::Option*> aggregators_flags;
};

std::optional<std::uint32_t> given(const CLI::Option* flag, std::uint32_t value) {
  return flag->count() > 0 ? std::optional<std::uint32_t>(value) : std::nullopt;
}

// --ina and --aggregators, the same on every generator.
void add_switch_flags(CLI::App& app, TopologyOptions& o) {
  app.add_option("--ina", o.ina,
                 "which switches aggregate (atp: true): none, all, or tors (the switches hosts hang under)")
      ->capture_default_str();
  o.aggregators_flags.push_back(app.add_option(
      "--aggregators", o.aggregators,
      "aggregators of each INA switch, 1.." + std::to_string(1u << 24) + " (default: a scenario switch's, 4096)"));
}

// Generates with `generate` and prints the header line `args` (the command with every parameter,
// defaults included) and the YAML; a bad parameter is one sentence on stderr and exit 2.
int print_topology(const std::string& command, const std::function<Topology(const GeneratedSwitches&)>& generate,
                   const std::function<std::string()>& args, const TopologyOptions& o) {
  Topology topology;
  GeneratedSwitches switches;
  try {
    switches.ina = parse_ina_switches(o.ina);
    for (const CLI::Option* flag : o.aggregators_flags) {
      if (flag->count() > 0) switches.aggregators = o.aggregators;
    }
    topology = generate(switches);
  } catch (const std::invalid_argument& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return kExitBadInput;
  }
  std::string header = "# " + command + " " + args() + " --ina " + std::string(to_string(switches.ina));
  if (switches.aggregators) header += " --aggregators " + std::to_string(*switches.aggregators);
  std::cout << header << ": " << topology.switches.size() << " switches, " << topology.hosts.size() << " hosts, "
            << topology.switch_links.size() << " switch links\n"
            << topology_yaml(topology);
  return kExitOk;
}

// `atp topology fat-tree` and its options.
CLI::App* add_fat_tree(CLI::App& topology, TopologyOptions& o) {
  CLI::App* fat = topology.add_subcommand("fat-tree",
                                          "a k-ary fat-tree: k pods of k/2 edge and k/2 aggregation "
                                          "switches, (k/2)^2 core switches");
  fat->add_option("--k", o.k, "switch radix: an even number, at least 2")->required();
  o.hosts_per_edge_flag =
      fat->add_option("--hosts-per-edge", o.hosts_per_edge, "hosts under each edge switch (default: k/2)");
  add_switch_flags(*fat, o);
  fat->footer(
      "Switches: core0.., then pod by pod agg<pod>_<i> and edge<pod>_<i>. Hosts: h<pod>_<edge>_<i> under "
      "edge<pod>_<edge>.\nLinks, pod by pod: [edge<pod>_<e>, agg<pod>_<a>] for every e and a, then [agg<pod>_<i>, "
      "core<i*k/2+j>] for j in 0..k/2-1.\n--ina tors: the edge switches.");
  return fat;
}

// `atp topology dragonfly` and its options.
CLI::App* add_dragonfly(CLI::App& topology, TopologyOptions& o) {
  CLI::App* fly = topology.add_subcommand(
      "dragonfly",
      "a balanced dragonfly: g = a*h+1 groups of a routers, all-to-all inside a group, one global link "
      "between every pair of groups");
  fly->add_option("--a", o.a, "routers per group")->required();
  fly->add_option("--h", o.h, "global links per router")->required();
  o.g_flag = fly->add_option("--g", o.g, "groups: must be a*h+1, the default");
  o.p_flag = fly->add_option("--p", o.p, "hosts per router (default: h)");
  add_switch_flags(*fly, o);
  fly->footer(
      "Switches: r<group>_<router>. Hosts: h<group>_<router>_<i> under r<group>_<router>.\nLinks: the local ones "
      "group by group ([r<grp>_<x>, r<grp>_<y>], x < y), then the global ones: group i's link j (0..a*h-1) leaves "
      "router j/h for group (i+j+1) mod g, listed once, from the lower group.\n--ina tors: every router.");
  return fly;
}

// `atp topology leaf-spine` and its options.
CLI::App* add_leaf_spine(CLI::App& topology, TopologyOptions& o) {
  CLI::App* ls = topology.add_subcommand("leaf-spine", "a two-tier leaf-spine: every leaf linked to every spine");
  ls->add_option("--leaves", o.leaves, "leaf switches")->required();
  ls->add_option("--spines", o.spines, "spine switches")->required();
  o.hosts_per_leaf_flag =
      ls->add_option("--hosts-per-leaf", o.hosts_per_leaf, "hosts under each leaf (default: spines)");
  add_switch_flags(*ls, o);
  ls->footer(
      "Switches: spine0.., then leaf0... Hosts: h<leaf>_<i> under leaf<leaf>.\nLinks: [leaf<l>, spine<s>], leaf by "
      "leaf.\n--ina tors: the leaves.");
  return ls;
}

}  // namespace

Command add_topology_command(CLI::App& parent) {
  auto o = std::make_shared<TopologyOptions>();
  Command c;
  c.app = parent.add_subcommand(
      "topology", "Print the topology: section of a scenario file for a fat-tree, dragonfly or leaf-spine network");
  c.app->require_subcommand(1);
  c.app->footer(
      "Switches only forward (atp: false) unless --ina picks the ones that aggregate. Switches, hosts and links "
      "come in a fixed order (hosts get their addresses in it, and routing breaks ties by it); each subcommand's "
      "--help has its names and order. Add jobs: (and link:, faults:) to make a scenario file for atp run.");

  CLI::App* fat = add_fat_tree(*c.app, *o);
  CLI::App* fly = add_dragonfly(*c.app, *o);
  CLI::App* ls = add_leaf_spine(*c.app, *o);

  c.run = [o, fat, fly, ls]() -> int {
    const auto n = [](std::uint32_t v) { return std::to_string(v); };
    if (fat->parsed()) {
      const std::optional<std::uint32_t> hosts = given(o->hosts_per_edge_flag, o->hosts_per_edge);
      return print_topology(
          "atp topology fat-tree", [&](const GeneratedSwitches& s) { return fat_tree(o->k, hosts, s); },
          [&] { return "--k " + n(o->k) + " --hosts-per-edge " + n(hosts.value_or(default_hosts_per_edge(o->k))); },
          *o);
    }
    if (fly->parsed()) {
      // Unset, g is the one value taken: balanced_groups. One that does not fit 32 bits is far too large, and
      // dragonfly() says so before it looks at g.
      const std::uint32_t g = o->g_flag->count() > 0 ? o->g : static_cast<std::uint32_t>(balanced_groups(o->a, o->h));
      const std::optional<std::uint32_t> p = given(o->p_flag, o->p);
      return print_topology(
          "atp topology dragonfly", [&](const GeneratedSwitches& s) { return dragonfly(o->a, g, o->h, p, s); },
          [&] {
            return "--a " + n(o->a) + " --g " + n(g) + " --h " + n(o->h) + " --p " +
                   n(p.value_or(default_hosts_per_router(o->h)));
          },
          *o);
    }
    const std::optional<std::uint32_t> hosts = given(o->hosts_per_leaf_flag, o->hosts_per_leaf);
    return print_topology(
        "atp topology leaf-spine",
        [&](const GeneratedSwitches& s) { return leaf_spine(o->leaves, o->spines, hosts, s); },
        [&] {
          return "--leaves " + n(o->leaves) + " --spines " + n(o->spines) + " --hosts-per-leaf " +
                 n(hosts.value_or(default_hosts_per_leaf(o->spines)));
        },
        *o);
  };
  return c;
}

}  // namespace atp::cli
