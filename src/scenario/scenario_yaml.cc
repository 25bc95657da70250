// Reads scenario files (YAML) into a Scenario and checks everything the file alone can tell:
// types, ranges, names, unknown keys. Every error is one sentence that starts with the key path.
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "atp/io/config_file.h"
#include "atp/io/egress_fields.h"
#include "atp/io/machine.h"
#include "atp/plink/aggregation.h"
#include "atp/plink/probing.h"
#include "atp/scenario/scenario.h"
#include "atp/values_per_packet.h"
#include "saturating.h"

namespace atp {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw ScenarioError((path.empty() ? std::string("scenario") : path) + ": " + what);
}

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

// How a value that has the wrong type looks, for "..., got X".
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return node.Scalar().empty() ? std::string("an empty string") : node.Scalar();
    default:
      return "an undefined value";
  }
}

// Checks that `node` is a map whose keys are all in `allowed`; the first other key is an error.
void expect_map(const YAML::Node& node, const std::string& path, std::initializer_list<const char*> allowed) {
  if (!node.IsMap()) fail(path, "must be a map, got " + describe(node));
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) fail(path, "keys must be plain names, got " + describe(kv.first));
    const std::string key = kv.first.Scalar();
    // yaml-cpp keeps the first of two equal keys; the second is almost always a mistake.
    if (!seen.insert(key).second) fail(child(path, key), "the key appears twice");
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(child(path, key), "unknown key (expected one of: " + list + ")");
    }
  }
}

std::string as_string(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar() || node.Scalar().empty()) fail(path, "must be a non-empty string, got " + describe(node));
  return node.Scalar();
}

bool parse_double(const std::string& text, double& out) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;  // YAML allows "+1.5"; from_chars does not
  auto [end, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && end == last && std::isfinite(out);
}

// An integer in [min, max]. Integral numbers written as floats (1e6) are accepted.
std::uint64_t as_integer(const YAML::Node& node, const std::string& path, std::uint64_t min, std::uint64_t max) {
  const char* kind = min >= 1 ? "a positive integer" : "a non-negative integer";
  if (!node.IsScalar()) fail(path, std::string("must be ") + kind + ", got " + describe(node));
  const std::string& text = node.Scalar();
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    double d = 0;
    if (!parse_double(text, d) || d < 0 || d != std::floor(d) || d >= 18446744073709551616.0) {
      fail(path, std::string("must be ") + kind + ", got " + describe(node));
    }
    value = static_cast<std::uint64_t>(d);
  }
  if (value < min) fail(path, std::string("must be ") + kind + ", got " + describe(node));
  if (value > max) fail(path, "must be at most " + std::to_string(max) + ", got " + describe(node));
  return value;
}

// A finite number in [min, max]; `kind` says what is expected ("a probability", ...).
double as_number(const YAML::Node& node, const std::string& path, double min, double max, const std::string& kind) {
  double value = 0;
  if (!node.IsScalar() || !parse_double(node.Scalar(), value) || value < min || value > max) {
    fail(path, "must be " + kind + ", got " + describe(node));
  }
  return value;
}

double as_positive(const YAML::Node& node, const std::string& path) {
  double value = as_number(node, path, 0, std::numeric_limits<double>::max(), "a positive number");
  if (value == 0) fail(path, "must be a positive number, got " + describe(node));
  return value;
}

bool as_bool(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) {
    const std::string& t = node.Scalar();
    if (t == "true" || t == "True" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "False" || t == "no" || t == "off") return false;
  }
  fail(path, "must be true or false, got " + describe(node));
}

// Microseconds (fractions allowed) as a Duration.
Duration as_microseconds(const YAML::Node& node, const std::string& path, bool allow_zero) {
  constexpr double kMaxUs = 9.0e12;  // about 104 days: far beyond any simulated run, fits int64 ns
  double us = as_number(node, path, 0, kMaxUs,
                        allow_zero ? "a non-negative number of microseconds" : "a positive number of microseconds");
  const Duration d(static_cast<std::int64_t>(std::llround(us * 1000.0)));  // the core counts nanoseconds
  if (!allow_zero && d <= Duration::zero()) {
    fail(path, "must be a positive number of microseconds (at least 0.001), got " + describe(node));
  }
  return d;
}

