// The JSON codec of the daemons' control plane (nlohmann-json): job plans for switches and PSs,
// switch port settings; and the HTTP server (cpp-httplib) both daemons answer them with.
// Parsing is strict (unknown keys, wrong types and out-of-range numbers are one-sentence errors).
#include "atp/runtime/control.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

namespace atp::control {
namespace {

using nlohmann::json;

// Error messages quote at most this many bytes of a bad value.
constexpr std::size_t kExcerptBytes = 64;

// `value` as compact JSON for an error message, at most about `limit` bytes: containers stop
// after the items that fit, strings are cut. Recursion ends when the text is full (each level
// adds a byte), so the nesting of `value` does not matter.
void append_excerpt(const json& value, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  switch (value.type()) {
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& item : value) {
        if (out.size() > limit) break;
        if (!first) out += ',';
        first = false;
        append_excerpt(item, out, limit);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& item : value.items()) {
        if (out.size() > limit) break;
        if (!first) out += ',';
        first = false;
        append_excerpt(json(excerpt(item.key())), out, limit);
        out += ':';
        append_excerpt(item.value(), out, limit);
      }
      out += '}';
      return;
    }
    case json::value_t::string:
      out += json(excerpt(value.get_ref<const std::string&>())).dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    default:  // numbers, booleans, null: short
      out += value.dump();
  }
}

// A bad value as an error message quotes it: `[1,2,3]`, `"abc"`, at most about 64 bytes.
std::string shown(const json& value) {
  std::string out;
  append_excerpt(value, out, kExcerptBytes);
  return out.size() > kExcerptBytes ? excerpt(out) : out;
}

// True when arrays and objects in `text` nest deeper than `limit`, counted in one pass without
// building anything (brackets inside strings do not count). A prefix the parser accepts nests
// as deep here as in the parser, so no document it would build deeper than `limit` passes.
bool nests_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// Rejects keys of `object` not in `allowed`, so that a misspelt field is not silently ignored.
void check_keys(const json& object, const std::string& where, std::initializer_list<std::string_view> allowed) {
  for (const auto& item : object.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || item.key() == a;
    if (!known) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw ControlError(where + excerpt(item.key()) + ": unknown key (expected one of " + list + ")");
    }
  }
}

const json& require(const json& object, const std::string& where, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) throw ControlError(where + key + ": missing");
  return *it;
}

// An unsigned integer field in [0, max].
std::uint64_t to_unsigned(const json& value, const std::string& field, std::uint64_t max) {
  if (!value.is_number_integer()) throw ControlError(field + ": expected an integer, got " + shown(value));
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v <= max) return v;
  } else if (value.get<std::int64_t>() >= 0 && static_cast<std::uint64_t>(value.get<std::int64_t>()) <= max) {
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  }
  throw ControlError(field + ": must be between 0 and " + std::to_string(max) + ", got " + shown(value));
}

template <class T>
T get_unsigned(const json& object, const std::string& where, const char* key) {
  return static_cast<T>(to_unsigned(require(object, where, key), where + key, std::numeric_limits<T>::max()));
}

template <class T>
std::vector<T> get_unsigned_list(const json& object, const std::string& where, const char* key) {
  const json& list = require(object, where, key);
  if (!list.is_array()) throw ControlError(where + key + ": expected a list, got " + shown(list));
  std::vector<T> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(static_cast<T>(
        to_unsigned(list[i], where + key + "[" + std::to_string(i) + "]", std::numeric_limits<T>::max())));
  }
  return out;
}

// A number field (integer or not) in [min, max].
double get_number(const json& object, const std::string& where, const char* key, double min, double max) {
  const json& value = require(object, where, key);
  if (!value.is_number()) throw ControlError(where + key + ": expected a number, got " + shown(value));
  const double v = value.get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    std::ostringstream range;  // 0 and 1, not json's 0.0 and 1.0
    range << where << key << ": must be between " << min << " and " << max << ", got " << shown(value);
    throw ControlError(range.str());
  }
  return v;
}

