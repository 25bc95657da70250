// Reads a scenario file's network: `topology:` (switches, hosts, switch-to-switch links, which
// must connect every switch) and `link:`, the settings of every link, which link faults override.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "atp/io/egress_fields.h"
#include "atp/values_per_packet.h"
#include "scenario_sections.h"
#include "yaml_fields.h"

namespace atp::scenario_detail {
namespace {

void claim_name(Names& names, const std::string& name, const std::string& path) {
  if (names.is_switch(name) || names.is_host(name)) fail(path, "the name '" + name + "' is already used");
}

// `topology.switches[i]`, at `p`.
SwitchSpec parse_switch(const YAML::Node& s, const std::string& p, Names& names) {
  expect_map(s, p, {"name", "atp", "aggregators", "width", "reclaim_timeout_us"});
  require(s, p, "name");
  SwitchSpec spec;
  spec.name = as_string(s["name"], child(p, "name"));
  claim_name(names, spec.name, child(p, "name"));
  names.switches.insert(spec.name);
  if (s["atp"]) spec.config.atp_capable = as_bool(s["atp"], child(p, "atp"));
  if (s["aggregators"]) {
    spec.config.num_aggregators =
        static_cast<std::uint32_t>(as_integer(s["aggregators"], child(p, "aggregators"), 1, 1u << 24));
  }
  if (s["width"]) {
    spec.config.aggregator_width =
        static_cast<std::uint16_t>(as_integer(s["width"], child(p, "width"), 1, kMaxValuesPerPacket));
  }
  if (s["reclaim_timeout_us"]) {
    // 0: never reclaim (the authors' code has no timer), to show what a dead job leaves behind.
    // At most what a switch daemon's config takes (the process backends write it there).
    const std::string key = child(p, "reclaim_timeout_us");
    spec.config.reclaim_timeout = as_microseconds(s["reclaim_timeout_us"], key, true);
    if (spec.config.reclaim_timeout > std::chrono::microseconds(kMaxReclaimTimeoutUs)) {
      fail(key, "must be at most " + std::to_string(kMaxReclaimTimeoutUs) + " microseconds, got " +
                    describe(s["reclaim_timeout_us"]));
    }
  }
  return spec;
}

// `topology.hosts[i]`, at `p`: a host under one of the switches read before.
HostSpec parse_host(const YAML::Node& h, const std::string& p, Names& names) {
  expect_map(h, p, {"name", "switch"});
  require(h, p, "name");
  require(h, p, "switch");
  HostSpec spec;
  spec.name = as_string(h["name"], child(p, "name"));
  claim_name(names, spec.name, child(p, "name"));
  spec.switch_name = as_string(h["switch"], child(p, "switch"));
  if (!names.is_switch(spec.switch_name)) fail(child(p, "switch"), "unknown switch '" + spec.switch_name + "'");
  names.hosts.insert(spec.name);
  return spec;
}

// `topology.links[i]`, at `p`: a pair of switches, not linked before (`seen`).
SwitchLink parse_switch_link(const YAML::Node& l, const std::string& p, const Names& names,
                             std::set<std::pair<std::string, std::string>>& seen) {
  if (!l.IsSequence() || l.size() != 2) fail(p, "must be a pair of switch names like [tor0, core], got " + describe(l));
  std::string a = as_string(l[0], item(p, 0));
  std::string b = as_string(l[1], item(p, 1));
  for (std::size_t k = 0; k < 2; ++k) {
    const std::string& n = k == 0 ? a : b;
    if (names.is_host(n)) {
      fail(item(p, k), "'" + n +
                           "' is a host; hosts are linked to their switch automatically, list only "
                           "switch-to-switch links");
    }
    if (!names.is_switch(n)) fail(item(p, k), "unknown switch '" + n + "'");
  }
  if (a == b) fail(p, "a switch cannot be linked to itself ('" + a + "')");
  if (!seen.insert(std::minmax(a, b)).second) fail(p, "duplicate link between '" + a + "' and '" + b + "'");
  return {std::move(a), std::move(b)};
}

std::string tree_root(std::map<std::string, std::string>& parent, std::string n) {
  while (parent.at(n) != n) n = parent.at(n) = parent.at(parent.at(n));
  return n;
}

// Fails at `links_path` unless the switch links connect every switch to the first. Cycles are
// fine (fat-trees, dragonflies): routes are shortest paths, ties broken by link order.
void check_connected(const Topology& topology, const std::string& links_path) {
  std::map<std::string, std::string> parent;  // union-find over switch names
  for (const auto& sw : topology.switches) parent[sw.name] = sw.name;
  for (const SwitchLink& l : topology.switch_links) {
    const std::string ra = tree_root(parent, l.a), rb = tree_root(parent, l.b);
    if (ra != rb) parent[ra] = rb;
  }
  const std::string& first = topology.switches.front().name;
  for (const auto& sw : topology.switches) {
    if (tree_root(parent, sw.name) != tree_root(parent, first)) {
      fail(links_path, "switch '" + sw.name + "' is not connected to switch '" + first +
                           "'; switch-to-switch links must connect every switch");
    }
  }
}

}  // namespace

Topology parse_topology(const YAML::Node& node, const std::string& path, Names& names) {
  expect_map(node, path, {"switches", "hosts", "links"});
  require(node, path, "switches");
  require(node, path, "hosts");
  Topology topology;
  const std::string switches_path = child(path, "switches");
  const YAML::Node switches = expect_list(node["switches"], switches_path, true);
  for (std::size_t i = 0; i < switches.size(); ++i) {
    topology.switches.push_back(parse_switch(switches[i], item(switches_path, i), names));
  }
  const std::string hosts_path = child(path, "hosts");
  const YAML::Node hosts = expect_list(node["hosts"], hosts_path, true);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    topology.hosts.push_back(parse_host(hosts[i], item(hosts_path, i), names));
  }
  const std::string links_path = child(path, "links");
  if (node["links"]) {
    const YAML::Node links = expect_list(node["links"], links_path, false);
    std::set<std::pair<std::string, std::string>> seen;
    for (std::size_t i = 0; i < links.size(); ++i) {
      topology.switch_links.push_back(parse_switch_link(links[i], item(links_path, i), names, seen));
    }
  }
  check_connected(topology, links_path);
  return topology;
}