YAML::Node expect_list(const YAML::Node& node, const std::string& path, bool non_empty) {
  if (!node.IsSequence()) fail(path, "must be a list, got " + describe(node));
  if (non_empty && node.size() == 0) fail(path, "must not be empty");
  return node;
}

void require(const YAML::Node& map, const std::string& path, const char* key) {
  if (!map[key]) fail(path, std::string("missing required key '") + key + "'");
}

constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

// --- topology

struct Names {
  std::set<std::string> switches, hosts;
  bool is_switch(const std::string& n) const { return switches.count(n) != 0; }
  bool is_host(const std::string& n) const { return hosts.count(n) != 0; }
};

std::string tree_root(std::map<std::string, std::string>& parent, std::string n) {
  while (parent.at(n) != n) n = parent.at(n) = parent.at(parent.at(n));
  return n;
}

void claim_name(Names& names, const std::string& name, const std::string& path) {
  if (names.is_switch(name) || names.is_host(name)) fail(path, "the name '" + name + "' is already used");
}

Topology parse_topology(const YAML::Node& node, const std::string& path, Names& names) {
  expect_map(node, path, {"switches", "hosts", "links"});
  require(node, path, "switches");
  require(node, path, "hosts");
  Topology topology;

  const std::string switches_path = child(path, "switches");
  const YAML::Node switches = expect_list(node["switches"], switches_path, true);
  for (std::size_t i = 0; i < switches.size(); ++i) {
    const std::string p = item(switches_path, i);
    const YAML::Node s = switches[i];
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
    topology.switches.push_back(std::move(spec));
  }

  const std::string hosts_path = child(path, "hosts");
  const YAML::Node hosts = expect_list(node["hosts"], hosts_path, true);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string p = item(hosts_path, i);
    const YAML::Node h = hosts[i];
    expect_map(h, p, {"name", "switch"});
    require(h, p, "name");
    require(h, p, "switch");
    HostSpec spec;
    spec.name = as_string(h["name"], child(p, "name"));
    claim_name(names, spec.name, child(p, "name"));
    spec.switch_name = as_string(h["switch"], child(p, "switch"));
    if (!names.is_switch(spec.switch_name)) fail(child(p, "switch"), "unknown switch '" + spec.switch_name + "'");
    names.hosts.insert(spec.name);
    topology.hosts.push_back(std::move(spec));
  }

  std::map<std::string, std::string> parent;  // union-find over switch names: the connectivity check
  for (const auto& sw : topology.switches) parent[sw.name] = sw.name;
  if (node["links"]) {
    const std::string links_path = child(path, "links");
    const YAML::Node links = expect_list(node["links"], links_path, false);
    std::set<std::pair<std::string, std::string>> seen;
    for (std::size_t i = 0; i < links.size(); ++i) {
      const std::string p = item(links_path, i);
      const YAML::Node l = links[i];
      if (!l.IsSequence() || l.size() != 2) {
        fail(p, "must be a pair of switch names like [tor0, core], got " + describe(l));
      }
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
      // Cycles are fine (fat-trees, dragonflies): routes are shortest paths, ties broken by link order.
      const std::string ra = tree_root(parent, a), rb = tree_root(parent, b);
      if (ra != rb) parent[ra] = rb;
      topology.switch_links.push_back({std::move(a), std::move(b)});
    }
  }
  const std::string& first = topology.switches.front().name;
  for (const auto& sw : topology.switches) {
    if (tree_root(parent, sw.name) != tree_root(parent, first)) {
      fail(child(path, "links"), "switch '" + sw.name + "' is not connected to switch '" + first +
                                     "'; switch-to-switch links must connect every switch");
    }
  }
  return topology;
}

// --- link settings (defaults and fault overrides)

