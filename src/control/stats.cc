// The codecs of the daemons' counters (stats.h): JSON both ways and Prometheus text, each from
// one list of the fields per row, so that the three cannot disagree on a key.
#include "atp/control/stats.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "json_fields.h"

namespace atp::control {
namespace {

using nlohmann::json;

// A running total (summed by operator+=, "_total" in Prometheus) or a level now (kept, a gauge).
enum class Kind : std::uint8_t { kCounter, kGauge };

// Each visitor below calls `visit(key, kind, field)` for every number of a row that is stored
// as such, in the order /metrics has always listed them where that is not key order (the PS's).
// `S` is the row's type, const or not, so that one list serves writing and reading.
//
// Each visitor asserts the size of what it walks, so that a field added to the struct fails the
// build until the visitor lists it (or says why not). A uint64 counter cannot hide in padding:
// the structs are 8-byte aligned, so their holes are smaller than one.

// SwitchStats' and SwitchPortStats' members, in their order: they are not all uint64 counters,
// so their size is checked against these copies of their layouts. A member added to one of them
// must be added here too, and to the visitor if it is a number of the document.
struct SwitchStatsLayout {
  std::string name;
  std::optional<SocketAddress> data;
  std::vector<std::string> interfaces;
  std::vector<SwitchThreadLoad> threads;
  SwitchCounters pipeline;
  std::uint64_t numbers[8];  // unknown_source .. aggregators_in_use
  EthernetCounters ethernet;
  std::uint64_t learned[2];  // mac_addresses, neighbors
  std::vector<SwitchJobStats> jobs;
  std::vector<SwitchPortStats> ports;
};
struct SwitchPortStatsLayout {
  PortId port;
  std::optional<SocketAddress> peer;
  std::string interface;
  std::uint64_t rx[2];  // rx_packets, rx_bytes
  EgressCounters egress;
  EgressCounters ingress;
  std::uint64_t rx_kernel_drops;
};

// The "switch" object of a switch's GET /stats.
template <class S, class Visit>
void visit_switch(S& s, Visit&& visit) {
  // SwitchStats also holds the name, addresses, threads and rows: its own numbers are checked by
  // its layout, those of the structs it holds by their size.
  static_assert(sizeof(SwitchStats) == sizeof(SwitchStatsLayout), "list every number of SwitchStats");
  static_assert(sizeof(SwitchCounters) == 7 * sizeof(std::uint64_t), "list every SwitchCounters field");
  static_assert(sizeof(EthernetCounters) == 8 * sizeof(std::uint64_t), "list every EthernetCounters field");
  visit("packets", Kind::kCounter, s.pipeline.packets);
  visit("malformed", Kind::kCounter, s.pipeline.malformed);
  visit("unknown_job", Kind::kCounter, s.pipeline.unknown_job);
  visit("not_admitted", Kind::kCounter, s.pipeline.not_admitted);
  visit("no_route", Kind::kCounter, s.pipeline.no_route);
  visit("too_wide", Kind::kCounter, s.pipeline.too_wide);
  visit("reclaimed", Kind::kCounter, s.pipeline.reclaimed);
  visit("unknown_source", Kind::kCounter, s.unknown_source);
  visit("no_port", Kind::kCounter, s.no_port);
  visit("truncated", Kind::kCounter, s.truncated);
  visit("send_failed", Kind::kCounter, s.send_failed);
  visit("handoff_drops", Kind::kCounter, s.handoff_drops);
  visit("aggregators", Kind::kGauge, s.aggregators);
  visit("aggregator_width", Kind::kGauge, s.aggregator_width);
  visit("aggregators_in_use", Kind::kGauge, s.aggregators_in_use);
  visit("atp_frames", Kind::kCounter, s.ethernet.atp_frames);
  visit("non_atp_frames", Kind::kCounter, s.ethernet.non_atp_frames);
  visit("malformed_frames", Kind::kCounter, s.ethernet.malformed_frames);
  visit("l2_forwarded", Kind::kCounter, s.ethernet.l2_forwarded);
  visit("l2_flooded", Kind::kCounter, s.ethernet.l2_flooded);
  visit("l2_same_port", Kind::kCounter, s.ethernet.l2_same_port);
  visit("no_neighbor", Kind::kCounter, s.ethernet.no_neighbor);
  visit("neighbor_refused", Kind::kCounter, s.ethernet.neighbor_refused);
  visit("mac_addresses", Kind::kGauge, s.mac_addresses);
  visit("neighbors", Kind::kGauge, s.neighbors);
}

template <class T, class Visit>
void visit_thread(T& t, Visit&& visit) {
  static_assert(sizeof(SwitchThreadLoad) == 3 * sizeof(std::uint64_t), "list every SwitchThreadLoad field");
  visit("packets", Kind::kCounter, t.packets);
  visit("handed_off", Kind::kCounter, t.handed_off);
  visit("handoff_drops", Kind::kCounter, t.handoff_drops);
}

// A job's row but its id and "installed" (a bool, written 0 or 1).
template <class C, class Visit>
void visit_job(C& c, Visit&& visit) {
  static_assert(sizeof(SwitchJobCounters) == 10 * sizeof(std::uint64_t), "list every SwitchJobCounters field");
  visit("aggregations", Kind::kCounter, c.aggregations);
  visit("completions", Kind::kCounter, c.completions);
  visit("collisions", Kind::kCounter, c.collisions);
  visit("resend_flushes", Kind::kCounter, c.resend_flushes);
  visit("duplicates", Kind::kCounter, c.duplicates);
  visit("forwarded", Kind::kCounter, c.forwarded);
  visit("deallocations", Kind::kCounter, c.deallocations);
  visit("reclaimed", Kind::kCounter, c.reclaimed);
  visit("ecn_merged", Kind::kCounter, c.ecn_merged);
  visit("round_shape_mismatches", Kind::kCounter, c.round_shape_mismatches);
}

// A port's row but its id, what it is ("peer" or "interface") and "drops" (queue_drops + lost).
template <class P, class Visit>
void visit_port(P& p, Visit&& visit) {
  // SwitchPortStats also holds its id, peer and interface: checked by its layout. The ingress
  // queue's packets and bytes are not listed (rx_packets and rx_bytes count them, stats.h).
  static_assert(sizeof(SwitchPortStats) == sizeof(SwitchPortStatsLayout), "list every number of SwitchPortStats");
  static_assert(sizeof(EgressCounters) == 8 * sizeof(std::uint64_t), "list every EgressCounters field");
  visit("rx_packets", Kind::kCounter, p.rx_packets);
  visit("rx_bytes", Kind::kCounter, p.rx_bytes);
  visit("tx_packets", Kind::kCounter, p.egress.packets);
  visit("tx_bytes", Kind::kCounter, p.egress.bytes);
  visit("queue_drops", Kind::kCounter, p.egress.queue_drops);
  visit("lost", Kind::kCounter, p.egress.lost);
  visit("duplicated", Kind::kCounter, p.egress.duplicated);
  visit("reordered", Kind::kCounter, p.egress.reordered);
  visit("ecn_marked", Kind::kCounter, p.egress.ecn_marked);
  visit("queue_depth", Kind::kGauge, p.egress.depth);
  visit("ingress_lost", Kind::kCounter, p.ingress.lost);
  visit("ingress_queue_drops", Kind::kCounter, p.ingress.queue_drops);
  visit("ingress_duplicated", Kind::kCounter, p.ingress.duplicated);
  visit("ingress_reordered", Kind::kCounter, p.ingress.reordered);
  visit("ingress_ecn_marked", Kind::kCounter, p.ingress.ecn_marked);
  visit("ingress_queue_depth", Kind::kGauge, p.ingress.depth);
  visit("rx_kernel_drops", Kind::kCounter, p.rx_kernel_drops);
}

// A PS's "daemon" object; `help` is its /metrics # HELP line.
template <class D, class Visit>
void visit_ps_daemon(D& d, Visit&& visit) {
  static_assert(sizeof(PsDaemonCounters) == 7 * sizeof(std::uint64_t), "list every PsDaemonCounters field");
  visit("datagrams_received", "UDP datagrams received.", d.datagrams_received);
  visit("malformed", "Datagrams that are not ATP packets, dropped.", d.malformed);
  visit("unknown_job", "ATP packets of jobs not installed here, dropped.", d.unknown_job);
  visit("foreign_source", "ATP packets not from their header's src at the ATP port (addressed by IP), dropped.",
        d.foreign_source);
  visit("datagrams_sent", "UDP datagrams sent to the uplink.", d.datagrams_sent);
  visit("send_failures", "Datagrams the kernel refused, lost.", d.send_failures);
  visit("relayed_to_local_worker", "Parameter packets for a worker on this host, relayed to it at 127.0.0.1.",
        d.relayed_to_local_worker);
}

// A PS's job row (atp::PsStats), every field a counter.
template <class J, class Visit>
void visit_ps_job(J&& j, Visit&& visit) {
  static_assert(sizeof(atp::PsStats) == 11 * sizeof(std::uint64_t), "list every atp::PsStats field");
  visit("packets_received", j.packets_received);
  visit("aggregations", j.aggregations);
  visit("overlaps_dropped", j.overlaps_dropped);
  visit("completions", j.completions);
  visit("parameters_sent", j.parameters_sent);
  visit("results_resent", j.results_resent);
  visit("collisions", j.collisions);
  visit("overflows", j.overflows);
  visit("stale", j.stale);
  visit("shape_mismatches", j.shape_mismatches);
  visit("dropped", j.dropped);
}

// ---- reading ----

const json& object_at(const json& doc, const std::string& where, const char* key) {
  const json& value = require(doc, where, key);
  if (!value.is_object()) throw ControlError(where + key + ": expected an object, got " + shown(value));
  return value;
}

const json& list_at(const json& doc, const std::string& where, const char* key) {
  const json& value = require(doc, where, key);
  if (!value.is_array()) throw ControlError(where + key + ": expected a list, got " + shown(value));
  return value;
}

std::string string_at(const json& doc, const std::string& where, const char* key) {
  const json& value = require(doc, where, key);
  if (!value.is_string()) throw ControlError(where + key + ": expected a string, got " + shown(value));
  return value.get<std::string>();
}

// "127.0.0.1:9000" at doc[key]; nullopt for "" when `empty_is_none`.
std::optional<SocketAddress> endpoint_at(const json& doc, const std::string& where, const char* key,
                                         bool empty_is_none) {
  const std::string text = string_at(doc, where, key);
  if (text.empty() && empty_is_none) return std::nullopt;
  // "255.255.255.255:65535" is 21 bytes; SocketAddress::parse's sentence would quote all of a longer one.
  if (text.size() > 32) throw ControlError(where + key + ": '" + excerpt(text) + "' is not an IPv4 address and port");
  try {
    return SocketAddress::parse(text);
  } catch (const std::invalid_argument& e) {
    throw ControlError(where + key + ": " + e.what());
  }
}

// Reads the fields a visitor lists into `row` from `object`, the row at `where`, and returns
// their keys (for check_keys, with the row's other keys).
template <class Row, class VisitRow>
std::vector<std::string_view> read_numbers(const json& object, const std::string& where, Row& row, VisitRow visit) {
  std::vector<std::string_view> keys;
  visit(row, [&](const char* key, auto, std::uint64_t& field) {
    field = get_unsigned<std::uint64_t>(object, where, key);
    keys.push_back(key);
  });
  return keys;
}

// The element `i` of `list` (the row at `where`, "jobs[2]."), which must be an object.
const json& row_at(const json& list, std::size_t i, const std::string& where) {
  if (!list[i].is_object()) {
    throw ControlError(where.substr(0, where.size() - 1) + ": expected an object, got " + shown(list[i]));
  }
  return list[i];
}

// ---- writing ----

template <class Row, class VisitRow>
void write_numbers(json& object, const Row& row, VisitRow visit) {
  visit(row, [&](const char* key, auto, std::uint64_t field) { object[key] = field; });
}

// `value` as a Prometheus label value, without its quotes: the text format escapes a backslash,
// a double quote and a line feed (\\, \" and \n); every other byte is itself.
std::string label_value(std::string_view value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      escaped += '\\';
      escaped += c;
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// One Prometheus sample's value and kind, by key: std::map, so families come out in key order.
using Samples = std::map<std::string, std::pair<Kind, std::uint64_t>>;

template <class Row, class VisitRow>
void add_samples(Samples& samples, const Row& row, VisitRow visit) {
  visit(row, [&](const char* key, Kind kind, std::uint64_t field) { samples[key] = {kind, field}; });
}

// A port's egress or ingress counters from before a restart added to the live ones; the queue's
// depth is what it holds now.
void add_queue_counters(EgressCounters& sum, const EgressCounters& earlier) {
  static_assert(sizeof(EgressCounters) == 8 * sizeof(std::uint64_t), "add every EgressCounters counter");
  sum.packets += earlier.packets;
  sum.bytes += earlier.bytes;
  sum.lost += earlier.lost;
  sum.queue_drops += earlier.queue_drops;
  sum.duplicated += earlier.duplicated;
  sum.reordered += earlier.reordered;
  sum.ecn_marked += earlier.ecn_marked;
}

std::uint64_t port_drops(const SwitchPortStats& p) { return p.egress.queue_drops + p.egress.lost; }

}  // namespace

EthernetCounters& operator+=(EthernetCounters& sum, const EthernetCounters& c) {
  static_assert(sizeof(EthernetCounters) == 8 * sizeof(std::uint64_t), "sum every EthernetCounters field");
  sum.atp_frames += c.atp_frames;
  sum.non_atp_frames += c.non_atp_frames;
  sum.malformed_frames += c.malformed_frames;
  sum.l2_forwarded += c.l2_forwarded;
  sum.l2_flooded += c.l2_flooded;
  sum.l2_same_port += c.l2_same_port;
  sum.no_neighbor += c.no_neighbor;
  sum.neighbor_refused += c.neighbor_refused;
  return sum;
}

SwitchStats& SwitchStats::operator+=(const SwitchStats& earlier) {
  // "switch": the counters summed (a restarted switch counts from zero again); aggregators,
  // aggregators_in_use, mac_addresses and neighbors are these (gauges). The threads are these:
  // a thread's load is one process's, and the restarted one may run another number of them.
  std::vector<std::uint64_t> totals;
  visit_switch(earlier, [&](const char*, Kind, std::uint64_t v) { totals.push_back(v); });
  std::size_t i = 0;
  visit_switch(*this, [&](const char*, Kind kind, std::uint64_t& v) {
    if (kind == Kind::kCounter) v += totals[i];
    ++i;
  });
  for (const SwitchJobStats& e : earlier.jobs) {
    const auto same = std::find_if(jobs.begin(), jobs.end(), [&](const SwitchJobStats& j) { return j.job == e.job; });
    if (same == jobs.end()) {
      jobs.push_back(e);
      jobs.back().installed = false;  // the restart removed it; it was not installed again
    } else {
      same->counters += e.counters;  // installed: this snapshot's
    }
  }
  for (const SwitchPortStats& e : earlier.ports) {
    const auto same =
        std::find_if(ports.begin(), ports.end(), [&](const SwitchPortStats& p) { return p.port == e.port; });
    if (same == ports.end()) {
      ports.push_back(e);
    } else {
      same->rx_packets += e.rx_packets;
      same->rx_bytes += e.rx_bytes;
      add_queue_counters(same->egress, e.egress);
      add_queue_counters(same->ingress, e.ingress);
      same->rx_kernel_drops += e.rx_kernel_drops;
    }
  }
  // Rows only `earlier` had were appended: back into the documented order, by id.
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const SwitchJobStats& a, const SwitchJobStats& b) { return a.job < b.job; });
  std::stable_sort(ports.begin(), ports.end(),
                   [](const SwitchPortStats& a, const SwitchPortStats& b) { return a.port < b.port; });
  return *this;
}

