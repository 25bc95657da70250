// Fat-tree, dragonfly and leaf-spine topologies in the order topologies.h documents, and the YAML
// writer of a scenario file's `topology:` section.
#include "atp/scenario/topologies.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include "atp/switch.h"
#include "saturating.h"

namespace atp {
namespace {

constexpr std::uint32_t kMaxAggregators = 1u << 24;  // what a scenario file's `aggregators:` takes
constexpr std::uint64_t kMaxSwitchPorts = std::numeric_limits<PortId>::max();

using scenario_detail::saturating_add;
using scenario_detail::saturating_mul;

std::string flag(const char* name, std::uint64_t value) { return std::string(name) + " " + std::to_string(value); }

void require_positive(const char* name, std::uint32_t value) {
  if (value == 0) throw std::invalid_argument(std::string(name) + " must be at least 1, got 0");
}

void check_switches(const GeneratedSwitches& s) {
  if (!s.aggregators) return;
  if (*s.aggregators < 1 || *s.aggregators > kMaxAggregators) {
    throw std::invalid_argument("--aggregators must be between 1 and " + std::to_string(kMaxAggregators) + ", got " +
                                std::to_string(*s.aggregators));
  }
  if (s.ina == InaSwitches::kNone) {
    throw std::invalid_argument(
        "--aggregators needs --ina all or --ina tors: a switch with atp: false holds no aggregators");
  }
}

// `elements`: switches, hosts and switch links together; `flags`: the parameters that gave them.
void check_size(const std::string& flags, std::uint64_t elements) {
  if (elements > kMaxGeneratedElements) {
    // The counts saturate: the largest value stands for any that does not fit 64 bits.
    const bool saturated = elements == std::numeric_limits<std::uint64_t>::max();
    throw std::invalid_argument(flags + " gives " + (saturated ? "over 2^64" : std::to_string(elements)) +
                                " switches, hosts and links, more than the " + std::to_string(kMaxGeneratedElements) +
                                " a generated topology may have");
  }
}

// `ports`: of each of the switches `which` names ("each leaf"), hosts and links.
void check_ports(const std::string& flags, const char* which, std::uint64_t ports) {
  if (ports > kMaxSwitchPorts) {
    throw std::invalid_argument(flags + " gives " + which + " " + std::to_string(ports) + " ports, more than the " +
                                std::to_string(kMaxSwitchPorts) + " a switch has (port numbers are 16 bits)");
  }
}

// Appends switches, hosts and links to one topology, each switch INA-capable or not as `switches`
// says of its kind.
class TopologyBuilder {
 public:
  TopologyBuilder(const GeneratedSwitches& switches, std::uint64_t switch_count, std::uint64_t host_count,
                  std::uint64_t link_count)
      : switches_(switches) {
    topology_.switches.reserve(switch_count);
    topology_.hosts.reserve(host_count);
    topology_.switch_links.reserve(link_count);
  }

  // `tor`: hosts hang under it (an edge switch, a leaf, a dragonfly router).
  void add_switch(std::string name, bool tor) {
    SwitchSpec spec{.name = std::move(name), .config = {}};
    spec.config.atp_capable = switches_.ina == InaSwitches::kAll || (switches_.ina == InaSwitches::kTors && tor);
    if (spec.config.atp_capable && switches_.aggregators) spec.config.num_aggregators = *switches_.aggregators;
    topology_.switches.push_back(std::move(spec));
  }
  void add_host(std::string name, const std::string& switch_name) {
    topology_.hosts.push_back({.name = std::move(name), .switch_name = switch_name});
  }
  void add_link(const std::string& a, const std::string& b) { topology_.switch_links.push_back({.a = a, .b = b}); }

  Topology take() { return std::move(topology_); }

 private:
  GeneratedSwitches switches_;
  Topology topology_;
};

// A name YAML reads back as the same string without quotes: a letter or '_', then letters,
// digits, '_', '.' or '-', and not one of the words a plain scalar would make null.
bool plain_yaml_name(const std::string& s) {
  if (s.empty() || s == "null" || s == "Null" || s == "NULL") return false;
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!letter(s[0])) return false;
  for (char c : s) {
    if (!letter(c) && !(c >= '0' && c <= '9') && c != '.' && c != '-') return false;
  }
  return true;
}

std::string yaml_name(const std::string& s) {
  if (plain_yaml_name(s)) return s;
  std::string out = "\"";
  for (char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      constexpr const char* kHex = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;  // UTF-8 bytes pass as they are
    }
  }
  return out + "\"";
}

// Nanoseconds as the microseconds a scenario file writes, exactly: "100000", "1.5", "0.001".
std::string microseconds_text(Duration d) {
  const std::int64_t ns = d.count() > 0 ? d.count() : 0;  // zero or less: never, written 0
  std::string out = std::to_string(ns / 1000);
  std::int64_t frac = ns % 1000;
  if (frac == 0) return out;
  std::string digits = std::to_string(frac + 1000).substr(1);  // three digits, leading zeros kept
  while (digits.back() == '0') digits.pop_back();
  return out + "." + digits;
}

}  // namespace