// Reads the keys of a link setting that are present in `node` into `o`, each checked by the
// one table of EgressConfig's settings (egress_fields.h); rate_mbps is the scenarios' own
// spelling of rate_gbps.
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

// `link:`: the settings of every link, and their MTU.
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

// --- jobs

std::vector<std::string> parse_host_list(const YAML::Node& node, const std::string& path, const Names& names) {
  const YAML::Node list = expect_list(node, path, true);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string p = item(path, i);
    std::string h = as_string(list[i], p);
    if (names.is_switch(h)) fail(p, "'" + h + "' is a switch, not a host");
    if (!names.is_host(h)) fail(p, "unknown host '" + h + "'");
    if (!seen.insert(h).second) fail(p, "host '" + h + "' is listed twice");
    out.push_back(std::move(h));
  }
  return out;
}

ScenarioJob parse_job(const YAML::Node& node, const std::string& path, std::size_t index, const Names& names,
                      ScenarioUse use) {
  expect_map(node, path,
             {"name",
              "workers",
              "ps",
              "elements",
              "rounds",
              "values_per_packet",
              "scale",
              "magnitude",
              "index",
              "congestion_control",
              "loss_recovery",
              "window",
              "max_window",
              "compute_us",
              "start_us",
              "rto_us",
              "progress_timeout_us",
              "initial_seq",
              "algorithm",
              "warmup_rounds",
              "grouping",
              "autotune",
              "connections"});
  require(node, path, "workers");
  // A testbed's jobs are the ranks of the user's command: it decides what it sums.
  if (use == ScenarioUse::kRun) require(node, path, "elements");
  const Algorithm* algorithm = &default_algorithm();
  if (node["algorithm"]) {
    const std::string p = child(path, "algorithm");
    const std::string name = as_string(node["algorithm"], p);
    algorithm = find_algorithm(name);
    if (algorithm == nullptr) fail(p, "must be " + algorithm_names() + ", got '" + name + "'");
  }
  ScenarioJob job =
      scenario_job(*algorithm, index, node["name"] ? as_string(node["name"], child(path, "name")) : std::string());
  JobSpec& spec = job.spec;
  spec.workers = parse_host_list(node["workers"], child(path, "workers"), names);
  if (job.algorithm->parameter_servers) {
    require(node, path, "ps");
    spec.ps = parse_host_list(node["ps"], child(path, "ps"), names);
  } else if (node["ps"]) {
    fail(child(path, "ps"), "algorithm " + std::string(job.algorithm->name) + " has no parameter server; remove ps");
  }
  for (std::size_t i = 0; i < spec.ps.size(); ++i) {
    for (const auto& w : spec.workers) {
      if (w == spec.ps[i] && spec.in_network_aggregation) {
        fail(item(child(path, "ps"), i), "host '" + w +
                                             "' is also a worker of this job; only algorithm ps (no in-network "
                                             "aggregation) may put a PS shard on a worker's host");
      }
    }
  }
  // A few GiB of float32 per worker is far beyond what an in-process run can hold.
  if (node["elements"]) job.elements = as_integer(node["elements"], child(path, "elements"), 1, std::uint64_t(1) << 30);
  if (job.algorithm->timed_calls != nullptr) {
    // The probe's rounds are its pairing rounds: every pair once.
    for (const char* key : {"rounds", "warmup_rounds"}) {
      if (node[key]) {
        fail(child(path, key), "algorithm " + std::string(job.algorithm->name) +
                                   " runs one round per pairing of its workers (every pair once); remove " + key);
      }
    }
    if (spec.workers.size() < 2) fail(child(path, "workers"), "a probe needs at least two workers");
    job.rounds = plink::probe_rounds(static_cast<int>(spec.workers.size()));
  }
  if (node["rounds"]) {
    job.rounds = static_cast<std::uint32_t>(as_integer(node["rounds"], child(path, "rounds"), 1, 1u << 20));
  }
  if (node["warmup_rounds"]) {
    job.warmup_rounds =
        static_cast<std::uint32_t>(as_integer(node["warmup_rounds"], child(path, "warmup_rounds"), 0, 1u << 20));
    if (job.warmup_rounds >= job.rounds) {
      fail(child(path, "warmup_rounds"), "must be fewer than rounds (" + std::to_string(job.rounds) + ")");
    }
  }
  if (node["values_per_packet"]) {
    const std::string p = child(path, "values_per_packet");
    const std::uint64_t values = as_integer(node["values_per_packet"], p, 0, std::numeric_limits<std::uint64_t>::max());
    if (const std::optional<std::string> bad = values_per_packet_error(values)) fail(p, *bad);  // the one check
    spec.values_per_packet = static_cast<std::uint16_t>(values);
  }
  if (node["scale"]) spec.scale = as_positive(node["scale"], child(path, "scale"));
  if (node["magnitude"]) {
    job.magnitude = as_number(node["magnitude"], child(path, "magnitude"), 0, 3.0e38,
                              "a non-negative number below the float32 maximum");
  }
  if (node["index"]) {
    const std::string p = child(path, "index");
    const std::string policy = as_string(node["index"], p);
    const std::optional<IndexPolicy> parsed = parse_index_policy(policy);
    if (!parsed) fail(p, "must be 'allocated', 'hashed', 'linear' or 'hashed_slots', got " + policy);
    spec.index_policy = *parsed;
  }
  if (node["loss_recovery"]) {
    const std::string p = child(path, "loss_recovery");
    const std::string recovery = as_string(node["loss_recovery"], p);
    if (recovery == "atp") {
      spec.loss_recovery = LossRecovery::kAtp;
    } else if (recovery == "timeout") {
      spec.loss_recovery = LossRecovery::kTimeoutOnly;
    } else {
      fail(p, "must be 'atp' or 'timeout', got " + recovery);
    }
  }
  if (node["congestion_control"]) {
    spec.congestion.enabled = as_bool(node["congestion_control"], child(path, "congestion_control"));
  }
  if (node["window"]) {
    spec.congestion.initial_window =
        static_cast<std::uint32_t>(as_integer(node["window"], child(path, "window"), 1, 1u << 20));
  }
  if (node["max_window"]) {
    spec.congestion.max_window =
        static_cast<std::uint32_t>(as_integer(node["max_window"], child(path, "max_window"), 1, 1u << 20));
  }
  if (const std::optional<std::string> bad = window_error(spec.congestion)) {
    fail(child(path, node["max_window"] ? "max_window" : "window"), *bad);
  }
  if (node["compute_us"]) job.compute_time = as_microseconds(node["compute_us"], child(path, "compute_us"), true);
  if (node["start_us"]) job.start_time = as_microseconds(node["start_us"], child(path, "start_us"), true);
  if (node["rto_us"]) spec.retransmit_timeout = as_microseconds(node["rto_us"], child(path, "rto_us"), false);
  if (node["progress_timeout_us"]) {
    spec.progress_timeout = as_microseconds(node["progress_timeout_us"], child(path, "progress_timeout_us"), false);
  }
  if (node["initial_seq"]) {
    spec.initial_seq = static_cast<Seq>(as_integer(node["initial_seq"], child(path, "initial_seq"), 0, kU32Max));
  }
  if (node["grouping"]) {
    const std::string p = child(path, "grouping");
    if (job.algorithm->name != "plink") {
      fail(p, "is PLink's key (algorithm plink); algorithm " + std::string(job.algorithm->name) +
                  " does not group its workers that way");
    }
    const std::string grouping = as_string(node["grouping"], p);
    if (grouping == "topology") {
      job.grouping = JobGrouping::kTopology;
    } else if (grouping == "random") {
      job.grouping = JobGrouping::kRandom;
    } else if (grouping == "probe") {
      job.grouping = JobGrouping::kProbe;
    } else {
      fail(p, "must be 'topology' (the racks), 'random' (Balanced Random) or 'probe' (ProbeEmbed's groups), got " +
                  grouping);
    }
  }
  if (node["autotune"]) {
    const std::string p = child(path, "autotune");
    if (job.algorithm->name != "plink" && job.algorithm->name != "plink_fa") {
      fail(p, "is PLink's key (algorithm plink or plink_fa); algorithm " + std::string(job.algorithm->name) +
                  " has no masters to move");
    }
    job.autotune = as_bool(node["autotune"], p);
  }
  if (node["connections"]) {
    const std::string p = child(path, "connections");
    if (job.algorithm->name != "plink" && job.algorithm->name != "plink_fa") {
      fail(p, "is PLink's key (algorithm plink or plink_fa); algorithm " + std::string(job.algorithm->name) +
                  " keeps one connection per pair");
    }
    job.connections = static_cast<int>(as_integer(node["connections"], p, 1, kMaxLanes));
  }
  return job;
}

