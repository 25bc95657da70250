// Reads a scenario file's `faults:` entries (link faults, host crashes, switch restarts, noise
// sources), each checked against the topology and jobs read before, and its `background:` flows.
#include <algorithm>
#include <optional>
#include <string>

#include "scenario_sections.h"
#include "yaml_fields.h"

namespace atp::scenario_detail {
namespace {

bool hosts_or_switches_linked(const Topology& t, const std::string& a, const std::string& b) {
  for (const auto& h : t.hosts) {
    if ((h.name == a && h.switch_name == b) || (h.name == b && h.switch_name == a)) return true;
  }
  for (const SwitchLink& l : t.switch_links) {
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return true;
  }
  return false;
}

// The key that says what kind of fault a faults[] entry is.
constexpr const char* kFaultKinds[] = {"link", "crash", "restart", "noise"};
constexpr const char* kFaultKindList =
    "'link' (a link fault), 'crash' (a host crash), 'restart' (a switch restart) or "
    "'noise' (a host sending bad packets)";

bool has_role(const Scenario& scenario, const std::string& host) {
  for (const auto& j : scenario.jobs) {
    for (const auto* hosts : {&j.spec.workers, &j.spec.ps}) {
      if (std::find(hosts->begin(), hosts->end(), host) != hosts->end()) return true;
    }
  }
  return false;
}

// `from_us:` and `until_us:`, which must come after it: when a fault, noise or flow is on.
void parse_interval(const YAML::Node& node, const std::string& path, Duration& from, std::optional<Duration>& until) {
  if (node["from_us"]) from = as_microseconds(node["from_us"], child(path, "from_us"), true);
  if (node["until_us"]) {
    until = as_microseconds(node["until_us"], child(path, "until_us"), true);
    if (*until <= from) fail(child(path, "until_us"), "must be after from_us");
  }
}

// `- link: [a, b]` and the settings it overrides on that link.
LinkFault parse_link_fault(const YAML::Node& node, const std::string& path, const Names& names,
                           const Scenario& scenario) {
  expect_map(node, path,
             {"link", "one_way", "loss", "duplicate", "reorder", "delay_us", "rate_gbps", "rate_mbps", "buffer_packets",
              "buffer_bytes", "ecn_threshold_packets", "from_us", "until_us"});
  const std::string p = child(path, "link");
  const YAML::Node l = node["link"];
  if (!l.IsSequence() || l.size() != 2) fail(p, "must be a pair of node names like [w0, tor0], got " + describe(l));
  LinkFault fault;
  fault.a = as_string(l[0], item(p, 0));
  fault.b = as_string(l[1], item(p, 1));
  for (std::size_t k = 0; k < 2; ++k) {
    const std::string& n = k == 0 ? fault.a : fault.b;
    if (!names.is_host(n) && !names.is_switch(n)) fail(item(p, k), "unknown host or switch '" + n + "'");
  }
  if (!hosts_or_switches_linked(scenario.topology, fault.a, fault.b)) {
    fail(p, "there is no link between '" + fault.a + "' and '" + fault.b + "'");
  }
  if (node["one_way"]) fault.one_way = as_bool(node["one_way"], child(path, "one_way"));
  parse_link_settings(node, path, fault.overrides, true);
  parse_interval(node, path, fault.from, fault.until);
  return fault;
}

// `- crash: HOST` at a round of its workers or at a time.
CrashFault parse_crash(const YAML::Node& node, const std::string& path, const Names& names, const Scenario& scenario) {
  expect_map(node, path, {"crash", "at_round", "at_us"});
  CrashFault crash;
  const std::string p = child(path, "crash");
  crash.host = as_string(node["crash"], p);
  if (names.is_switch(crash.host)) fail(p, "'" + crash.host + "' is a switch; only hosts can crash");
  if (!names.is_host(crash.host)) fail(p, "unknown host '" + crash.host + "'");
  if (node["at_round"] && node["at_us"]) fail(path, "must have either 'at_round' or 'at_us', not both");
  if (node["at_round"]) {
    crash.at_round = static_cast<std::uint32_t>(as_integer(node["at_round"], child(path, "at_round"), 0, kU32Max));
    bool runs_worker = false;
    for (const auto& j : scenario.jobs) {
      for (const auto& w : j.spec.workers) runs_worker = runs_worker || w == crash.host;
    }
    if (!runs_worker) fail(child(path, "at_round"), "host '" + crash.host + "' runs no worker; use at_us");
  } else if (node["at_us"]) {
    crash.at_time = as_microseconds(node["at_us"], child(path, "at_us"), true);
  } else {
    fail(path, "a crash needs 'at_round' (0-based) or 'at_us'");
  }
  return crash;
}

// `- restart: SWITCH` at a time, down for a while.
SwitchRestart parse_restart(const YAML::Node& node, const std::string& path, const Names& names) {
  expect_map(node, path, {"restart", "at_us", "down_us"});
  SwitchRestart restart;
  const std::string p = child(path, "restart");
  restart.switch_name = as_string(node["restart"], p);
  if (!names.is_switch(restart.switch_name)) fail(p, "unknown switch '" + restart.switch_name + "'");
  require(node, path, "at_us");
  restart.at = as_microseconds(node["at_us"], child(path, "at_us"), true);
  if (node["down_us"]) restart.down = as_microseconds(node["down_us"], child(path, "down_us"), true);
  return restart;
}

// `- noise: HOST`: a host of no job, under an ATP switch, sending bad packets.
NoiseSource parse_noise(const YAML::Node& node, const std::string& path, const Names& names, const Scenario& scenario) {
  expect_map(node, path, {"noise", "rate_pps", "from_us", "until_us"});
  NoiseSource noise;
  const std::string p = child(path, "noise");
  noise.host = as_string(node["noise"], p);
  if (names.is_switch(noise.host)) fail(p, "'" + noise.host + "' is a switch; noise comes from a host");
  if (!names.is_host(noise.host)) fail(p, "unknown host '" + noise.host + "'");
  if (has_role(scenario, noise.host)) {
    fail(p, "host '" + noise.host + "' is a worker or PS of a job; noise needs a host of its own");
  }
  // Admission (which ports a job's packets may arrive on) is checked by ATP switches only; a
  // plain switch forwards spoofed packets to the jobs' hosts, which cannot tell them apart.
  const auto& hosts = scenario.topology.hosts;
  const auto host = std::find_if(hosts.begin(), hosts.end(), [&](const HostSpec& h) { return h.name == noise.host; });
  const auto& switches = scenario.topology.switches;
  const auto tor = std::find_if(switches.begin(), switches.end(),
                                [&](const SwitchSpec& sw) { return sw.name == host->switch_name; });
  if (!tor->config.atp_capable) {
    fail(p, "host '" + noise.host + "' is under switch '" + tor->name +
                "', which has atp: false; only ATP switches check where a job's packets come from, so "
                "noise must enter at one");
  }
  if (node["rate_pps"]) {
    noise.rate_pps = as_number(node["rate_pps"], child(path, "rate_pps"), 1, 1e6, "packets per second, 1 to 1e6");
  }
  parse_interval(node, path, noise.from, noise.until);
  return noise;
}

}  // namespace

void parse_fault(const YAML::Node& node, const std::string& path, const Names& names, Scenario& scenario) {
  if (!node.IsMap()) fail(path, std::string("must be a map with ") + kFaultKindList + ", got " + describe(node));
  int kinds = 0;
  for (const char* k : kFaultKinds) kinds += node[k] ? 1 : 0;
  if (kinds > 1) fail(path, std::string("must have exactly one of ") + kFaultKindList);
  if (node["link"]) {
    scenario.link_faults.push_back(parse_link_fault(node, path, names, scenario));
  } else if (node["crash"]) {
    scenario.crashes.push_back(parse_crash(node, path, names, scenario));
  } else if (node["restart"]) {
    scenario.restarts.push_back(parse_restart(node, path, names));
  } else if (node["noise"]) {
    scenario.noise.push_back(parse_noise(node, path, names, scenario));
  } else {
    fail(path, std::string("must have one of ") + kFaultKindList);
  }
}

BackgroundFlow parse_background(const YAML::Node& node, const std::string& path, const Names& names) {
  expect_map(node, path, {"from", "to", "kind", "from_us", "until_us", "congestion", "ecn"});
  require(node, path, "from");
  require(node, path, "to");
  BackgroundFlow flow;
  for (auto [key, field] : {std::pair{"from", &flow.from}, std::pair{"to", &flow.to}}) {
    *field = as_string(node[key], child(path, key));
    if (!names.is_host(*field)) fail(child(path, key), "unknown host '" + *field + "'");
  }
  if (flow.from == flow.to) fail(child(path, "to"), "a flow needs two different hosts");
  if (node["kind"]) {
    const std::string kind = as_string(node["kind"], child(path, "kind"));
    if (kind != "tcp")
      fail(child(path, "kind"), "must be tcp (the only kind of background traffic), got '" + kind + "'");
  }
  if (node["congestion"]) {
    flow.congestion = as_string(node["congestion"], child(path, "congestion"));
    if (std::find(std::begin(kFlowCongestionControls), std::end(kFlowCongestionControls), flow.congestion) ==
        std::end(kFlowCongestionControls))
      fail(child(path, "congestion"), "must be cubic, reno or bbr, got '" + flow.congestion + "'");
  }
  if (node["ecn"]) flow.ecn = as_bool(node["ecn"], child(path, "ecn"));
  parse_interval(node, path, flow.start, flow.until);
  return flow;
}

}  // namespace atp::scenario_detail
