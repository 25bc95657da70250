// The switch daemon's config file (switch_config.h): a strict YAML reader that names the key in
// every error, parse_switch_config and load_switch_config, which turn the file into a
// SwitchDaemonConfig, and to_yaml, which writes one (yaml-cpp's emitter).
#include "atp/control/switch_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "atp/control/control.h"
#include "atp/io/config_file.h"
#include "atp/io/egress_fields.h"
#include "atp/io/machine.h"
#include "atp/plan/plan.h"
#include "atp/wire.h"

namespace atp::control {
namespace {

// Reads the values of one YAML document, checking each: a wrong one throws SwitchConfigError
// "WHERE: FIELD: what is wrong" (WHERE names the document, e.g. its file).
class YamlReader {
 public:
  explicit YamlReader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw SwitchConfigError(where_ + ": " + field + ": " + what);
  }

  void check_keys(const YAML::Node& map, const std::string& prefix,
                  const std::vector<std::string_view>& allowed) const {
    if (!map.IsMap()) fail(prefix.empty() ? "top level" : prefix.substr(0, prefix.size() - 1), "expected a mapping");
    for (const auto& item : map) {
      if (!item.first.IsScalar()) fail(prefix + "?", "a key must be a name, not a list or mapping");
      const std::string key = item.first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(prefix + excerpt(key), "unknown key (expected one of " + list + ")");
      }
    }
  }