// --- faults

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

void parse_fault(const YAML::Node& node, const std::string& path, const Names& names, Scenario& scenario) {
  if (!node.IsMap()) fail(path, std::string("must be a map with ") + kFaultKindList + ", got " + describe(node));
  int kinds = 0;
  for (const char* k : kFaultKinds) kinds += node[k] ? 1 : 0;
  if (kinds > 1) fail(path, std::string("must have exactly one of ") + kFaultKindList);
  if (node["link"]) {
    expect_map(node, path,
               {"link", "one_way", "loss", "duplicate", "reorder", "delay_us", "rate_gbps", "rate_mbps",
                "buffer_packets", "buffer_bytes", "ecn_threshold_packets", "from_us", "until_us"});
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
    if (node["from_us"]) fault.from = as_microseconds(node["from_us"], child(path, "from_us"), true);
    if (node["until_us"]) {
      fault.until = as_microseconds(node["until_us"], child(path, "until_us"), true);
      if (*fault.until <= fault.from) fail(child(path, "until_us"), "must be after from_us");
    }
    scenario.link_faults.push_back(std::move(fault));
    return;
  }
  if (node["crash"]) {
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
    scenario.crashes.push_back(std::move(crash));
    return;
  }
  if (node["restart"]) {
    expect_map(node, path, {"restart", "at_us", "down_us"});
    SwitchRestart restart;
    const std::string p = child(path, "restart");
    restart.switch_name = as_string(node["restart"], p);
    if (!names.is_switch(restart.switch_name)) fail(p, "unknown switch '" + restart.switch_name + "'");
    require(node, path, "at_us");
    restart.at = as_microseconds(node["at_us"], child(path, "at_us"), true);
    if (node["down_us"]) restart.down = as_microseconds(node["down_us"], child(path, "down_us"), true);
    scenario.restarts.push_back(std::move(restart));
    return;
  }
  if (node["noise"]) {
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
    if (node["from_us"]) noise.from = as_microseconds(node["from_us"], child(path, "from_us"), true);
    if (node["until_us"]) {
      noise.until = as_microseconds(node["until_us"], child(path, "until_us"), true);
      if (*noise.until <= noise.from) fail(child(path, "until_us"), "must be after from_us");
    }
    scenario.noise.push_back(std::move(noise));
    return;
  }
  fail(path, std::string("must have one of ") + kFaultKindList);
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
  if (node["from_us"]) flow.start = as_microseconds(node["from_us"], child(path, "from_us"), true);
  if (node["until_us"]) {
    flow.until = as_microseconds(node["until_us"], child(path, "until_us"), true);
    if (*flow.until <= flow.start) fail(child(path, "until_us"), "must be after from_us");
  }
  return flow;
}