std::string to_json(const SwitchStats& s) {
  json doc;
  doc["name"] = s.name;
  if (s.data) {
    doc["data"] = s.data->to_string();
  } else {
    doc["interfaces"] = s.interfaces;
  }
  doc["threads"] = json::array();
  for (const SwitchThreadLoad& t : s.threads) {
    json row;
    write_numbers(row, t, [](auto& r, auto&& v) { visit_thread(r, v); });
    doc["threads"].push_back(std::move(row));
  }
  json sw;
  write_numbers(sw, s, [](auto& r, auto&& v) { visit_switch(r, v); });
  doc["switch"] = std::move(sw);
  doc["jobs"] = json::array();
  for (const SwitchJobStats& j : s.jobs) {
    json row = {{"job", j.job}, {"installed", j.installed ? 1 : 0}};
    write_numbers(row, j.counters, [](auto& r, auto&& v) { visit_job(r, v); });
    doc["jobs"].push_back(std::move(row));
  }
  doc["ports"] = json::array();
  for (const SwitchPortStats& p : s.ports) {
    json row = {{"port", p.port}, {"drops", port_drops(p)}};
    if (s.data) {
      row["peer"] = p.peer ? p.peer->to_string() : std::string();
    } else {
      row["interface"] = p.interface;
    }
    write_numbers(row, p, [](auto& r, auto&& v) { visit_port(r, v); });
    doc["ports"].push_back(std::move(row));
  }
  return doc.dump(2);
}