  std::int64_t integer(const YAML::Node& node, const std::string& field, std::int64_t min, std::int64_t max) const {
    std::int64_t v = 0;
    try {
      v = node.as<std::int64_t>();
    } catch (const YAML::Exception&) {
      fail(field, "expected an integer, got '" + scalar(node) + "'");
    }
    if (v < min || v > max) {
      fail(field,
           "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + std::to_string(v));
    }
    return v;
  }

  // A whole number over all of uint64's range (0 to 18446744073709551615), e.g. a seed.
  std::uint64_t unsigned_integer(const YAML::Node& node, const std::string& field) const {
    try {
      return node.as<std::uint64_t>();  // refuses a sign and anything past the range
    } catch (const YAML::Exception&) {
      const std::string text = node.IsScalar() ? node.Scalar() : "";
      const std::size_t digits = text.rfind('-', 0) == 0 ? 1 : 0;
      if (text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos) {
        fail(field, "must be between 0 and " + std::to_string(UINT64_MAX) + ", got " + excerpt(text));
      }
      fail(field, "expected an integer, got '" + scalar(node) + "'");
    }
  }

  // The node as a number (yaml-cpp's reading of a scalar), or nullopt when it is none.
  static std::optional<double> number(const YAML::Node& node) {
    if (!node.IsScalar()) return std::nullopt;
    try {
      return node.as<double>();
    } catch (const YAML::Exception&) {
      return std::nullopt;
    }
  }

  // A duration in microseconds between 0 and `max_us`, fractions rounded to whole nanoseconds
  // (the core's unit), as a port's delay_us (egress_fields.h). A positive value that rounds to 0
  // is refused: 0 means "never" to the readers of these durations.
  Duration microseconds(const YAML::Node& node, const std::string& field, std::int64_t max_us) const {
    const std::optional<double> read = number(node);
    const double us = read.value_or(0);
    if (!read || !std::isfinite(us) || us < 0 || us > static_cast<double>(max_us)) {
      fail(field, "must be a number of microseconds between 0 and " + std::to_string(max_us) + ", got " + scalar(node));
    }
    const Duration d(static_cast<std::int64_t>(std::llround(us * 1000)));
    if (us > 0 && d == Duration::zero()) {
      fail(field, "must be 0 (never) or at least 0.001 microseconds (a nanosecond), got " + scalar(node));
    }
    return d;
  }

  // A port direction's setting `f` (egress_fields.h), named `field` in errors.
  double setting(const YAML::Node& node, const std::string& field, const EgressField& f) const {
    const std::optional<double> read = number(node);
    const double v = read.value_or(0);
    const std::optional<std::string> bad = read ? egress_value_error(f, v) : "must be " + std::string(f.expected);
    if (bad) fail(field, *bad + ", got " + scalar(node));
    return v;
  }

  std::string string(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(field, "expected a string");
    return node.as<std::string>();
  }

  SocketAddress endpoint(const YAML::Node& node, const std::string& field) const {
    const std::string text = string(node, field);
    try {
      return SocketAddress::parse(text);
    } catch (const std::invalid_argument&) {
      fail(field, "expected an address like 127.0.0.1:9000, got '" + excerpt(text) + "'");
    }
  }

 private:
  // A value for an error message: a bounded excerpt of it.
  static std::string scalar(const YAML::Node& node) {
    return node.IsScalar() ? excerpt(node.Scalar()) : "a non-scalar";
  }
  std::string where_;
};

// `e` with the keys of a port direction's settings (the port's egress, or its `ingress:` mapping)
// that `map` has, each checked by kEgressFields (egress_fields.h).
EgressConfig egress_settings(const YamlReader& r, const YAML::Node& map, const std::string& prefix, EgressConfig e) {
  for (const EgressField& f : kEgressFields) {
    if (const YAML::Node value = map[std::string(f.key)]) f.set(e, r.setting(value, prefix + std::string(f.key), f));
  }
  given_buffer_replaces(e, static_cast<bool>(map["buffer_packets"]), static_cast<bool>(map["buffer_bytes"]));
  return e;
}

// kEgressFields' keys, and `more`.
std::vector<std::string_view> egress_keys(std::initializer_list<std::string_view> more) {
  std::vector<std::string_view> keys;
  for (const EgressField& f : kEgressFields) keys.push_back(f.key);
  keys.insert(keys.end(), more);
  return keys;
}

// Why the aggregator table of `pipeline` cannot be made on this machine ("aggregators: ...",
// naming the bytes it needs), or nullopt. The value rows are reserved, not touched, when the
// table is made, but a busy switch touches them all: a table larger than the machine's memory
// would end in std::bad_alloc or in the kernel's OOM killer.
std::optional<std::string> table_too_large(const SwitchConfig& pipeline) {
  if (!pipeline.atp_capable) return std::nullopt;  // a plain switch has an empty table
  // Per aggregator: its value row (int32 each), its state and its two oldest-first links.
  const std::uint64_t per_aggregator =
      std::uint64_t{pipeline.aggregator_width} * sizeof(std::int32_t) + sizeof(Aggregator) + 2 * sizeof(std::uint32_t);
  const std::uint64_t needed = std::uint64_t{pipeline.num_aggregators} * per_aggregator;
  const std::uint64_t memory = physical_memory_bytes();
  if (needed <= memory) return std::nullopt;
  return "aggregators: " + std::to_string(pipeline.num_aggregators) + " aggregators of width " +
         std::to_string(pipeline.aggregator_width) + " need " + std::to_string(needed) +
         " bytes, more than this machine's " + std::to_string(memory) + " bytes of memory";
}

// Why a switch cannot run config.threads dataplane threads, if it cannot.
std::optional<std::string> threads_refused(const SwitchDaemonConfig& config) {
  const std::string threads = std::to_string(config.threads);
  if (config.threads > kMaxDataplaneThreads) {
    return "at most " + std::to_string(kMaxDataplaneThreads) + ", got " + threads;
  }
  if (config.threads > 1 && config.pipeline.atp_capable && config.pipeline.num_aggregators % config.threads != 0) {
    return threads + " threads cannot share " + std::to_string(config.pipeline.num_aggregators) +
           " aggregators evenly (choose a divisor of aggregators:)";
  }
  return std::nullopt;
}

// `v` as the shortest text that reads back the same (the emitter writes 0.1 as 0.10000000000000001).
std::string shortest(double v) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
}

// `d` in microseconds as exact decimal text, its nanoseconds as the fraction ("1.5" for 1500 ns,
// "100000" for 100 ms): YamlReader::microseconds reads back the same Duration.
std::string microseconds_text(Duration d) {
  const std::int64_t ns = d.count();
  const std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::string text = (ns < 0 ? "-" : "") + std::to_string(magnitude / 1000);
  if (const std::uint64_t fraction = magnitude % 1000; fraction != 0) {
    std::string digits = std::to_string(fraction);
    digits.insert(0, 3 - digits.size(), '0');  // 5 ns: ".005"
    text += "." + digits.substr(0, digits.find_last_not_of('0') + 1);
  }
  return text;
}

// A port direction's settings, every key of kEgressFields, as egress_settings reads them.
void emit_settings(YAML::Emitter& out, const EgressConfig& e) {
  for (const EgressField& f : kEgressFields)
    out << YAML::Key << std::string(f.key) << YAML::Value << shortest(f.get(e));
}

}  // namespace