Address get_address(const json& object, const std::string& where, const char* key) {
  const json& value = require(object, where, key);
  if (!value.is_string())
    throw ControlError(where + key + ": expected an address like \"10.0.0.1\", got " + shown(value));
  return parse_address(value.get<std::string>(), where + key);
}

// The "index" field: an IndexPolicy's name.
IndexPolicy index_policy(const json& value) {
  const std::optional<IndexPolicy> policy =
      value.is_string() ? parse_index_policy(value.get<std::string>()) : std::nullopt;
  if (!policy) throw ControlError("index: must be \"hashed\", \"linear\" or \"hashed_slots\", got " + shown(value));
  return *policy;
}

// The document `text`, which must be a JSON object nesting at most kMaxJsonDepth levels.
json parse_object(const std::string& text, const char* what) {
  // Checked first: nothing below then recurses deeper than this (nlohmann's parser and
  // destructor do not recurse, its dump() and copies do).
  if (nests_deeper_than(text, kMaxJsonDepth)) {
    throw ControlError(std::string(what) + ": body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    // The message quotes the offending token, which may be most of the body.
    throw ControlError(std::string(what) + ": not valid JSON (" + excerpt(e.what(), 160) + ")");
  }
  if (!doc.is_object()) throw ControlError(std::string(what) + ": expected a JSON object, got " + shown(doc));
  return doc;
}

}  // namespace

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

Address parse_address(const std::string& text, const std::string& field) {
  in_addr parsed{};
  if (inet_pton(AF_INET, text.c_str(), &parsed) != 1) {
    throw ControlError(field + ": expected an address like \"10.0.0.1\", got \"" + excerpt(text) + "\"");
  }
  return ntohl(parsed.s_addr);
}

std::string to_json(const SwitchJobPlan& plan) {
  json roles = json::array();
  for (const AggregationRole& r : plan.entry.roles) roles.push_back({{"ps", format_address(r.ps)}, {"level", r.level}});
  json doc = {{"job", plan.entry.job},
              {"admitted_ports", plan.entry.admitted_ports},
              {"roles", roles},
              {"multicast_ports", plan.multicast_ports}};
  return doc.dump();
}

SwitchJobPlan switch_job_from_json(const std::string& text) {
  const json doc = parse_object(text, "switch job");
  check_keys(doc, "", {"job", "admitted_ports", "roles", "multicast_ports"});
  SwitchJobPlan plan;
  plan.entry.job = get_unsigned<JobId>(doc, "", "job");
  plan.entry.admitted_ports = get_unsigned_list<PortId>(doc, "", "admitted_ports");
  plan.multicast_ports = get_unsigned_list<PortId>(doc, "", "multicast_ports");
  const json& roles = require(doc, "", "roles");
  if (!roles.is_array()) throw ControlError("roles: expected a list, got " + shown(roles));
  for (std::size_t i = 0; i < roles.size(); ++i) {
    const std::string where = "roles[" + std::to_string(i) + "].";
    if (!roles[i].is_object()) throw ControlError(where.substr(0, where.size() - 1) + ": expected an object");
    check_keys(roles[i], where, {"ps", "level"});
    AggregationRole role;
    role.ps = get_address(roles[i], where, "ps");
    role.level = get_unsigned<std::uint8_t>(roles[i], where, "level");
    if (role.level > 1) throw ControlError(where + "level: must be 0 or 1, got " + std::to_string(role.level));
    plan.entry.roles.push_back(role);
  }
  return plan;
}

std::string to_json(const PsConfig& config) {
  json doc = {{"job", config.job},
              {"self", format_address(config.self)},
              {"multicast_group", format_address(config.multicast_group)},
              {"group_sizes", config.group_sizes},
              {"values_per_packet", config.values_per_packet},
              {"first_aggregator", config.aggregators.first},
              {"num_aggregators", config.aggregators.count},
              {"max_window_seqs", config.max_window_seqs},
              {"index", to_string(config.index_policy)}};
  return doc.dump();
}