SwitchStats switch_stats_from_json(const std::string& text) {
  const json doc = parse_object(text, "switch stats");
  SwitchStats s;
  const bool udp = doc.contains("data");
  if (!udp && !doc.contains("interfaces")) {
    throw ControlError("data: missing (or interfaces, on a switch of interface ports)");
  }
  check_keys(doc, "", {"name", udp ? "data" : "interfaces", "threads", "switch", "jobs", "ports"});
  s.name = string_at(doc, "", "name");
  if (udp) {
    s.data = endpoint_at(doc, "", "data", false);
  } else {
    const json& names = list_at(doc, "", "interfaces");
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!names[i].is_string()) {
        throw ControlError("interfaces[" + std::to_string(i) + "]: expected a string, got " + shown(names[i]));
      }
      s.interfaces.push_back(names[i].get<std::string>());
    }
  }
  const json& threads = list_at(doc, "", "threads");
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const std::string where = "threads[" + std::to_string(i) + "].";
    const json& row = row_at(threads, i, where);
    SwitchThreadLoad t;
    check_keys(row, where, read_numbers(row, where, t, [](auto& r, auto&& v) { visit_thread(r, v); }));
    s.threads.push_back(t);
  }
  const json& sw = object_at(doc, "", "switch");
  check_keys(sw, "switch.", read_numbers(sw, "switch.", s, [](auto& r, auto&& v) { visit_switch(r, v); }));
  const json& jobs = list_at(doc, "", "jobs");
  std::set<JobId> job_ids;  // each job is one row: a second would be summed or shown twice
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::string where = "jobs[" + std::to_string(i) + "].";
    const json& row = row_at(jobs, i, where);
    SwitchJobStats j;
    j.job = get_unsigned<JobId>(row, where, "job");
    if (!job_ids.insert(j.job).second) {
      throw ControlError(where + "job: job " + std::to_string(j.job) + " is in an earlier row too");
    }
    const auto installed = get_unsigned<std::uint64_t>(row, where, "installed");
    if (installed > 1) throw ControlError(where + "installed: must be 0 or 1, got " + std::to_string(installed));
    j.installed = installed == 1;
    std::vector<std::string_view> keys =
        read_numbers(row, where, j.counters, [](auto& r, auto&& v) { visit_job(r, v); });
    keys.insert(keys.end(), {"job", "installed"});
    check_keys(row, where, keys);
    s.jobs.push_back(j);
  }
  const json& ports = list_at(doc, "", "ports");
  std::set<PortId> port_ids;  // each port is one row, as each job
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const std::string where = "ports[" + std::to_string(i) + "].";
    const json& row = row_at(ports, i, where);
    SwitchPortStats p;
    p.port = get_unsigned<PortId>(row, where, "port");
    if (!port_ids.insert(p.port).second) {
      throw ControlError(where + "port: port " + std::to_string(p.port) + " is in an earlier row too");
    }
    if (udp) {
      p.peer = endpoint_at(row, where, "peer", true);
    } else {
      p.interface = string_at(row, where, "interface");
    }
    std::vector<std::string_view> keys = read_numbers(row, where, p, [](auto& r, auto&& v) { visit_port(r, v); });
    const auto drops = get_unsigned<std::uint64_t>(row, where, "drops");
    if (drops != port_drops(p)) {
      throw ControlError(where + "drops: must be queue_drops + lost (" + std::to_string(port_drops(p)) + "), got " +
                         std::to_string(drops));
    }
    keys.insert(keys.end(), {"port", "drops", udp ? "peer" : "interface"});
    check_keys(row, where, keys);
    s.ports.push_back(p);
  }
  return s;
}