// The K jobs with in-network aggregation (algorithm atp) share the aggregator tables:
// `aggregator_sharing: static` gives them, in file order, shares 0..K-1 of K (plan.h,
// AggregatorShare); `dynamic`, the default, lets every job use the whole table, each keeping to
// its part of it and starting on a K-th of the table of its own (JobSpec::sharing_jobs = K,
// sharing_index). Other algorithms use no aggregators.
void share_aggregators(const YAML::Node* node, const std::string& path, Scenario& scenario) {
  const std::string sharing = node ? as_string(*node, path) : "dynamic";
  if (sharing != "dynamic" && sharing != "static") fail(path, "must be 'dynamic' or 'static', got " + sharing);
  auto aggregates = [](const ScenarioJob& job) {
    return job.algorithm->parameter_servers && job.algorithm->in_network_aggregation;
  };
  const auto shares = static_cast<std::uint32_t>(std::count_if(scenario.jobs.begin(), scenario.jobs.end(), aggregates));
  std::uint32_t next = 0;
  for (ScenarioJob& job : scenario.jobs) {
    if (!aggregates(job)) continue;
    if (sharing == "static") {
      job.spec.aggregator_share = AggregatorShare{next++, shares};
    } else {
      job.spec.sharing_jobs = shares;
      job.spec.sharing_index = next++;
    }
  }
}

