// The JSON codec of the daemons' control plane (nlohmann-json): job plans for switches and PSs,
// switch port settings, leases (the HTTP server is control_server.cc).
// Parsing is strict (unknown keys, wrong types and out-of-range numbers are one-sentence errors).
#include "atp/control/control.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "atp/control/json_fields.h"
#include "atp/control/worker_config_json.h"
#include "atp/values_per_packet.h"

namespace atp::control {
namespace {

using nlohmann::json;

template <class T>
std::vector<T> get_unsigned_list(const json& object, const std::string& where, const char* key) {
  const json& list = get_list(object, where, key);
  std::vector<T> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(static_cast<T>(
        to_unsigned(list[i], where + key + "[" + std::to_string(i) + "]", std::numeric_limits<T>::max())));
  }
  return out;
}

// The "index" field: an IndexPolicy's name.
IndexPolicy index_policy(const json& value) {
  const std::optional<IndexPolicy> policy =
      value.is_string() ? parse_index_policy(value.get<std::string>()) : std::nullopt;
  if (!policy)
    throw ControlError("index: must be \"allocated\", \"hashed\", \"linear\" or \"hashed_slots\", got " + shown(value));
  return *policy;
}

}  // namespace

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

Address parse_address(const std::string& text, const std::string& field) {
  in_addr parsed{};
  if (inet_pton(AF_INET, text.c_str(), &parsed) != 1) {
    throw ControlError(field + ": expected an address like \"10.0.0.1\", got \"" + excerpt(text) + "\"");
  }
  return ntohl(parsed.s_addr);
}

namespace {

// A job's "name" (job_name_error's rule).
std::string job_name(const json& doc) {
  const json& value = doc.at("name");
  if (!value.is_string()) throw ControlError("name: expected a string, got " + shown(value));
  const std::string name = value.get<std::string>();
  if (const std::optional<std::string> bad = job_name_error(name)) throw ControlError("name: " + *bad);
  return name;
}

}  // namespace

std::string to_json(const SwitchJobPlan& plan) {
  json roles = json::array();
  for (const AggregationRole& r : plan.entry.roles) {
    json children = json::array();
    for (const TreeChild& c : r.children) children.push_back({{"node", c.node}, {"fan_in", c.fan_in}});
    roles.push_back({{"ps", format_address(r.ps)}, {"node", r.node}, {"children", children}});
  }
  json doc = {{"name", plan.name},
              {"job", plan.entry.job},
              {"admitted_ports", plan.entry.admitted_ports},
              {"roles", roles},
              {"multicast_ports", plan.multicast_ports}};
  json routes = json::array();
  for (const auto& [dst, port] : plan.routes) routes.push_back({{"dst", format_address(dst)}, {"port", port}});
  doc["routes"] = std::move(routes);
  if (!plan.entry.rina_members.empty()) doc["rina_members"] = plan.entry.rina_members;
  return doc.dump();
}