namespace {

json egress_to_json(const EgressConfig& e) {
  return {{"rate_gbps", e.rate_gbps},
          {"buffer_packets", e.buffer_packets},
          {"ecn_threshold_packets", e.ecn_threshold_packets},
          {"delay_us", std::chrono::duration_cast<std::chrono::microseconds>(e.delay).count()},
          {"loss", e.loss},
          {"duplicate", e.duplicate},
          {"reorder", e.reorder}};
}

EgressConfig egress_from_json(const json& doc, const char* direction) {
  const std::string where = std::string(direction) + ".";
  if (!doc.is_object()) throw ControlError(std::string(direction) + ": expected an object, got " + shown(doc));
  check_keys(doc, where,
             {"rate_gbps", "buffer_packets", "ecn_threshold_packets", "delay_us", "loss", "duplicate", "reorder"});
  EgressConfig e;
  e.rate_gbps = get_number(doc, where, "rate_gbps", 0, kMaxPortRateGbps);
  e.buffer_packets = get_unsigned<std::uint32_t>(doc, where, "buffer_packets");
  e.ecn_threshold_packets = get_unsigned<std::uint32_t>(doc, where, "ecn_threshold_packets");
  e.delay = std::chrono::microseconds(
      to_unsigned(require(doc, where, "delay_us"), where + "delay_us", static_cast<std::uint64_t>(kMaxPortDelayUs)));
  e.loss = get_number(doc, where, "loss", 0, 1);
  e.duplicate = get_number(doc, where, "duplicate", 0, 1);
  e.reorder = get_number(doc, where, "reorder", 0, 1);
  return e;
}

}  // namespace

std::string to_json(const WorkerConfig& c) {
  json ps = json::array();
  for (const PsRoute& r : c.ps) {
    ps.push_back({{"ps", format_address(r.ps)},
                  {"bitmap0", r.bitmap0},
                  {"bitmap1", r.bitmap1},
                  {"fan_in0", r.fan_in0},
                  {"fan_in1", r.fan_in1},
                  {"edge_switch_identifier", r.edge_switch_identifier}});
  }
  const CongestionConfig& cc = c.congestion;
  json doc = {{"job", c.job},
              {"self", format_address(c.self)},
              {"ps", ps},
              {"values_per_packet", c.values_per_packet},
              {"scale", c.scale},
              {"first_aggregator", c.aggregators.first},
              {"num_aggregators", c.aggregators.count},
              {"index", to_string(c.index_policy)},
              {"loss_recovery", c.loss_recovery == LossRecovery::kTimeoutOnly ? "timeout" : "atp"},
              {"congestion",
               {{"enabled", cc.enabled},
                {"initial_window", cc.initial_window},
                {"min_window", cc.min_window},
                {"max_window", cc.max_window},
                {"initial_ssthresh", cc.initial_ssthresh},
                {"mtu_bytes", cc.mtu_bytes}}},
              {"retransmit_timeout_ns", c.retransmit_timeout.count()},
              {"max_retransmit_timeout_ns", c.max_retransmit_timeout.count()},
              {"progress_timeout_ns", c.progress_timeout.count()},
              {"initial_seq", c.initial_seq}};
  return doc.dump();
}