Scenario parse_root(const YAML::Node& root, ScenarioUse use) {
  if (!root.IsMap()) {
    throw ScenarioError(
        "scenario: the file must be a YAML map with keys seed, topology, jobs (and optionally "
        "link, faults, time_limit_s), got " +
        describe(root));
  }
  expect_map(root, "",
             {"description", "seed", "time_limit_s", "link", "topology", "jobs", "aggregator_sharing", "faults",
              "background"});
  require(root, "", "topology");  // jobs may be left out: atp discover needs only the network
  Scenario scenario;
  if (root["description"]) as_string(root["description"], "description");
  if (root["seed"]) scenario.seed = as_integer(root["seed"], "seed", 0, std::numeric_limits<std::uint64_t>::max());
  if (root["time_limit_s"]) {
    double s = as_number(root["time_limit_s"], "time_limit_s", 0, 1e6, "a positive number of seconds (at most 1e6)");
    if (s == 0) fail("time_limit_s", "must be a positive number of seconds (at most 1e6), got 0");
    scenario.time_limit = Duration(static_cast<std::int64_t>(std::llround(s * 1e9)));
  }
  if (root["link"]) parse_default_link(root["link"], "link", scenario);

  Names names;
  scenario.topology = parse_topology(root["topology"], "topology", names);

  const YAML::Node jobs = root["jobs"] ? expect_list(root["jobs"], "jobs", true) : YAML::Node(YAML::NodeType::Sequence);
  if (jobs.size() > std::numeric_limits<JobId>::max()) fail("jobs", "too many jobs (job ids are 16 bits)");
  std::set<std::string> job_names;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    ScenarioJob job = parse_job(jobs[i], item("jobs", i), i, names, use);
    if (!jobs[i]["rto_us"]) {
      job.spec.retransmit_timeout =
          first_retransmit_timeout(scenario.link.rate_gbps.value_or(0), job.spec.workers.size(), job.spec.congestion);
    }
    if (!job_names.insert(job.spec.name).second) {
      fail(child(item("jobs", i), "name"), "the job name '" + job.spec.name + "' is already used");
    }
    scenario.jobs.push_back(std::move(job));
  }
  const YAML::Node sharing = root["aggregator_sharing"];
  share_aggregators(sharing ? &sharing : nullptr, "aggregator_sharing", scenario);

  if (root["faults"]) {
    const YAML::Node faults = expect_list(root["faults"], "faults", false);
    for (std::size_t i = 0; i < faults.size(); ++i) parse_fault(faults[i], item("faults", i), names, scenario);
  }
  if (root["background"]) {
    const YAML::Node flows = expect_list(root["background"], "background", false);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      scenario.background.push_back(parse_background(flows[i], item("background", i), names));
    }
  }
  check_scenario_memory(scenario, physical_memory_bytes());
  return scenario;
}

// --- memory

using scenario_detail::saturating_add;
using scenario_detail::saturating_mul;