SwitchJobPlan switch_job_from_json(const std::string& text) {
  const json doc = parse_object(text, "switch job");
  check_keys(doc, "", {"name", "job", "admitted_ports", "roles", "multicast_ports", "routes", "rina_members"});
  SwitchJobPlan plan;
  if (doc.contains("name")) plan.name = job_name(doc);
  plan.entry.job = get_unsigned<JobId>(doc, "", "job");
  plan.entry.admitted_ports = get_unsigned_list<PortId>(doc, "", "admitted_ports");
  plan.multicast_ports = get_unsigned_list<PortId>(doc, "", "multicast_ports");
  const json& roles = get_list(doc, "", "roles");
  for (std::size_t i = 0; i < roles.size(); ++i) {
    const std::string where = "roles[" + std::to_string(i) + "].";
    if (!roles[i].is_object()) throw ControlError(where.substr(0, where.size() - 1) + ": expected an object");
    check_keys(roles[i], where, {"ps", "node", "children"});
    AggregationRole role;
    role.ps = get_address(roles[i], where, "ps");
    role.node = get_unsigned<std::uint16_t>(roles[i], where, "node");
    if (role.node == 0) throw ControlError(where + "node: 0 is the PS's, a switch's is 1 or more");
    const json& children = require(roles[i], where, "children");
    if (!children.is_array() || children.empty() || children.size() > 32) {
      throw ControlError(where + "children: expected a list of 1 to 32 (a bitmap's bits), got " + shown(children));
    }
    std::set<std::uint16_t> distinct;
    for (std::size_t c = 0; c < children.size(); ++c) {
      const std::string at = where + "children[" + std::to_string(c) + "].";
      if (!children[c].is_object()) throw ControlError(at.substr(0, at.size() - 1) + ": expected an object");
      check_keys(children[c], at, {"node", "fan_in"});
      TreeChild child;
      child.node = get_unsigned<std::uint16_t>(children[c], at, "node");
      child.fan_in = get_unsigned<std::uint8_t>(children[c], at, "fan_in");
      if (child.node == 0 || child.node == role.node || !distinct.insert(child.node).second) {
        throw ControlError(at + "node: " + std::to_string(child.node) + " is the PS's, the role's own or listed twice");
      }
      if (child.fan_in < 1 || child.fan_in > 32) {
        throw ControlError(at + "fan_in: must be 1..32, got " + std::to_string(child.fan_in));
      }
      role.children.push_back(child);
    }
    plan.entry.roles.push_back(role);
  }
  if (doc.contains("rina_members")) {  // optional: the ToR of a rack that is one member of a Rina ring
    plan.entry.rina_members = get_unsigned_list<PortId>(doc, "", "rina_members");
    const std::set<PortId> distinct(plan.entry.rina_members.begin(), plan.entry.rina_members.end());
    if (distinct.size() != plan.entry.rina_members.size()) throw ControlError("rina_members: a port is listed twice");
    if (plan.entry.rina_members.size() > 32) {
      throw ControlError("rina_members: at most 32 ports (a rack's bitmap), got " +
                         std::to_string(plan.entry.rina_members.size()));
    }
    if (!plan.entry.roles.empty() && !plan.entry.rina_members.empty()) {
      throw ControlError("rina_members: a job is aggregated as ATP's (roles) or as Rina's, not both");
    }
  }
  if (doc.contains("routes")) {  // optional: a job whose switches route its hosts already
    const json& routes = get_list(doc, "", "routes");
    std::set<Address> seen;
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const std::string where = "routes[" + std::to_string(i) + "].";
      if (!routes[i].is_object()) throw ControlError(where.substr(0, where.size() - 1) + ": expected an object");
      check_keys(routes[i], where, {"dst", "port"});
      const Address dst = get_address(routes[i], where, "dst");
      if (!seen.insert(dst).second) throw ControlError(where + "dst: " + format_address(dst) + " is listed twice");
      plan.routes.emplace_back(dst, get_unsigned<PortId>(routes[i], where, "port"));
    }
  }
  return plan;
}

std::string to_json(const PsConfig& config) {
  json workers = json::array();
  for (const Address a : config.workers) workers.push_back(format_address(a));
  json doc = {{"name", config.name},
              {"job", config.job},
              {"self", format_address(config.self)},
              {"multicast_group", format_address(config.multicast_group)},
              {"tree", config.tree},
              {"workers", workers},
              {"values_per_packet", config.values_per_packet},
              {"first_aggregator", config.aggregators.first},
              {"num_aggregators", config.aggregators.count},
              {"max_window_seqs", config.max_window_seqs},
              {"index", to_string(config.index_policy)}};
  return doc.dump();
}

namespace {

// A direction's settings, every key of kEgressFields (egress_fields.h). Whole numbers are written
// as integers ("buffer_packets": 64, "delay_us": 5), the others as they are ("delay_us": 0.5).
json egress_to_json(const EgressConfig& e) {
  json doc = json::object();
  for (const EgressField& f : kEgressFields) {
    const double v = f.get(e);
    if (v == std::floor(v) && v >= 0 && v <= 4294967295.0) {  // every field's bound is below 2^32
      doc[std::string(f.key)] = static_cast<std::uint64_t>(v);
    } else {
      doc[std::string(f.key)] = v;
    }
  }
  return doc;
}

EgressConfig egress_from_json(const json& doc, const char* direction) {
  const std::string where = std::string(direction) + ".";
  if (!doc.is_object()) throw ControlError(std::string(direction) + ": expected an object, got " + shown(doc));
  std::vector<std::string_view> keys;
  for (const EgressField& f : kEgressFields) keys.push_back(f.key);
  check_keys(doc, where, keys);
  EgressConfig e;
  for (const EgressField& f : kEgressFields) {
    const json& value = require(doc, where, std::string(f.key).c_str());
    const std::optional<std::string> bad =
        value.is_number() ? egress_value_error(f, value.get<double>()) : "must be " + std::string(f.expected);
    if (bad) throw ControlError(where + std::string(f.key) + ": " + *bad + ", got " + shown(value));
    f.set(e, value.get<double>());
  }
  return e;
}

}  // namespace

