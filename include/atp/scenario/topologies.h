// Generated topologies for scenario files (fat-tree, dragonfly, leaf-spine, each with its hosts) in
// a fixed, documented order, and the `topology:` section of a scenario file that describes one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "atp/plan/plan.h"

namespace atp {

// Which switches of a generated topology aggregate (SwitchConfig::atp_capable).
enum class InaSwitches {
  kNone,  // none: every switch only forwards (atp: false); a scenario or a tool picks the INA ones
  kAll,   // every switch
  kTors,  // the switches hosts hang under: fat-tree edge switches, leaves, every dragonfly router
};

// "none", "all" or "tors"; anything else throws std::invalid_argument naming --ina.
InaSwitches parse_ina_switches(std::string_view text);
std::string_view to_string(InaSwitches ina);

// The settings every generator gives its switches.
struct GeneratedSwitches {
  InaSwitches ina = InaSwitches::kNone;
  // Of each INA switch, 1..2^24 (a scenario file's range). Unset: SwitchConfig's default. Only
  // with INA switches: one that only forwards holds no table.
  std::optional<std::uint32_t> aggregators;
};

// The largest generated topology, in switches, hosts and switch links together: a k = 160
// fat-tree has 3.1 million. Its YAML is about 40 bytes an element, so the cap keeps what is
// printed under about 170 MB and refuses a mistyped parameter before memory runs out.
inline constexpr std::uint64_t kMaxGeneratedElements = std::uint64_t{1} << 22;

// The parameters a generator fills in when they are left out (what `atp topology` prints them as):
// a fat-tree's k/2 hosts under each edge switch, a dragonfly's a*h + 1 groups and h hosts under
// each router, a leaf-spine's as many hosts under a leaf as it has spines.
inline std::uint32_t default_hosts_per_edge(std::uint32_t k) { return k / 2; }
inline std::uint64_t balanced_groups(std::uint32_t a, std::uint32_t h) { return std::uint64_t{a} * h + 1; }
inline std::uint32_t default_hosts_per_router(std::uint32_t h) { return h; }
inline std::uint32_t default_hosts_per_leaf(std::uint32_t spines) { return spines; }

// Every generator throws std::invalid_argument, one sentence naming the `atp topology` flag and
// its rule, for parameters out of range, a topology of more than kMaxGeneratedElements elements
// and a switch of more than 65535 ports (port numbers are 16 bits). Switches, hosts and switch links come in the
// order each generator documents: plan_network numbers host addresses and ports in it, and
// routing breaks ties between equal paths by it. Every switch link is listed once, the lower tier
// first.

// A k-ary fat-tree (Al-Fares et al., SIGCOMM'08): k even, at least 2. Switches: the (k/2)^2 core
// switches core0 .. core<(k/2)^2 - 1>, then pod by pod (0 .. k-1) its k/2 aggregation switches
// agg<pod>_<i> and its k/2 edge switches edge<pod>_<i>. Hosts: h<pod>_<edge>_<i> under
// edge<pod>_<edge>, hosts_per_edge of each (unset: k/2), in pod, edge, i order. Links, pod by
// pod: every [edge<pod>_<e>, agg<pod>_<a>] (e, then a), then every [agg<pod>_<i>, core<c>] with
// c = i * k/2 + j for j in 0 .. k/2-1 (i, then j).
Topology fat_tree(std::uint32_t k, std::optional<std::uint32_t> hosts_per_edge = std::nullopt,
                  const GeneratedSwitches& switches = {});

// A dragonfly (Kim et al., ISCA'08) of g groups of a routers each, with h global links per
// router: the balanced arrangement, g = a*h + 1, where every pair of groups has exactly one
// global link (other g are refused: there some pairs would share several or none). Switches:
// r<group>_<router>, group by group. Hosts: h<group>_<router>_<i>, p under each router (unset: h,
// the balanced dragonfly's a = 2p = 2h), in group, router, i order. Links: the local ones first,
// group by group, every [r<grp>_<x>, r<grp>_<y>] with x < y (x, then y); then the global ones:
// group i's global link j (0 .. a*h-1) leaves router j/h for group k = (i + j + 1) mod g, where
// it is group k's link j' = (i - k - 1) mod g, on router j'/h. Each is listed once, from its
// lower group, by that group's i, then j.
Topology dragonfly(std::uint32_t a, std::uint32_t g, std::uint32_t h, std::optional<std::uint32_t> p = std::nullopt,
                   const GeneratedSwitches& switches = {});

// A two-tier leaf-spine (folded Clos): every leaf linked to every spine. Switches: spine0 ..
// spine<spines-1>, then leaf0 .. leaf<leaves-1>. Hosts: h<leaf>_<i>, hosts_per_leaf under each
// leaf (unset: spines, as many host ports as uplinks), in leaf, i order. Links: [leaf<l>,
// spine<s>], l, then s.
Topology leaf_spine(std::uint32_t leaves, std::uint32_t spines,
                    std::optional<std::uint32_t> hosts_per_leaf = std::nullopt, const GeneratedSwitches& switches = {});

// The `topology:` section of a scenario file that describes `topology` (parse_scenario_yaml reads
// it back as the same switches, hosts and links, in the same order), in the compact style of
// examples/: one flow map a switch or host, one [a, b] pair a link. A switch's atp is always
// written, aggregators, width and reclaim_timeout_us only where they differ from SwitchConfig's
// defaults. Names YAML would read as something else are double-quoted. Throws
// std::invalid_argument for what the format cannot say: a host's attachment, a link's ports.
std::string topology_yaml(const Topology& topology);

}  // namespace atp