void check_limits(const SwitchDaemonConfig& config) {
  if (const std::optional<std::string> too_large = table_too_large(config.pipeline)) {
    throw SwitchConfigError(config.name + ": " + *too_large);
  }
  if (config.ports.size() > kMaxPorts) {
    throw SwitchConfigError(config.name + ": ports: at most " + std::to_string(kMaxPorts) + " ports, got " +
                            std::to_string(config.ports.size()));
  }
  if (const std::optional<std::string> refused = threads_refused(config)) {
    throw SwitchConfigError(config.name + ": threads: " + *refused);
  }
}

std::string HostPool::to_string() const { return format_address(network) + "/" + std::to_string(prefix_length); }

std::optional<HostPool> parse_host_pool(const std::string& text, std::string& why) {
  const std::size_t slash = text.find('/');
  HostPool pool;
  int length = -1;
  try {
    pool.network = parse_address(text.substr(0, slash), "host_pool");
    const std::string bits = slash == std::string::npos ? "" : text.substr(slash + 1);
    if (const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), length);
        ec != std::errc{} || end != bits.data() + bits.size() || bits.empty()) {
      length = -1;
    }
  } catch (const ControlError&) {
    length = -1;
  }
  if (length < 0) {
    why = "'" + excerpt(text) + "' is not an IPv4 prefix like 10.1.0.0/16";
    return std::nullopt;
  }
  if (length < 8 || length > 30 || (pool.network >> 24) != 10) {
    why = "'" + excerpt(text) +
          "' is not inside 10.0.0.0/8 with a prefix length of 8 to 30 (the overlay's host addresses)";
    return std::nullopt;
  }
  pool.prefix_length = static_cast<std::uint8_t>(length);
  const Address host_bits = static_cast<Address>((std::uint64_t{1} << (32 - length)) - 1);
  if ((pool.network & host_bits) != 0) {
    pool.network &= ~host_bits;
    why = "'" + excerpt(text) + "' has host bits set: did you mean " + pool.to_string() + "?";
    return std::nullopt;
  }
  return pool;
}

namespace {

// The YAML document of a config: a map of known keys (their values are read apart).
YAML::Node config_document(const YamlReader& r, const std::string& yaml_text, const std::string& where) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw SwitchConfigError(where + ": not valid YAML (" + e.msg + " at line " + std::to_string(e.mark.line + 1) + ")");
  }
  if (!doc.IsDefined() || doc.IsNull()) throw SwitchConfigError(where + ": the config is empty");
  r.check_keys(doc, "",
               {"name", "aggregators", "width", "reclaim_timeout_us", "atp_capable", "listen", "control", "ports",
                "routes", "seed", "threads", "host_pool"});
  return doc;
}

// `name:`, the pipeline's keys (aggregators, width, reclaim_timeout_us, atp_capable) and the
// sockets' (listen, control).
void read_switch_settings(const YamlReader& r, const YAML::Node& doc, SwitchDaemonConfig& c) {
  if (doc["name"]) {
    c.name = r.string(doc["name"], "name");
    // It labels every metric (switch="NAME"; to_prometheus escapes it, other tools' exporters may
    // not) and every stats document (JSON: UTF-8).
    if (c.name.empty() || !label_text(c.name)) {
      r.fail("name", "'" + excerpt(c.name) +
                         "' is not a switch name (1-255 printable ASCII characters, no quotes or backslashes)");
    }
  }
  if (doc["aggregators"]) {
    c.pipeline.num_aggregators = static_cast<std::uint32_t>(r.integer(doc["aggregators"], "aggregators", 1, 1 << 24));
  }
  if (doc["width"]) {
    c.pipeline.aggregator_width = static_cast<std::uint16_t>(r.integer(doc["width"], "width", 1, kMaxValuesPerPacket));
  }
  if (doc["reclaim_timeout_us"]) {
    c.pipeline.reclaim_timeout = r.microseconds(doc["reclaim_timeout_us"], "reclaim_timeout_us", kMaxReclaimTimeoutUs);
  }
  if (doc["atp_capable"]) {
    try {
      c.pipeline.atp_capable = doc["atp_capable"].as<bool>();
    } catch (const YAML::Exception&) {
      r.fail("atp_capable", "expected true or false");
    }
  }
  if (doc["listen"]) c.listen = r.endpoint(doc["listen"], "listen");
  if (doc["control"]) {
    const SocketAddress control = r.endpoint(doc["control"], "control");
    const std::string text = control.to_string();
    c.control_host = text.substr(0, text.rfind(':'));
    c.control_port = control.port;
  }
}