json worker_config_json(const WorkerConfig& c) {
  json ps = json::array();
  for (const PsRoute& r : c.ps) {
    ps.push_back({{"ps", format_address(r.ps)}, {"node", r.node}});
  }
  json doc = {{"job", c.job},
              {"self", format_address(c.self)},
              {"ps", ps},
              {"values_per_packet", c.values_per_packet},
              {"scale", c.scale},
              {"first_aggregator", c.aggregators.first},
              {"num_aggregators", c.aggregators.count},
              {"index", to_string(c.index_policy)},
              {"slot_home", c.slot_home},
              {"loss_recovery", c.loss_recovery == LossRecovery::kTimeoutOnly ? "timeout" : "atp"},
              {"congestion", congestion_json(c.congestion)}};
  put_timeouts(c, doc);
  return doc;
}

WorkerConfig worker_config_from(const json& doc) {
  if (!doc.is_object()) throw ControlError("worker config: expected an object, got " + shown(doc));
  check_keys(doc, "",
             {"job", "self", "ps", "values_per_packet", "scale", "first_aggregator", "num_aggregators", "index",
              "slot_home", "loss_recovery", "congestion", "retransmit_timeout_ns", "min_retransmit_timeout_ns",
              "max_retransmit_timeout_ns", "progress_timeout_ns", "initial_seq"});
  WorkerConfig c;
  c.job = get_unsigned<JobId>(doc, "", "job");
  c.self = get_address(doc, "", "self");
  const json& routes = get_list(doc, "", "ps");
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const std::string where = "ps[" + std::to_string(i) + "].";
    if (!routes[i].is_object()) throw ControlError(where.substr(0, where.size() - 1) + ": expected an object");
    check_keys(routes[i], where, {"ps", "node"});
    PsRoute r;
    r.ps = get_address(routes[i], where, "ps");
    r.node = get_unsigned<std::uint16_t>(routes[i], where, "node");
    if (r.node == 0) throw ControlError(where + "node: 0 is the PS's, a worker's is 1 or more");
    c.ps.push_back(r);
  }
  c.values_per_packet = get_unsigned<std::uint16_t>(doc, "", "values_per_packet");
  c.scale = get_number(doc, "", "scale", 0, std::numeric_limits<double>::max());
  c.aggregators.first = get_unsigned<std::uint32_t>(doc, "", "first_aggregator");
  c.aggregators.count = get_unsigned<std::uint32_t>(doc, "", "num_aggregators");
  c.index_policy = index_policy(require(doc, "", "index"));
  c.slot_home = get_unsigned<std::uint32_t>(doc, "", "slot_home");
  const json& recovery = require(doc, "", "loss_recovery");
  if (recovery != "atp" && recovery != "timeout") {
    throw ControlError("loss_recovery: must be \"atp\" or \"timeout\", got " + shown(recovery));
  }
  c.loss_recovery = recovery == "timeout" ? LossRecovery::kTimeoutOnly : LossRecovery::kAtp;
  c.congestion = congestion_from(doc);
  get_timeouts(doc, c);
  return c;
}

std::string host_to_json(const SocketAddress& peer) { return json{{"peer", peer.to_string()}}.dump(); }