InaSwitches parse_ina_switches(std::string_view text) {
  if (text == "none") return InaSwitches::kNone;
  if (text == "all") return InaSwitches::kAll;
  if (text == "tors") return InaSwitches::kTors;
  throw std::invalid_argument("--ina must be none, all or tors, got '" + std::string(text) + "'");
}

std::string_view to_string(InaSwitches ina) {
  switch (ina) {
    case InaSwitches::kNone:
      return "none";
    case InaSwitches::kAll:
      return "all";
    case InaSwitches::kTors:
      return "tors";
  }
  return "none";
}

Topology fat_tree(std::uint32_t k, std::optional<std::uint32_t> hosts_per_edge, const GeneratedSwitches& switches) {
  if (k < 2 || k % 2 != 0)
    throw std::invalid_argument("--k must be an even number of at least 2, got " + std::to_string(k));
  const std::uint32_t half = k / 2;
  const std::uint32_t hosts = hosts_per_edge.value_or(default_hosts_per_edge(k));
  require_positive("--hosts-per-edge", hosts);
  check_switches(switches);
  const std::string flags = flag("--k", k) + " " + flag("--hosts-per-edge", hosts);
  const std::uint64_t half_squared = std::uint64_t{half} * half;
  const std::uint64_t switch_count = saturating_add(half_squared, std::uint64_t{k} * k);
  const std::uint64_t host_count = saturating_mul(std::uint64_t{k} * half, hosts);
  const std::uint64_t link_count = saturating_mul(2 * half_squared, k);  // edge-agg and agg-core, k pods
  check_size(flags, saturating_add(saturating_add(switch_count, host_count), link_count));
  check_ports(flags, "each edge switch", std::uint64_t{half} + hosts);

  TopologyBuilder b(switches, switch_count, host_count, link_count);
  const auto core = [](std::uint64_t c) { return "core" + std::to_string(c); };
  const auto in_pod = [](const char* kind, std::uint32_t pod, std::uint32_t i) {
    return kind + std::to_string(pod) + "_" + std::to_string(i);
  };
  for (std::uint64_t c = 0; c < half_squared; ++c) b.add_switch(core(c), false);
  for (std::uint32_t pod = 0; pod < k; ++pod) {
    for (std::uint32_t i = 0; i < half; ++i) b.add_switch(in_pod("agg", pod, i), false);
    for (std::uint32_t i = 0; i < half; ++i) b.add_switch(in_pod("edge", pod, i), true);
  }
  for (std::uint32_t pod = 0; pod < k; ++pod) {
    for (std::uint32_t e = 0; e < half; ++e) {
      const std::string edge = in_pod("edge", pod, e);
      for (std::uint32_t i = 0; i < hosts; ++i) {
        b.add_host("h" + std::to_string(pod) + "_" + std::to_string(e) + "_" + std::to_string(i), edge);
      }
    }
  }
  for (std::uint32_t pod = 0; pod < k; ++pod) {
    for (std::uint32_t e = 0; e < half; ++e) {
      for (std::uint32_t a = 0; a < half; ++a) b.add_link(in_pod("edge", pod, e), in_pod("agg", pod, a));
    }
    for (std::uint32_t a = 0; a < half; ++a) {
      for (std::uint32_t j = 0; j < half; ++j) b.add_link(in_pod("agg", pod, a), core(std::uint64_t{a} * half + j));
    }
  }
  return b.take();
}

Topology dragonfly(std::uint32_t a, std::uint32_t g, std::uint32_t h, std::optional<std::uint32_t> p,
                   const GeneratedSwitches& switches) {
  require_positive("--a", a);
  require_positive("--h", h);
  const std::uint32_t hosts = p.value_or(default_hosts_per_router(h));
  require_positive("--p", hosts);
  check_switches(switches);
  // Sized with the balanced g before g is checked, so that parameters far too large are refused
  // as such even where a*h + 1 does not fit a 32-bit g.
  const std::uint64_t global_per_group = std::uint64_t{a} * h;
  const std::uint64_t groups = balanced_groups(a, h);
  const std::string flags =
      flag("--a", a) + " " + flag("--g", groups) + " " + flag("--h", h) + " " + flag("--p", hosts);
  const std::uint64_t router_count = saturating_mul(a, groups);
  const std::uint64_t host_count = saturating_mul(router_count, hosts);
  const std::uint64_t local_count = saturating_mul(groups, std::uint64_t{a} * (a - 1) / 2);
  const std::uint64_t global_count = saturating_mul(groups, global_per_group) / 2;  // g*(g-1)/2: each pair once
  const std::uint64_t link_count = saturating_add(local_count, global_count);
  check_size(flags, saturating_add(saturating_add(router_count, host_count), link_count));
  check_ports(flags, "each router", std::uint64_t{a} - 1 + h + hosts);
  if (g != groups) {
    throw std::invalid_argument(
        "--g must be a*h + 1 = " + std::to_string(groups) + " for " + flag("--a", a) + " " + flag("--h", h) +
        " (the balanced dragonfly: one global link between every pair of groups), got " + std::to_string(g));
  }

  TopologyBuilder b(switches, router_count, host_count, link_count);
  const auto router = [](std::uint64_t group, std::uint64_t r) {
    return "r" + std::to_string(group) + "_" + std::to_string(r);
  };
  for (std::uint32_t group = 0; group < g; ++group) {
    for (std::uint32_t r = 0; r < a; ++r) b.add_switch(router(group, r), true);
  }
  for (std::uint32_t group = 0; group < g; ++group) {
    for (std::uint32_t r = 0; r < a; ++r) {
      for (std::uint32_t i = 0; i < hosts; ++i) {
        b.add_host("h" + std::to_string(group) + "_" + std::to_string(r) + "_" + std::to_string(i), router(group, r));
      }
    }
  }
  for (std::uint32_t group = 0; group < g; ++group) {
    for (std::uint32_t x = 0; x < a; ++x) {
      for (std::uint32_t y = x + 1; y < a; ++y) b.add_link(router(group, x), router(group, y));
    }
  }
  // Group i reaches group (i + j + 1) mod g on its link j: with g = a*h + 1 its links 0..g-2 reach
  // every other group once, and from there group k's link (i - k - 1) mod g comes back to i.
  for (std::uint64_t i = 0; i < g; ++i) {
    for (std::uint64_t j = 0; j < global_per_group; ++j) {
      const std::uint64_t k = (i + j + 1) % g;
      if (k < i) continue;  // listed from group k
      const std::uint64_t far = (i + g - k - 1) % g;
      b.add_link(router(i, j / h), router(k, far / h));
    }
  }
  return b.take();
}