// `seed:`, `threads:` and `host_pool:`.
void read_run_settings(const YamlReader& r, const YAML::Node& doc, SwitchDaemonConfig& c) {
  if (doc["seed"]) c.seed = r.unsigned_integer(doc["seed"], "seed");  // scenario seeds take all 64 bits
  if (doc["threads"])
    c.threads = static_cast<std::uint32_t>(r.integer(doc["threads"], "threads", 0, kMaxDataplaneThreads));
  if (doc["host_pool"]) {
    std::string why;
    const std::optional<HostPool> pool = parse_host_pool(r.string(doc["host_pool"], "host_pool"), why);
    if (!pool) r.fail("host_pool", why);
    c.host_pool = *pool;
  }
}

// An interface port's `interface:` (a name no other port has) and `switch:` (its neighbour's
// name); `p` is the port's prefix ("ports[1].").
void read_interface_port(const YamlReader& r, const YAML::Node& port, const std::string& p, SwitchPortConfig& pc,
                         std::set<std::string>& interfaces) {
  pc.interface = r.string(port["interface"], p + "interface");
  // IFNAMSIZ (16) includes the terminating zero; '/' and whitespace are never in interface
  // names, and printable ASCII keeps the stats JSON (UTF-8) and metrics labels well-formed.
  const bool printable = std::all_of(pc.interface.begin(), pc.interface.end(),
                                     [](char ch) { return ch > ' ' && ch < 0x7F && ch != '"' && ch != '\\'; });
  if (pc.interface.empty() || pc.interface.size() > 15 || !printable ||
      pc.interface.find_first_of("/:") != std::string::npos) {
    r.fail(p + "interface", "'" + excerpt(pc.interface) + "' is not a Linux interface name (1-15 characters)");
  }
  if (!interfaces.insert(pc.interface).second) r.fail(p + "interface", pc.interface + " is already another port");
  if (port["switch"]) {
    pc.neighbour = r.string(port["switch"], p + "switch");
    if (pc.neighbour.empty() || !label_text(pc.neighbour)) {
      r.fail(p + "switch", "'" + excerpt(pc.neighbour) + "' is not a switch name (the name: in that switch's config)");
    }
  }
}

// A UDP port's `peer:`, an address no other port has.
void read_udp_port(const YamlReader& r, const YAML::Node& port, const std::string& p, SwitchPortConfig& pc,
                   std::set<std::pair<Address, std::uint16_t>>& peers) {
  if (port["switch"]) {
    r.fail(p + "switch", "a UDP port's switch is found from its peer: switch: NAME is for interface ports");
  }
  if (!port["peer"]) {
    r.fail(p + "peer",
           "missing (the UDP address of the host or switch on this port, or interface: NAME for a Linux "
           "interface)");
  }
  pc.peer = r.endpoint(port["peer"], p + "peer");
  if (!peers.emplace(pc.peer.ip, pc.peer.port).second)
    r.fail(p + "peer", pc.peer.to_string() + " is already another port's peer");
}

// `ports:`, each of the kind of the first, with its egress and ingress settings.
void read_ports(const YamlReader& r, const YAML::Node& doc, SwitchDaemonConfig& c) {
  // No ports: a UDP switch whose hosts attach at run time (POST /hosts), e.g. PyTorch jobs' ranks.
  const YAML::Node ports = doc["ports"] ? doc["ports"] : YAML::Node(YAML::NodeType::Sequence);
  if (!ports.IsSequence()) r.fail("ports", "expected a list of ports (or none: hosts attach by POST /hosts)");
  if (ports.size() > kMaxPorts) {  // PortId is 16 bits
    r.fail("ports", "at most " + std::to_string(kMaxPorts) + " ports, got " + std::to_string(ports.size()));
  }
  std::set<std::pair<Address, std::uint16_t>> peers;
  std::set<std::string> interfaces;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const std::string p = "ports[" + std::to_string(i) + "].";
    const YAML::Node port = ports[i];
    r.check_keys(port, p, egress_keys({"peer", "interface", "switch", "ingress"}));
    SwitchPortConfig pc;
    if (port["peer"] && port["interface"]) {
      r.fail(p + "interface", "a port has either peer: (a UDP peer) or interface: (a Linux interface), not both");
    }
    if (port["interface"]) {
      read_interface_port(r, port, p, pc, interfaces);
    } else {
      read_udp_port(r, port, p, pc, peers);
    }
    if (i > 0 && pc.is_interface() != c.ports.front().is_interface()) {
      r.fail(p + (pc.is_interface() ? "interface" : "peer"),
             std::string("all ports of a switch are of one kind, and ports[0] has ") +
                 (pc.is_interface() ? "peer:" : "interface:"));
    }
    pc.egress = egress_settings(r, port, p, switch_port_egress());
    if (!port["ecn_threshold_packets"])
      pc.egress.ecn_threshold_packets = switch_port_ecn_threshold(pc.egress.rate_gbps);
    if (const YAML::Node ingress = port["ingress"]) {
      r.check_keys(ingress, p + "ingress.", egress_keys({}));
      pc.ingress = egress_settings(r, ingress, p + "ingress.", EgressConfig{});
    }
    c.ports.push_back(pc);
  }
}