// Per value of a worker's tensor: the round driver's input (4 B), the endpoint's copy (4 B) and
// result (4 B), and the round's reference (int64 sum, double float sum and |x| sum: 24 B) with
// the inputs and quantized values make_reference regenerates (8 B). A process backend's worker
// holds a reference of its own, so it is counted per worker.
constexpr std::uint64_t kBytesPerWorkerValue = 44;
constexpr std::uint64_t kBytesPerWorkerFragment = 32;  // the endpoint's per-fragment state, about
// An aggregator's state besides its values: the Aggregator and its place on the age list.
constexpr std::uint64_t kBytesPerAggregator = sizeof(Aggregator) + 2 * sizeof(std::uint32_t);

std::uint64_t job_memory_bytes(const ScenarioJob& job) {
  // Unset (0), planning chooses the width; the paper's 62 is narrower than what it chooses on
  // any backend but one with switches narrower than that, and the fragments' share is small.
  const std::uint64_t vpp = job.spec.values_per_packet != 0 ? job.spec.values_per_packet : kDefaultValuesPerPacket;
  const std::uint64_t fragments = job.elements / vpp + 1;
  const std::uint64_t per_worker = saturating_add(saturating_mul(job.elements, kBytesPerWorkerValue),
                                                  saturating_mul(fragments, kBytesPerWorkerFragment));
  return saturating_mul(per_worker, job.spec.workers.size());
}

std::uint64_t switch_memory_bytes(const SwitchSpec& sw) {
  if (!sw.config.atp_capable) return 0;  // a plain switch allocates no table
  const std::uint64_t per = std::uint64_t{sw.config.aggregator_width} * sizeof(std::int32_t) + kBytesPerAggregator;
  return saturating_mul(sw.config.num_aggregators, per);
}

}  // namespace

std::uint64_t scenario_memory_bytes(const Scenario& scenario) {
  std::uint64_t total = 0;
  for (const ScenarioJob& job : scenario.jobs) total = saturating_add(total, job_memory_bytes(job));
  for (const SwitchSpec& sw : scenario.topology.switches) total = saturating_add(total, switch_memory_bytes(sw));
  return total;
}

void check_scenario_memory(const Scenario& scenario, std::uint64_t available) {
  const std::uint64_t needed = scenario_memory_bytes(scenario);
  if (available == 0 || needed <= available) return;
  std::string key;
  std::uint64_t largest = 0;
  for (std::size_t i = 0; i < scenario.jobs.size(); ++i) {
    const std::uint64_t b = job_memory_bytes(scenario.jobs[i]);
    if (b > largest) {
      largest = b;
      key = item("jobs", i) + ".elements";
    }
  }
  for (std::size_t i = 0; i < scenario.topology.switches.size(); ++i) {
    const std::uint64_t b = switch_memory_bytes(scenario.topology.switches[i]);
    if (b > largest) {
      largest = b;
      key = item("topology.switches", i) + ".aggregators";
    }
  }
  fail(key, "the scenario needs at least " + std::to_string(needed) +
                " bytes of memory (inputs, results and reference sums of every worker, and every ATP switch's "
                "aggregator table; " +
                std::to_string(largest) + " of them here), more than the " + std::to_string(available) +
                " bytes this machine has");
}

Scenario parse_scenario_yaml(const std::string& text, const std::string& source, ScenarioUse use) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // e.mark is 0-based; editors count from 1.
    std::ostringstream msg;
    msg << source << ": line " << e.mark.line + 1 << ", column " << e.mark.column + 1 << ": not valid YAML (" << e.msg
        << ")";
    throw ScenarioError(msg.str());
  }
  try {
    return parse_root(root, use);
  } catch (const YAML::Exception& e) {
    // Anything yaml-cpp itself rejects while walking the tree (should not happen: types are checked first).
    throw ScenarioError(source + ": " + e.msg);
  }
}

Scenario load_scenario_file(const std::string& path, ScenarioUse use) {
  std::string text;
  try {
    text = read_config_file(path);
  } catch (const ConfigFileError& e) {
    throw ScenarioError(e.what());  // one sentence naming the path
  }
  return parse_scenario_yaml(text, path, use);
}

}  // namespace atp