std::string to_prometheus(const SwitchStats& s) {
  std::ostringstream out;
  auto metric = [](const std::string& prefix, const std::string& key, Kind kind) {
    return prefix + key + (kind == Kind::kGauge ? "" : "_total");
  };
  auto family = [&](const std::string& name, Kind kind) {
    out << "# TYPE " << name << (kind == Kind::kGauge ? " gauge\n" : " counter\n");
  };
  const std::string switch_label = "switch=\"" + label_value(s.name) + "\"";
  Samples switch_samples;
  add_samples(switch_samples, s, [](auto& r, auto&& v) { visit_switch(r, v); });
  for (const auto& [key, sample] : switch_samples) {
    const std::string name = metric("atp_switch_", key, sample.first);
    family(name, sample.first);
    out << name << "{" << switch_label << "} " << sample.second << "\n";
  }
  // Per-job and per-port families: one per key of a row, each listing every row.
  auto group = [&](const std::vector<std::pair<std::uint64_t, Samples>>& rows, const char* label, const char* prefix) {
    if (rows.empty()) return;
    for (const auto& [key, first] : rows.front().second) {
      const std::string name = metric(prefix, key, first.first);
      family(name, first.first);
      for (const auto& [id, samples] : rows) {
        out << name << "{" << switch_label << "," << label << "=\"" << id << "\"} " << samples.at(key).second << "\n";
      }
    }
  };
  std::vector<std::pair<std::uint64_t, Samples>> jobs;
  for (const SwitchJobStats& j : s.jobs) {
    Samples samples{{"installed", {Kind::kGauge, j.installed ? 1 : 0}}};
    add_samples(samples, j.counters, [](auto& r, auto&& v) { visit_job(r, v); });
    jobs.emplace_back(j.job, std::move(samples));
  }
  group(jobs, "job", "atp_switch_job_");
  std::vector<std::pair<std::uint64_t, Samples>> ports;
  for (const SwitchPortStats& p : s.ports) {
    Samples samples{{"drops", {Kind::kCounter, port_drops(p)}}};
    add_samples(samples, p, [](auto& r, auto&& v) { visit_port(r, v); });
    ports.emplace_back(p.port, std::move(samples));
  }
  group(ports, "port", "atp_switch_port_");
  return out.str();
}