WorkerConfig worker_config_from_json(const std::string& text) {
  const json doc = parse_object(text, "worker config");
  check_keys(doc, "",
             {"job", "self", "ps", "values_per_packet", "scale", "first_aggregator", "num_aggregators", "index",
              "loss_recovery", "congestion", "retransmit_timeout_ns", "max_retransmit_timeout_ns",
              "progress_timeout_ns", "initial_seq"});
  WorkerConfig c;
  c.job = get_unsigned<JobId>(doc, "", "job");
  c.self = get_address(doc, "", "self");
  const json& routes = require(doc, "", "ps");
  if (!routes.is_array()) throw ControlError("ps: expected a list, got " + shown(routes));
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const std::string where = "ps[" + std::to_string(i) + "].";
    if (!routes[i].is_object()) throw ControlError(where.substr(0, where.size() - 1) + ": expected an object");
    check_keys(routes[i], where, {"ps", "bitmap0", "bitmap1", "fan_in0", "fan_in1", "edge_switch_identifier"});
    PsRoute r;
    r.ps = get_address(routes[i], where, "ps");
    r.bitmap0 = get_unsigned<std::uint32_t>(routes[i], where, "bitmap0");
    r.bitmap1 = get_unsigned<std::uint32_t>(routes[i], where, "bitmap1");
    r.fan_in0 = get_unsigned<std::uint8_t>(routes[i], where, "fan_in0");
    r.fan_in1 = get_unsigned<std::uint8_t>(routes[i], where, "fan_in1");
    r.edge_switch_identifier = get_unsigned<std::uint8_t>(routes[i], where, "edge_switch_identifier");
    c.ps.push_back(r);
  }
  c.values_per_packet = get_unsigned<std::uint16_t>(doc, "", "values_per_packet");
  c.scale = get_number(doc, "", "scale", 0, std::numeric_limits<double>::max());
  c.aggregators.first = get_unsigned<std::uint32_t>(doc, "", "first_aggregator");
  c.aggregators.count = get_unsigned<std::uint32_t>(doc, "", "num_aggregators");
  c.index_policy = index_policy(require(doc, "", "index"));
  const json& recovery = require(doc, "", "loss_recovery");
  if (recovery != "atp" && recovery != "timeout") {
    throw ControlError("loss_recovery: must be \"atp\" or \"timeout\", got " + shown(recovery));
  }
  c.loss_recovery = recovery == "timeout" ? LossRecovery::kTimeoutOnly : LossRecovery::kAtp;
  const json& cc = require(doc, "", "congestion");
  if (!cc.is_object()) throw ControlError("congestion: expected an object, got " + shown(cc));
  check_keys(cc, "congestion.",
             {"enabled", "initial_window", "min_window", "max_window", "initial_ssthresh", "mtu_bytes"});
  const json& enabled = require(cc, "congestion.", "enabled");
  if (!enabled.is_boolean()) throw ControlError("congestion.enabled: expected true or false, got " + shown(enabled));
  c.congestion.enabled = enabled.get<bool>();
  c.congestion.initial_window = get_unsigned<std::uint32_t>(cc, "congestion.", "initial_window");
  c.congestion.min_window = get_unsigned<std::uint32_t>(cc, "congestion.", "min_window");
  c.congestion.max_window = get_unsigned<std::uint32_t>(cc, "congestion.", "max_window");
  c.congestion.initial_ssthresh = get_unsigned<std::uint32_t>(cc, "congestion.", "initial_ssthresh");
  c.congestion.mtu_bytes = get_unsigned<std::uint32_t>(cc, "congestion.", "mtu_bytes");
  auto nanoseconds = [&doc](const char* key) {
    return Duration(
        static_cast<std::int64_t>(to_unsigned(require(doc, "", key), key, std::numeric_limits<std::int64_t>::max())));
  };
  c.retransmit_timeout = nanoseconds("retransmit_timeout_ns");
  c.max_retransmit_timeout = nanoseconds("max_retransmit_timeout_ns");
  c.progress_timeout = nanoseconds("progress_timeout_ns");
  c.initial_seq = get_unsigned<Seq>(doc, "", "initial_seq");
  return c;
}

std::string host_to_json(const UdpEndpoint& peer) { return json{{"peer", peer.to_string()}}.dump(); }