SocketAddress host_from_json(const std::string& text) {
  const json doc = parse_object(text, "host");
  check_keys(doc, "", {"peer"});
  const auto it = doc.find("peer");
  if (it == doc.end()) throw ControlError("peer: missing (the host's UDP address, like \"127.0.0.1:40001\")");
  if (!it->is_string()) throw ControlError("peer: expected an address like \"127.0.0.1:40001\", got " + shown(*it));
  const std::string& address = it->get_ref<const std::string&>();
  // "255.255.255.255:65535" is 21 bytes: anything much longer is not an address, and
  // SocketAddress::parse's message would quote all of it.
  if (address.size() > 32) throw ControlError("peer: '" + excerpt(address) + "' is not an IPv4 address and port");
  SocketAddress peer;
  try {
    peer = SocketAddress::parse(address);
  } catch (const std::invalid_argument& e) {
    throw ControlError(std::string("peer: ") + e.what());
  }
  if (peer.ip == 0 || peer.port == 0) {
    throw ControlError("peer: " + peer.to_string() + " is not a host's address (neither IP nor port may be 0)");
  }
  return peer;
}

std::string to_json(const PortSettings& settings) {
  json doc = json::object();
  if (settings.egress) doc["egress"] = egress_to_json(*settings.egress);
  if (settings.ingress) doc["ingress"] = egress_to_json(*settings.ingress);
  return doc.dump();
}

PortSettings port_settings_from_json(const std::string& text) {
  const json doc = parse_object(text, "port settings");
  check_keys(doc, "", {"egress", "ingress"});
  PortSettings settings;
  if (doc.contains("egress")) settings.egress = egress_from_json(doc["egress"], "egress");
  if (doc.contains("ingress")) settings.ingress = egress_from_json(doc["ingress"], "ingress");
  return settings;
}

PsConfig ps_job_from_json(const std::string& text) {
  const json doc = parse_object(text, "PS job");
  check_keys(doc, "",
             {"name", "job", "self", "multicast_group", "tree", "workers", "values_per_packet", "first_aggregator",
              "num_aggregators", "max_window_seqs", "index"});
  PsConfig config;
  if (doc.contains("name")) config.name = job_name(doc);
  config.job = get_unsigned<JobId>(doc, "", "job");
  config.self = get_address(doc, "", "self");
  config.multicast_group = get_address(doc, "", "multicast_group");
  // Its size is checked before it is read whole: a list longer than a tree can be is refused.
  if (const json& tree = require(doc, "", "tree"); tree.is_array() && tree.size() > kMaxTreeNodes) {
    throw ControlError("tree: at most " + std::to_string(kMaxTreeNodes) + " nodes, got " + std::to_string(tree.size()));
  }
  config.tree = get_unsigned_list<std::uint16_t>(doc, "", "tree");
  if (const std::optional<std::string> bad = tree_error(config.tree)) throw ControlError(*bad);
  // Required: a job's PS accepts gradients only from its workers (docs/security.md).
  config.workers = get_address_list(doc, "", "workers", kMaxTreeNodes - 1);
  if (config.workers.empty()) throw ControlError("workers: must list the job's workers' addresses");
  if (doc.contains("values_per_packet")) {
    // Read whole, then the one check: 70000 is "must be 1..4096", not a uint16's range.
    const auto values = get_unsigned<std::uint64_t>(doc, "", "values_per_packet");
    if (const std::optional<std::string> bad = values_per_packet_error(values)) {
      throw ControlError("values_per_packet: " + *bad);
    }
    config.values_per_packet = static_cast<std::uint16_t>(values);
  }
  if (doc.contains("first_aggregator")) {
    config.aggregators.first = get_unsigned<std::uint32_t>(doc, "", "first_aggregator");
  }
  if (doc.contains("num_aggregators")) {
    config.aggregators.count = get_unsigned<std::uint32_t>(doc, "", "num_aggregators");
    if (config.aggregators.count == 0) throw ControlError("num_aggregators: must be at least 1, got 0");
  }
  if (doc.contains("index")) {
    config.index_policy = index_policy(doc.at("index"));
  }
  if (doc.contains("max_window_seqs")) {
    config.max_window_seqs = get_unsigned<std::uint32_t>(doc, "", "max_window_seqs");
    if (config.max_window_seqs == 0) throw ControlError("max_window_seqs: must be at least 1, got 0");
  }
  return config;
}

Duration lease_ttl_from_json(const std::string& text) {
  const json doc = parse_object(text, "lease");
  check_keys(doc, "", {"ttl_ms"});
  const auto ms = get_unsigned<std::uint64_t>(doc, "", "ttl_ms");
  return std::chrono::milliseconds(std::min<std::uint64_t>(ms, std::uint64_t{1} << 40));
}

std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace atp::control