// ---- a PS's ----

std::string to_json(const PsStats& s) {
  json doc;
  doc["data"] = s.data.to_string();
  doc["uplink"] = s.uplink ? s.uplink->to_string() : "";
  json daemon;
  visit_ps_daemon(s.daemon, [&](const char* key, const char*, std::uint64_t v) { daemon[key] = v; });
  doc["daemon"] = std::move(daemon);
  doc["jobs"] = json::object();
  for (const auto& [id, job] : s.jobs) {
    json row;
    visit_ps_job(job, [&](const char* key, std::uint64_t v) { row[key] = v; });
    doc["jobs"][std::to_string(id)] = std::move(row);
  }
  return doc.dump(2);
}

PsStats ps_stats_from_json(const std::string& text) {
  const json doc = parse_object(text, "PS stats");
  check_keys(doc, "", {"data", "uplink", "daemon", "jobs"});
  PsStats s;
  s.data = *endpoint_at(doc, "", "data", false);
  s.uplink = endpoint_at(doc, "", "uplink", true);
  const json& daemon = object_at(doc, "", "daemon");
  std::vector<std::string_view> keys;
  visit_ps_daemon(s.daemon, [&](const char* key, const char*, std::uint64_t& v) {
    v = get_unsigned<std::uint64_t>(daemon, "daemon.", key);
    keys.push_back(key);
  });
  check_keys(daemon, "daemon.", keys);
  for (const auto& item : object_at(doc, "", "jobs").items()) {
    // Not a structured binding: clang 14 (the fuzz build) refuses a lambda naming one.
    const std::string& name = item.key();
    const json& row = item.value();
    const std::string where = "jobs." + excerpt(name) + ".";
    JobId id = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (name.empty() || error != std::errc() || end != name.data() + name.size()) {
      throw ControlError("jobs." + excerpt(name) + ": not a job id (0..65535)");
    }
    // One spelling per job ("01" would be a second row of job 1, merged or dropped unseen).
    if (std::to_string(id) != name) {
      throw ControlError("jobs." + excerpt(name) + ": job " + std::to_string(id) + " is written " + std::to_string(id) +
                         ", without leading zeros");
    }
    if (!row.is_object()) throw ControlError("jobs." + excerpt(name) + ": expected an object, got " + shown(row));
    atp::PsStats job;
    keys.clear();
    visit_ps_job(job, [&](const char* key, std::uint64_t& v) {
      v = get_unsigned<std::uint64_t>(row, where, key);
      keys.push_back(key);
    });
    check_keys(row, where, keys);
    if (!s.jobs.emplace(id, job).second) {
      throw ControlError("jobs." + excerpt(name) + ": job " + std::to_string(id) + " is listed twice");
    }
  }
  return s;
}