UdpEndpoint host_from_json(const std::string& text) {
  const json doc = parse_object(text, "host");
  check_keys(doc, "", {"peer"});
  const auto it = doc.find("peer");
  if (it == doc.end()) throw ControlError("peer: missing (the host's UDP address, like \"127.0.0.1:40001\")");
  if (!it->is_string()) throw ControlError("peer: expected an address like \"127.0.0.1:40001\", got " + shown(*it));
  const std::string& address = it->get_ref<const std::string&>();
  // "255.255.255.255:65535" is 21 bytes: anything much longer is not an address, and
  // UdpEndpoint::parse's message would quote all of it.
  if (address.size() > 32) throw ControlError("peer: '" + excerpt(address) + "' is not an IPv4 address and UDP port");
  UdpEndpoint peer;
  try {
    peer = UdpEndpoint::parse(address);
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
             {"job", "self", "multicast_group", "group_sizes", "values_per_packet", "first_aggregator",
              "num_aggregators", "max_window_seqs", "index"});
  PsConfig config;
  config.job = get_unsigned<JobId>(doc, "", "job");
  config.self = get_address(doc, "", "self");
  config.multicast_group = get_address(doc, "", "multicast_group");
  config.group_sizes = get_unsigned_list<std::uint8_t>(doc, "", "group_sizes");
  if (config.group_sizes.empty()) throw ControlError("group_sizes: must list at least one group");
  for (std::size_t g = 0; g < config.group_sizes.size(); ++g) {
    if (config.group_sizes[g] < 1 || config.group_sizes[g] > 32) {
      throw ControlError("group_sizes[" + std::to_string(g) + "]: must be 1..32, got " +
                         std::to_string(config.group_sizes[g]));
    }
  }
  if (config.group_sizes.size() > 32) throw ControlError("group_sizes: at most 32 groups");
  if (doc.contains("values_per_packet")) {
    config.values_per_packet = get_unsigned<std::uint16_t>(doc, "", "values_per_packet");
    if (config.values_per_packet < 1 || config.values_per_packet > kMaxValuesPerPacket) {
      throw ControlError("values_per_packet: must be 1.." + std::to_string(kMaxValuesPerPacket) + ", got " +
                         std::to_string(config.values_per_packet));
    }
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

// ---- the daemons' HTTP server ------------------------------------------------------------------

std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

using Clock = std::chrono::steady_clock;

// The request line and headers may add this much to a request's body: the most a request reads.
constexpr std::size_t kMaxRequestBytes = kMaxBodyBytes + (std::size_t{64} << 10);
// How often a connection waiting for its client looks whether it should give up.
constexpr auto kPollSlice = std::chrono::milliseconds(50);
// After the answer, how long the connection waits for the client to close (reading and dropping
// what it still sends) before closing it: a close with unread bytes resets the connection, and
// the reset can overtake the answer (a 413 for a body the client is still sending).
constexpr auto kLingerTime = std::chrono::milliseconds(250);

// What the connections of one server share with its thread pool.
struct ConnectionState {
  explicit ConnectionState(const ServerLimits& l) : limits(l) {}
  const ServerLimits limits;
  std::atomic<std::size_t> waiting{0};  // accepted connections no thread has taken up yet
  std::atomic<bool> stopping{false};    // the server is stopping: every connection gives up
};

// Set on the thread that runs a connection the pool refuses (too many waiting, or stopping):
// the server then answers it 503 at once instead of serving it.
thread_local bool t_refuse_connection = false;

// One connection's byte stream for httplib, with ServerLimits' bounds: reading the request must
// finish within request_deadline of the connection being taken up, writing the answer within
// request_deadline of its first byte, and either gives up after slow_request when other
// connections wait. At most kMaxRequestBytes are read.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, const ConnectionState& state) : sock_(sock), state_(state), phase_start_(Clock::now()) {}

  bool is_readable() const override { return used_ < filled_ || wait(POLLIN); }
  bool is_writable() const override { return wait(POLLOUT); }

  // After an interim "100 Continue" the body is read under the answer's deadline: still bounded.
  ssize_t read(char* ptr, size_t size) override {
    if (used_ == filled_) {
      if (received_ >= kMaxRequestBytes || !wait(POLLIN)) return -1;
      const ssize_t n = ::recv(sock_, buffer_, std::min(sizeof buffer_, kMaxRequestBytes - received_), 0);
      if (n <= 0) return n;  // 0: the client closed; -1: an error
      received_ += static_cast<std::size_t>(n);
      used_ = 0;
      filled_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, filled_ - used_);
    std::memcpy(ptr, buffer_ + used_, n);
    used_ += n;
    return static_cast<ssize_t>(n);
  }

  // All of it or -1 (httplib's write_format does not retry a partial write).
  ssize_t write(const char* ptr, size_t size) override {
    if (!writing_) {
      writing_ = true;
      phase_start_ = Clock::now();
    }
    for (std::size_t sent = 0; sent < size;) {
      if (!wait(POLLOUT)) return -1;
      const ssize_t n = ::send(sock_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  // Waits until the socket is ready for `events`; false when this phase (reading the request,
  // or writing the answer) is out of time, or must give its thread up.
  bool wait(short events) const {
    for (;;) {
      const Clock::duration in_phase = Clock::now() - phase_start_;
      if (state_.stopping || in_phase >= state_.limits.request_deadline ||
          (in_phase >= state_.limits.slow_request && state_.waiting > 0)) {
        return false;
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(state_.limits.request_deadline - in_phase);
      pollfd p{sock_, events, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::chrono::milliseconds>(kPollSlice, left).count()));
      if (ready > 0) return true;  // ready, or an error or hang-up that recv/send then reports
      if (ready < 0 && errno != EINTR) return false;
    }
  }

  using NameFunction = int (*)(int, sockaddr*, socklen_t*);
  void address(NameFunction name, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof a;
    ip.clear();
    port = 0;
    if (name(sock_, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
      ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
      port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
      ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
      port = ntohs(v6.sin6_port);
    }
    ip = text;
  }

  int sock_;
  const ConnectionState& state_;
  Clock::time_point phase_start_;  // when reading the request, then writing the answer, began
  bool writing_ = false;
  std::size_t received_ = 0;  // bytes of the request read from the socket
  char buffer_[4096];         // httplib reads headers a byte at a time: one recv per 4 KiB instead
  std::size_t used_ = 0, filled_ = 0;
};

// A request given as bytes, for answer_request: read with the same bound as a connection's.
class MemoryStream final : public httplib::Stream {
 public:
  MemoryStream(std::string_view request, std::string& answer) : request_(request), answer_(answer) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    if (read_ >= kMaxRequestBytes && read_ < request_.size()) return -1;
    const std::size_t n = std::min({size, request_.size() - read_, kMaxRequestBytes - read_});
    std::memcpy(ptr, request_.data() + read_, n);
    read_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    answer_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string_view request_;
  std::string& answer_;
  std::size_t read_ = 0;
};

// httplib's queue of accepted connections: up to limits.workers threads, started as
// connections come; at most limits.queued_connections waiting for one. A connection beyond
// that, or one accepted while the server stops, is refused (t_refuse_connection) on the
// calling thread, which is then the accept loop's: that costs it one non-blocking send.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(ConnectionState& state) : state_(state) {}
  ~ConnectionPool() override { shutdown(); }

  void enqueue(std::function<void()> connection) override {
    {
      std::lock_guard lock(mutex_);
      if (!shutting_down_ && pending_.size() < state_.limits.queued_connections) {
        pending_.push_back(std::move(connection));
        if (idle_ == 0 && threads_.size() < state_.limits.workers) threads_.emplace_back([this] { work(); });
        update_waiting();
        ready_.notify_one();
        return;
      }
    }
    run(connection, true);
  }

  // Stops taking connections, makes the ones being served give up (state_.stopping), refuses
  // the waiting ones and joins the threads.
  void shutdown() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
      threads.swap(threads_);
    }
    state_.stopping = true;
    ready_.notify_all();
    for (std::thread& t : threads) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      update_waiting();
      ready_.wait(lock, [this] { return shutting_down_ || !pending_.empty(); });
      --idle_;
      if (pending_.empty()) return;  // shutting down, nothing left to refuse
      std::function<void()> connection = std::move(pending_.front());
      pending_.pop_front();
      update_waiting();
      const bool refuse = shutting_down_;
      lock.unlock();
      run(connection, refuse);
      lock.lock();
    }
  }

  static void run(const std::function<void()>& connection, bool refuse) {
    t_refuse_connection = refuse;
    connection();  // ControlServer::process_and_close_socket: closes the socket, never throws
    t_refuse_connection = false;
  }

  // Connections that no idle thread is about to take up (under mutex_).
  void update_waiting() { state_.waiting = pending_.size() > idle_ ? pending_.size() - idle_ : 0; }

  ConnectionState& state_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> pending_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;  // threads waiting for a connection
  bool shutting_down_ = false;
};

// Why a request is refused before its body is read; nullopt when it may be read.
struct Refusal {
  int status;
  std::string message;
};
std::optional<Refusal> refuse_before_body(const httplib::Request& req) {
  if (req.has_header("Content-Encoding") && req.get_header_value("Content-Encoding") != "identity") {
    // A few compressed bytes could become gigabytes: httplib bounds the bytes read, not those
    // decompressed.
    return Refusal{415, "request bodies must not be compressed (Content-Encoding: " +
                            excerpt(req.get_header_value("Content-Encoding")) + ")"};
  }
  if (req.has_header("Transfer-Encoding")) {  // chunked: httplib reads it with no size limit
    return Refusal{411, "send the request body with a Content-Length header, not Transfer-Encoding: " +
                            excerpt(req.get_header_value("Transfer-Encoding"))};
  }
  if (!req.has_header("Content-Length")) {
    // httplib would read such a body until the client closes the connection.
    if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI") {
      return Refusal{411, excerpt(req.method) + " needs a Content-Length header"};
    }
    return std::nullopt;
  }
  const std::string length = req.get_header_value("Content-Length");
  const bool digits = !length.empty() && length.size() <= 19 &&
                      std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return Refusal{400, "Content-Length: expected a number of bytes, got '" + excerpt(length) + "'"};
  if (std::stoull(length) > kMaxBodyBytes) {
    return Refusal{413, "the request body is " + length + " bytes, more than the " + std::to_string(kMaxBodyBytes) +
                            " bytes a control request may have"};
  }
  // httplib parses such a body as a form, and refuses it above 8192 bytes (curl -d sends this type).
  if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0 &&
      std::stoull(length) > CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) {
    return Refusal{413, "the request body is " + length + " bytes, more than the " +
                            std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                            " bytes a form (Content-Type: application/x-www-form-urlencoded) may have; send it "
                            "with Content-Type: application/json"};
  }
  return std::nullopt;
}

