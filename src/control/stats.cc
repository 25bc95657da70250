// The daemons' counters documents (stats.h) as JSON, both ways, from stats_fields.h's lists of
// the fields per row (which stats_prometheus.cc exposes too), and their sums across restarts.
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

#include "atp/control/json_fields.h"
#include "stats_fields.h"

namespace atp::control {
namespace {

using nlohmann::json;
using namespace stats_fields;  // NOLINT(google-build-using-namespace): the rows' lists, this file's vocabulary

// ---- reading ----

// "127.0.0.1:9000" at doc[key]; nullopt for "" when `empty_is_none`.
std::optional<SocketAddress> endpoint_at(const json& doc, const std::string& where, const char* key,
                                         bool empty_is_none) {
  const std::string text = get_string(doc, where, key);
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
    json row = {{"job", j.job}, {"name", j.name}, {"installed", j.installed ? 1 : 0}};
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
      if (!p.neighbour.empty()) row["switch"] = p.neighbour;
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
  s.name = get_string(doc, "", "name");
  if (udp) {
    s.data = endpoint_at(doc, "", "data", false);
  } else {
    const json& names = get_list(doc, "", "interfaces");
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!names[i].is_string()) {
        throw ControlError("interfaces[" + std::to_string(i) + "]: expected a string, got " + shown(names[i]));
      }
      s.interfaces.push_back(names[i].get<std::string>());
    }
  }
  const json& threads = get_list(doc, "", "threads");
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const std::string where = "threads[" + std::to_string(i) + "].";
    const json& row = row_at(threads, i, where);
    SwitchThreadLoad t;
    check_keys(row, where, read_numbers(row, where, t, [](auto& r, auto&& v) { visit_thread(r, v); }));
    s.threads.push_back(t);
  }
  const json& sw = get_object(doc, "", "switch");
  check_keys(sw, "switch.", read_numbers(sw, "switch.", s, [](auto& r, auto&& v) { visit_switch(r, v); }));
  const json& jobs = get_list(doc, "", "jobs");
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
    j.name = get_string(row, where, "name");
    std::vector<std::string_view> keys =
        read_numbers(row, where, j.counters, [](auto& r, auto&& v) { visit_job(r, v); });
    keys.insert(keys.end(), {"job", "name", "installed"});
    check_keys(row, where, keys);
    s.jobs.push_back(j);
  }
  const json& ports = get_list(doc, "", "ports");
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
      p.interface = get_string(row, where, "interface");
      if (row.contains("switch")) p.neighbour = get_string(row, where, "switch");
    }
    std::vector<std::string_view> keys = read_numbers(row, where, p, [](auto& r, auto&& v) { visit_port(r, v); });
    const auto drops = get_unsigned<std::uint64_t>(row, where, "drops");
    if (drops != port_drops(p)) {
      throw ControlError(where + "drops: must be queue_drops + lost (" + std::to_string(port_drops(p)) + "), got " +
                         std::to_string(drops));
    }
    keys.insert(keys.end(), {"port", "drops", udp ? "peer" : "interface"});
    if (!udp) keys.push_back("switch");
    check_keys(row, where, keys);
    s.ports.push_back(p);
  }
  return s;
}

// ---- a PS's ----

std::string to_json(const PsStats& s) {
  json doc;
  doc["data"] = s.data.to_string();
  doc["uplink"] = s.uplink ? s.uplink->to_string() : "";
  json daemon;
  visit_ps_daemon(s.daemon, [&](const char* key, std::uint64_t v) { daemon[key] = v; });
  doc["daemon"] = std::move(daemon);
  doc["jobs"] = json::object();
  for (const auto& [id, job] : s.jobs) {
    json row;
    const auto named = s.job_names.find(id);
    row["name"] = named == s.job_names.end() ? std::string() : named->second;
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
  const json& daemon = get_object(doc, "", "daemon");
  std::vector<std::string_view> keys;
  visit_ps_daemon(s.daemon, [&](const char* key, std::uint64_t& v) {
    v = get_unsigned<std::uint64_t>(daemon, "daemon.", key);
    keys.push_back(key);
  });
  check_keys(daemon, "daemon.", keys);
  for (const auto& item : get_object(doc, "", "jobs").items()) {
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
    keys.assign({"name"});
    visit_ps_job(job, [&](const char* key, std::uint64_t& v) {
      v = get_unsigned<std::uint64_t>(row, where, key);
      keys.push_back(key);
    });
    check_keys(row, where, keys);
    if (!s.jobs.emplace(id, job).second) {
      throw ControlError("jobs." + excerpt(name) + ": job " + std::to_string(id) + " is listed twice");
    }
    s.job_names.emplace(id, get_string(row, where, "name"));
  }
  return s;
}

}  // namespace atp::control