Topology leaf_spine(std::uint32_t leaves, std::uint32_t spines, std::optional<std::uint32_t> hosts_per_leaf,
                    const GeneratedSwitches& switches) {
  require_positive("--leaves", leaves);
  require_positive("--spines", spines);
  const std::uint32_t hosts = hosts_per_leaf.value_or(default_hosts_per_leaf(spines));
  require_positive("--hosts-per-leaf", hosts);
  check_switches(switches);
  const std::string flags =
      flag("--leaves", leaves) + " " + flag("--spines", spines) + " " + flag("--hosts-per-leaf", hosts);
  const std::uint64_t switch_count = std::uint64_t{leaves} + spines;
  const std::uint64_t host_count = std::uint64_t{leaves} * hosts;
  const std::uint64_t link_count = std::uint64_t{leaves} * spines;
  check_size(flags, switch_count + host_count + link_count);
  check_ports(flags, "each leaf", std::uint64_t{spines} + hosts);
  check_ports(flags, "each spine", leaves);

  TopologyBuilder b(switches, switch_count, host_count, link_count);
  for (std::uint32_t s = 0; s < spines; ++s) b.add_switch("spine" + std::to_string(s), false);
  for (std::uint32_t l = 0; l < leaves; ++l) b.add_switch("leaf" + std::to_string(l), true);
  for (std::uint32_t l = 0; l < leaves; ++l) {
    for (std::uint32_t i = 0; i < hosts; ++i) {
      b.add_host("h" + std::to_string(l) + "_" + std::to_string(i), "leaf" + std::to_string(l));
    }
  }
  for (std::uint32_t l = 0; l < leaves; ++l) {
    for (std::uint32_t s = 0; s < spines; ++s) b.add_link("leaf" + std::to_string(l), "spine" + std::to_string(s));
  }
  return b.take();
}

std::string topology_yaml(const Topology& topology) {
  const SwitchConfig defaults;
  std::string out = "topology:\n";
  out += topology.switches.empty() ? "  switches: []\n" : "  switches:\n";
  for (const SwitchSpec& s : topology.switches) {
    out += "    - {name: " + yaml_name(s.name) + ", atp: " + (s.config.atp_capable ? "true" : "false");
    if (s.config.num_aggregators != defaults.num_aggregators) {
      out += ", aggregators: " + std::to_string(s.config.num_aggregators);
    }
    if (s.config.aggregator_width != defaults.aggregator_width) {
      out += ", width: " + std::to_string(s.config.aggregator_width);
    }
    if (s.config.reclaim_timeout != defaults.reclaim_timeout) {
      out += ", reclaim_timeout_us: " + microseconds_text(s.config.reclaim_timeout);
    }
    out += "}\n";
  }
  out += topology.hosts.empty() ? "  hosts: []\n" : "  hosts:\n";
  for (const HostSpec& h : topology.hosts) {
    if (h.attached) {
      throw std::invalid_argument("host '" + h.name +
                                  "' is attached to a running switch, which a scenario file has no key for");
    }
    out += "    - {name: " + yaml_name(h.name) + ", switch: " + yaml_name(h.switch_name) + "}\n";
  }
  out += topology.switch_links.empty() ? "  links: []\n" : "  links:\n";
  for (const SwitchLink& l : topology.switch_links) {
    if (l.ports) {
      throw std::invalid_argument("the link between '" + l.a + "' and '" + l.b +
                                  "' has its ports set, which a scenario file has no key for");
    }
    out += "    - [" + yaml_name(l.a) + ", " + yaml_name(l.b) + "]\n";
  }
  return out;
}

}  // namespace atp