// The sentence for an error httplib answers by itself (its response has no body).
std::string sentence_for(int status, const httplib::Request& req) {
  switch (status) {
    case 400:
      return "malformed HTTP request (a bad request line or header, or a body that did not arrive whole in time)";
    case 404:
      return "no such endpoint: " + excerpt(req.method) + " " + excerpt(req.path);
    case 413:
      return "the request body is too large (at most " + std::to_string(kMaxBodyBytes) + " bytes, " +
             std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) + " as a form)";
    case 414:
      return "the request line is longer than " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) + " bytes";
    case 415:
      return "unsupported Content-Encoding";
    case 416:
      return "Range requests are not supported";
    case 500:
      return "internal error";
    default:
      return "HTTP " + std::to_string(status);
  }
}

class ControlServer final : public httplib::Server {
 public:
  explicit ControlServer(const ServerLimits& limits) : state_(limits) {
    // Called by listen_after_bind() on the listening thread, before its accept loop.
    new_task_queue = [this] {
      state_.stopping = false;
      // httplib 0.11.4 listens with a backlog of 5: a burst of connections (a runner installing
      // jobs while others poll stats) beyond it has its SYNs dropped and waits a second for the
      // retransmission. Listening again on the bound socket only raises the backlog.
      ::listen(svr_sock_, SOMAXCONN);
      return new ConnectionPool(state_);
    };
    // httplib's default also sets SO_REUSEPORT, which lets a second daemon bind the same control
    // port silently; SO_REUSEADDR alone still allows a quick restart and makes "in use" an error.
    set_socket_options([](socket_t sock) {
      const int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    set_keep_alive_max_count(1);
    set_payload_max_length(kMaxBodyBytes);
    // A client that asks first ("Expect: 100-continue", as curl does for large bodies) is told
    // before it sends the body.
    set_expect_100_continue_handler([](const httplib::Request& req, httplib::Response& res) {
      const std::optional<Refusal> refusal = refuse_before_body(req);
      if (!refusal) return 100;
      res.status = refusal->status;
      res.set_content(error_body(refusal->message) + "\n", "application/json");
      return refusal->status;
    });
    set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      const std::optional<Refusal> refusal = refuse_before_body(req);
      if (!refusal) return HandlerResponse::Unhandled;
      res.status = refusal->status;
      res.set_content(error_body(refusal->message) + "\n", "application/json");
      return HandlerResponse::Handled;
    });
    set_error_handler(HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return HandlerResponse::Unhandled;  // a route's own error sentence
      res.set_content(error_body(sentence_for(res.status, req)) + "\n", "application/json");
      return HandlerResponse::Handled;
    }));
    set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
      std::string what = "an exception that is not a std::exception";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(error_body("internal error: " + excerpt(what, 200)) + "\n", "application/json");
    });
  }

  // httplib closes the listening socket only in stop() of a running server: a daemon made but
  // never started would keep its control port bound until the process ends.
  ~ControlServer() override {
    if (!is_running() && svr_sock_ != INVALID_SOCKET) ::close(svr_sock_.exchange(INVALID_SOCKET));
  }

  std::string answer(std::string_view request) {
    std::string answer;
    MemoryStream stream(request, answer);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
    return answer;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool served = false;
    if (t_refuse_connection) {
      static const std::string busy = [] {
        const std::string body = error_body("the control plane is busy or stopping; try again") + "\n";
        return "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n"
               "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
      }();
      [[maybe_unused]] const ssize_t n = ::send(sock, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      try {
        ConnectionStream stream(sock, state_);
        bool closed = false;
        served = process_request(stream, /*close_connection=*/true, closed, nullptr);
      } catch (...) {  // httplib catches the handlers' exceptions; this is for its own (bad_alloc)
      }
      linger(sock);
    }
    ::close(sock);
    return served;
  }

  // Sends end of file and drops what the client still sends until it closes: at most
  // kLingerTime or kMaxRequestBytes, and not while other connections wait for a thread.
  void linger(socket_t sock) const {
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + kLingerTime;
    char sink[4096];
    for (std::size_t dropped = 0; dropped < kMaxRequestBytes && !state_.stopping && state_.waiting == 0;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      pollfd p{sock, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(std::min(left, kPollSlice).count())) < 0) return;
      if (p.revents == 0) continue;  // nothing yet: look at the time and the waiting ones again
      const ssize_t n = ::recv(sock, sink, sizeof sink, MSG_DONTWAIT);
      if (n <= 0) return;
      dropped += static_cast<std::size_t>(n);
    }
  }

  ConnectionState state_;
};

}  // namespace

std::unique_ptr<httplib::Server> make_server(const ServerLimits& limits) {
  return std::make_unique<ControlServer>(limits);
}

std::string answer_request(httplib::Server& server, std::string_view request) {
  auto* control = dynamic_cast<ControlServer*>(&server);
  if (!control) throw std::invalid_argument("answer_request: the server was not made by control::make_server");
  return control->answer(request);
}

}  // namespace atp::control