std::string to_prometheus(const PsStats& s) {
  std::ostringstream o;
  visit_ps_daemon(s.daemon, [&](const char* key, const char* help, std::uint64_t v) {
    o << "# HELP atp_ps_" << key << "_total " << help << "\n# TYPE atp_ps_" << key << "_total counter\natp_ps_" << key
      << "_total " << v << "\n";
  });
  o << "# HELP atp_ps_jobs Jobs installed.\n# TYPE atp_ps_jobs gauge\natp_ps_jobs " << s.jobs.size() << "\n";
  // One family per job counter, each listing every job.
  std::vector<const char*> keys;
  std::map<JobId, std::vector<std::uint64_t>> values;
  for (const auto& [id, job] : s.jobs) {
    keys.clear();
    std::vector<std::uint64_t>& row = values[id];  // clang 14 refuses a lambda naming a structured binding
    visit_ps_job(job, [&](const char* key, std::uint64_t v) {
      keys.push_back(key);
      row.push_back(v);
    });
  }
  if (keys.empty()) visit_ps_job(atp::PsStats{}, [&](const char* key, std::uint64_t) { keys.push_back(key); });
  for (std::size_t k = 0; k < keys.size(); ++k) {
    o << "# TYPE atp_ps_job_" << keys[k] << "_total counter\n";
    for (const auto& [id, v] : values) {
      o << "atp_ps_job_" << keys[k] << "_total{job=\"" << id << "\"} " << v[k] << "\n";
    }
  }
  return o.str();
}

}  // namespace atp::control