// `routes:`, each to one of the ports read.
void read_routes(const YamlReader& r, const YAML::Node& routes, const std::string& where, SwitchDaemonConfig& c) {
  if (!routes.IsSequence()) r.fail("routes", "expected a list of {dst, port}");
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const std::string p = "routes[" + std::to_string(i) + "].";
    r.check_keys(routes[i], p, {"dst", "port"});
    if (!routes[i]["dst"]) r.fail(p + "dst", "missing");
    if (!routes[i]["port"]) r.fail(p + "port", "missing");
    Address dst = 0;
    try {
      dst = parse_address(r.string(routes[i]["dst"], p + "dst"), p + "dst");
    } catch (const ControlError& e) {
      throw SwitchConfigError(where + ": " + e.what());
    }
    const auto port =
        static_cast<PortId>(r.integer(routes[i]["port"], p + "port", 0, static_cast<std::int64_t>(c.ports.size()) - 1));
    c.routes.emplace_back(dst, port);
  }
}

}  // namespace

SwitchDaemonConfig parse_switch_config(const std::string& yaml_text, const std::string& where) {
  YamlReader r(where);
  const YAML::Node doc = config_document(r, yaml_text, where);
  SwitchDaemonConfig c;
  read_switch_settings(r, doc, c);
  read_run_settings(r, doc, c);
  read_ports(r, doc, c);
  if (c.interface_ports() && doc["listen"]) {
    r.fail("listen", "a switch on interface ports has no UDP data socket: remove listen:");
  }
  if (const std::optional<std::string> refused = threads_refused(c)) r.fail("threads", *refused);
  if (const YAML::Node routes = doc["routes"]) read_routes(r, routes, where, c);
  if (const std::optional<std::string> too_large = table_too_large(c.pipeline)) {
    throw SwitchConfigError(where + ": " + *too_large);
  }
  return c;
}

SwitchDaemonConfig load_switch_config(const std::string& path) {
  std::string text;
  try {
    text = read_config_file(path);  // a regular file of bounded size: not /dev/zero
  } catch (const ConfigFileError& e) {
    throw SwitchConfigError(e.what());  // names the path
  }
  return parse_switch_config(text, path);
}

std::string to_yaml(const SwitchDaemonConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.name;
  out << YAML::Key << "aggregators" << YAML::Value << c.pipeline.num_aggregators;
  out << YAML::Key << "width" << YAML::Value << c.pipeline.aggregator_width;
  out << YAML::Key << "reclaim_timeout_us" << YAML::Value << microseconds_text(c.pipeline.reclaim_timeout);
  out << YAML::Key << "atp_capable" << YAML::Value << c.pipeline.atp_capable;
  if (!c.interface_ports()) out << YAML::Key << "listen" << YAML::Value << c.listen.to_string();
  out << YAML::Key << "control" << YAML::Value << c.control_host + ":" + std::to_string(c.control_port);
  out << YAML::Key << "seed" << YAML::Value << c.seed;
  out << YAML::Key << "threads" << YAML::Value << c.threads;
  out << YAML::Key << "host_pool" << YAML::Value << c.host_pool.to_string();
  out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
  for (const SwitchPortConfig& p : c.ports) {
    out << YAML::Flow << YAML::BeginMap;
    if (p.is_interface()) {
      out << YAML::Key << "interface" << YAML::Value << p.interface;
      if (!p.neighbour.empty()) out << YAML::Key << "switch" << YAML::Value << p.neighbour;
    } else {
      out << YAML::Key << "peer" << YAML::Value << p.peer.to_string();
    }
    emit_settings(out, p.egress);
    if (p.ingress) {
      out << YAML::Key << "ingress" << YAML::Value << YAML::BeginMap;
      emit_settings(out, *p.ingress);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "routes" << YAML::Value << YAML::BeginSeq;
  for (const auto& [dst, port] : c.routes) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "dst" << YAML::Value << format_address(dst) << YAML::Key
        << "port" << YAML::Value << port << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace atp::control