// Each key is checked by the one table of EgressConfig's settings (egress_fields.h); rate_mbps is
// the scenarios' own spelling of rate_gbps.
void parse_link_settings(const YAML::Node& node, const std::string& path, LinkOverrides& o, bool faults_allowed) {
  if (node["rate_gbps"] && node["rate_mbps"]) fail(path, "has both rate_gbps and rate_mbps; give one");
  EgressConfig read;  // the settings present, in EgressConfig's units
  std::set<std::string_view> present;
  for (const EgressField& f : kEgressFields) {
    const bool fault = f.key == "loss" || f.key == "duplicate" || f.key == "reorder";
    const YAML::Node value = node[std::string(f.key)];
    if (!value || (fault && !faults_allowed)) continue;
    double v = 0;
    const std::optional<std::string> bad = value.IsScalar() && parse_double(value.Scalar(), v)
                                               ? egress_value_error(f, v)
                                               : "must be " + std::string(f.expected);
    if (bad) fail(child(path, std::string(f.key)), *bad + ", got " + describe(value));
    f.set(read, v);
    present.insert(f.key);
  }
  if (present.contains("delay_us")) o.delay = read.delay;
  if (present.contains("rate_gbps")) o.rate_gbps = read.rate_gbps;
  if (node["rate_mbps"]) {
    o.rate_gbps = as_number(node["rate_mbps"], child(path, "rate_mbps"), 0, kMaxPortRateGbps * 1000,
                            "a number of Mbit/s between 0 (unlimited) and 1000000000") /
                  1000;
  }
  if (present.contains("buffer_packets")) o.buffer_packets = read.buffer_packets;
  if (present.contains("buffer_bytes")) o.buffer_bytes = read.buffer_bytes;
  if (present.contains("ecn_threshold_packets")) o.ecn_threshold_packets = read.ecn_threshold_packets;
  if (present.contains("loss")) o.loss = read.loss;
  if (present.contains("duplicate")) o.duplicate = read.duplicate;
  if (present.contains("reorder")) o.reorder = read.reorder;
}

void parse_default_link(const YAML::Node& node, const std::string& path, Scenario& scenario) {
  expect_map(
      node, path,
      {"delay_us", "rate_gbps", "rate_mbps", "buffer_packets", "buffer_bytes", "ecn_threshold_packets", "mtu_bytes"});
  parse_link_settings(node, path, scenario.link, false);
  if (node["mtu_bytes"]) {
    scenario.mtu_bytes = static_cast<std::uint32_t>(
        as_integer(node["mtu_bytes"], child(path, "mtu_bytes"), kMinScenarioMtuBytes, kMaxScenarioMtuBytes));
  }
}

}  // namespace atp::scenario_detail
