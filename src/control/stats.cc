// The codecs of the daemons' counters (stats.h): JSON both ways and Prometheus text, each from
// one list of the fields per row, so that the three cannot disagree on a key.
#include "atp/control/stats.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

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
  std::string neighbour;
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
  static_assert(sizeof(SwitchJobCounters) == 11 * sizeof(std::uint64_t), "list every SwitchJobCounters field");
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
  visit("table_marks", Kind::kCounter, c.table_marks);
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

// A PS's "daemon" object.
template <class D, class Visit>
void visit_ps_daemon(D& d, Visit&& visit) {
  static_assert(sizeof(PsDaemonCounters) == 7 * sizeof(std::uint64_t), "list every PsDaemonCounters field");
  visit("datagrams_received", d.datagrams_received);
  visit("malformed", d.malformed);
  visit("unknown_job", d.unknown_job);
  visit("foreign_source", d.foreign_source);
  visit("datagrams_sent", d.datagrams_sent);
  visit("send_failures", d.send_failures);
  visit("relayed_to_local_worker", d.relayed_to_local_worker);
}

// A PS's job row (atp::PsStats), every field a counter.
template <class J, class Visit>
void visit_ps_job(J&& j, Visit&& visit) {
  static_assert(sizeof(atp::PsStats) == 12 * sizeof(std::uint64_t), "list every atp::PsStats field");
  visit("packets_received", j.packets_received);
  visit("aggregations", j.aggregations);
  visit("overlaps_dropped", j.overlaps_dropped);
  visit("completions", j.completions);
  visit("parameters_sent", j.parameters_sent);
  visit("results_resent", j.results_resent);
  visit("collisions", j.collisions);
  visit("overflows", j.overflows);
  visit("resend_requests", j.resend_requests);
  visit("stale", j.stale);
  visit("shape_mismatches", j.shape_mismatches);
  visit("dropped", j.dropped);
}

// ---- Prometheus exposition (prometheus-cpp's text serializer) ----

// How one field of a row is exposed: its metric family, the family's help, and the label that
// tells the field from the family's other fields, if any (a drop's reason, a queue's direction).
// Counters end in _total and name their unit (packets, bytes, datagrams), as Prometheus' naming
// rules ask; jobs are labelled atp_job and atp_job_id, not job, which Prometheus gives its scrape
// targets.
struct Exposed {
  const char* family;
  const char* help;
  const char* label = nullptr;
  const char* value = nullptr;
};
using Metrics = std::initializer_list<std::pair<std::string_view, Exposed>>;

constexpr const char* kDrops = "Packets the switch dropped, by reason (docs/runtime.md).";
constexpr const char* kPortDrops = "Packets a port dropped or lost, by reason (lost: its loss fault).";
constexpr const char* kPsDrops = "Datagrams the PS dropped, by reason.";
constexpr const char* kPsJobDrops = "A job's packets the PS discarded, by reason.";

const Metrics kSwitchMetrics = {
    {"packets", {"atp_switch_packets_total", "ATP packets the switch's pipelines processed."}},
    {"malformed", {"atp_switch_dropped_packets_total", kDrops, "reason", "malformed"}},
    {"unknown_job", {"atp_switch_dropped_packets_total", kDrops, "reason", "unknown_job"}},
    {"not_admitted", {"atp_switch_dropped_packets_total", kDrops, "reason", "not_admitted"}},
    {"no_route", {"atp_switch_dropped_packets_total", kDrops, "reason", "no_route"}},
    {"too_wide", {"atp_switch_dropped_packets_total", kDrops, "reason", "too_wide"}},
    {"reclaimed", {"atp_switch_aggregators_reclaimed_total", "Aggregators the reclaim timeout freed (paper 3.7)."}},
    {"unknown_source", {"atp_switch_dropped_packets_total", kDrops, "reason", "unknown_source"}},
    {"no_port", {"atp_switch_dropped_packets_total", kDrops, "reason", "no_port"}},
    {"truncated", {"atp_switch_dropped_packets_total", kDrops, "reason", "truncated"}},
    {"send_failed", {"atp_switch_dropped_packets_total", kDrops, "reason", "send_failed"}},
    {"handoff_drops", {"atp_switch_dropped_packets_total", kDrops, "reason", "handoff_full"}},
    {"aggregators", {"atp_switch_aggregators", "Aggregators in the table (0: the switch is not ATP-capable)."}},
    {"aggregator_width", {"atp_switch_aggregator_width", "int32 values an aggregator holds (0: not ATP-capable)."}},
    {"aggregators_in_use", {"atp_switch_aggregators_in_use", "Aggregators holding a fragment now."}},
    {"atp_frames", {"atp_switch_received_frames_total", "Frames on interface ports, by kind.", "kind", "atp"}},
    {"non_atp_frames", {"atp_switch_received_frames_total", "Frames on interface ports, by kind.", "kind", "other"}},
    {"malformed_frames", {"atp_switch_dropped_packets_total", kDrops, "reason", "malformed_frame"}},
    {"l2_forwarded", {"atp_switch_l2_frames_total", "Frames switched by MAC, by how.", "action", "forwarded"}},
    {"l2_flooded", {"atp_switch_l2_frames_total", "Frames switched by MAC, by how.", "action", "flooded"}},
    {"l2_same_port", {"atp_switch_dropped_packets_total", kDrops, "reason", "l2_same_port"}},
    {"no_neighbor", {"atp_switch_dropped_packets_total", kDrops, "reason", "no_neighbor"}},
    {"neighbor_refused",
     {"atp_switch_neighbors_refused_total", "IPv4-to-MAC entries not learned: the IP's route is another port."}},
    {"mac_addresses", {"atp_switch_mac_addresses", "Source MAC addresses learned (interface ports)."}},
    {"neighbors", {"atp_switch_neighbors", "IPv4-to-MAC entries learned (interface ports)."}},
};

const Metrics kSwitchJobMetrics = {
    {"aggregations", {"atp_switch_job_aggregations_total", "A job's gradient packets added into an aggregator."}},
    {"completions", {"atp_switch_job_completions_total", "A job's aggregates completed at their fan-in."}},
    {"collisions", {"atp_switch_job_collisions_total", "A job's packets sent on past an aggregator held by another."}},
    {"resend_flushes", {"atp_switch_job_resend_flushes_total", "A job's aggregators flushed by a resend."}},
    {"duplicates", {"atp_switch_job_duplicates_total", "A job's packets whose contribution was in already, dropped."}},
    {"forwarded", {"atp_switch_job_forwarded_packets_total", "A job's packets sent on without aggregation."}},
    {"deallocations", {"atp_switch_job_deallocations_total", "A job's aggregators freed by its parameter packets."}},
    {"reclaimed", {"atp_switch_job_aggregators_reclaimed_total", "A job's aggregators the reclaim timeout freed."}},
    {"ecn_merged", {"atp_switch_job_ecn_merged_total", "A job's ECN-marked packets whose mark an aggregator kept."}},
    {"round_shape_mismatches",
     {"atp_switch_job_round_shape_mismatches_total", "A job's packets of another round shape, kept apart."}},
    {"table_marks",
     {"atp_switch_job_table_marks_total",
      "A job's fragments braked off a contended table it held over its share of, marked ECN."}},
};

const Metrics kPortMetrics = {
    {"rx_packets", {"atp_switch_port_received_packets_total", "Packets received from the port's peer."}},
    {"rx_bytes", {"atp_switch_port_received_bytes_total", "Bytes received from the port's peer."}},
    {"tx_packets", {"atp_switch_port_transmitted_packets_total", "Packets sent to the port's peer."}},
    {"tx_bytes", {"atp_switch_port_transmitted_bytes_total", "Bytes sent to the port's peer."}},
    {"queue_drops", {"atp_switch_port_dropped_packets_total", kPortDrops, "reason", "egress_queue_full"}},
    {"lost", {"atp_switch_port_dropped_packets_total", kPortDrops, "reason", "egress_lost"}},
    {"duplicated",
     {"atp_switch_port_duplicated_packets_total", "Packets the port's fault duplicated.", "direction", "egress"}},
    {"reordered",
     {"atp_switch_port_reordered_packets_total", "Packets the port's fault reordered.", "direction", "egress"}},
    {"ecn_marked",
     {"atp_switch_port_ecn_marked_packets_total", "Packets a port's queue marked.", "direction", "egress"}},
    {"queue_depth",
     {"atp_switch_port_queue_depth_packets", "Packets a port's queue holds now.", "direction", "egress"}},
    {"ingress_lost", {"atp_switch_port_dropped_packets_total", kPortDrops, "reason", "ingress_lost"}},
    {"ingress_queue_drops", {"atp_switch_port_dropped_packets_total", kPortDrops, "reason", "ingress_queue_full"}},
    {"ingress_duplicated",
     {"atp_switch_port_duplicated_packets_total", "Packets the port's fault duplicated.", "direction", "ingress"}},
    {"ingress_reordered",
     {"atp_switch_port_reordered_packets_total", "Packets the port's fault reordered.", "direction", "ingress"}},
    {"ingress_ecn_marked",
     {"atp_switch_port_ecn_marked_packets_total", "Packets a port's queue marked.", "direction", "ingress"}},
    {"ingress_queue_depth",
     {"atp_switch_port_queue_depth_packets", "Packets a port's queue holds now.", "direction", "ingress"}},
    {"rx_kernel_drops", {"atp_switch_port_dropped_packets_total", kPortDrops, "reason", "kernel"}},
};

const Metrics kPsMetrics = {
    {"datagrams_received", {"atp_ps_received_datagrams_total", "UDP datagrams the PS received."}},
    {"malformed", {"atp_ps_dropped_datagrams_total", kPsDrops, "reason", "malformed"}},
    {"unknown_job", {"atp_ps_dropped_datagrams_total", kPsDrops, "reason", "unknown_job"}},
    {"foreign_source", {"atp_ps_dropped_datagrams_total", kPsDrops, "reason", "foreign_source"}},
    {"datagrams_sent", {"atp_ps_sent_datagrams_total", "UDP datagrams the PS sent."}},
    {"send_failures", {"atp_ps_dropped_datagrams_total", kPsDrops, "reason", "send_failed"}},
    {"relayed_to_local_worker",
     {"atp_ps_relayed_datagrams_total", "Parameter packets relayed to a worker on the PS's host."}},
};

const Metrics kPsJobMetrics = {
    {"packets_received", {"atp_ps_job_received_packets_total", "A job's gradient packets the PS received."}},
    {"aggregations", {"atp_ps_job_aggregations_total", "A job's packets merged into a fragment's sum."}},
    {"overlaps_dropped", {"atp_ps_job_dropped_packets_total", kPsJobDrops, "reason", "overlap"}},
    {"completions", {"atp_ps_job_completions_total", "A job's fragments completed."}},
    {"parameters_sent", {"atp_ps_job_sent_parameters_total", "A job's parameter packets multicast."}},
    {"results_resent", {"atp_ps_job_resent_results_total", "A job's results and requests sent again to a worker."}},
    {"collisions", {"atp_ps_job_collisions_total", "A job's fragments completed with a collision (index rehashed)."}},
    {"overflows", {"atp_ps_job_overflows_total", "A job's fragments that overflowed int32 and went float32."}},
    {"resend_requests",
     {"atp_ps_job_resend_requests_total", "Resend requests a job's PS sent to workers whose contribution it lacked."}},
    {"stale", {"atp_ps_job_dropped_packets_total", kPsJobDrops, "reason", "stale"}},
    {"shape_mismatches", {"atp_ps_job_shape_mismatches_total", "A job's fragments whose workers' rounds differed."}},
    {"dropped", {"atp_ps_job_dropped_packets_total", kPsJobDrops, "reason", "invalid"}},
};

// The table's entry of `key`. Every field a visitor lists has one: a field added without one is
// this std::logic_error at the first scrape, which stats_test makes.
const Exposed& exposed(const Metrics& metrics, std::string_view key) {
  for (const auto& [k, e] : metrics) {
    if (k == key) return e;
  }
  throw std::logic_error("no Prometheus metric for the stats field '" + std::string(key) + "'");
}

using Labels = std::vector<prometheus::ClientMetric::Label>;

// Metric families in name order, each sample added with its labels, and their text.
class Exposition {
 public:
  Exposition() {
    prometheus::ClientMetric info;
    info.label = {{"version", ATP_VERSION}};
    info.gauge.value = 1;
    family({"atp_build_info", "The atp that serves these metrics: its version."}, Kind::kGauge)
        .metric.push_back(std::move(info));
  }

  void add(const Exposed& e, Kind kind, Labels labels, std::uint64_t value) {
    prometheus::ClientMetric m;
    if (e.label != nullptr) labels.push_back({e.label, e.value});
    m.label = std::move(labels);
    // A double: exact up to 2^53, which no counter here reaches (a year of 100 Gbit/s is 2^52 bytes).
    if (kind == Kind::kGauge) {
      m.gauge.value = static_cast<double>(value);
    } else {
      m.counter.value = static_cast<double>(value);
    }
    family(e, kind).metric.push_back(std::move(m));
  }

  std::string text() const {
    std::vector<prometheus::MetricFamily> all;
    for (const auto& [name, f] : families_) all.push_back(f);
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, all);
    return out.str();
  }

 private:
  prometheus::MetricFamily& family(const Exposed& e, Kind kind) {
    prometheus::MetricFamily& f = families_[e.family];
    if (f.name.empty()) {
      f.name = e.family;
      f.help = e.help;
      f.type = kind == Kind::kGauge ? prometheus::MetricType::Gauge : prometheus::MetricType::Counter;
    }
    return f;
  }

  std::map<std::string, prometheus::MetricFamily> families_;
};

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
    j.name = string_at(row, where, "name");
    std::vector<std::string_view> keys =
        read_numbers(row, where, j.counters, [](auto& r, auto&& v) { visit_job(r, v); });
    keys.insert(keys.end(), {"job", "name", "installed"});
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
      if (row.contains("switch")) p.neighbour = string_at(row, where, "switch");
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

std::string to_prometheus(const SwitchStats& s) {
  Exposition out;
  const Labels switch_label{{"switch", s.name}};
  visit_switch(s, [&](const char* key, Kind kind, std::uint64_t v) {
    out.add(exposed(kSwitchMetrics, key), kind, switch_label, v);
  });
  std::uint64_t installed = 0;
  for (const SwitchJobStats& j : s.jobs) {
    if (!j.installed) continue;  // a job's series go with it
    ++installed;
    Labels labels = switch_label;
    labels.push_back({"atp_job", j.name.empty() ? std::to_string(j.job) : j.name});
    labels.push_back({"atp_job_id", std::to_string(j.job)});
    visit_job(j.counters, [&](const char* key, Kind kind, std::uint64_t v) {
      out.add(exposed(kSwitchJobMetrics, key), kind, labels, v);
    });
  }
  out.add({"atp_switch_jobs", "Jobs installed on the switch."}, Kind::kGauge, switch_label, installed);
  for (const SwitchPortStats& p : s.ports) {
    Labels labels = switch_label;
    labels.push_back({"port", std::to_string(p.port)});
    visit_port(
        p, [&](const char* key, Kind kind, std::uint64_t v) { out.add(exposed(kPortMetrics, key), kind, labels, v); });
  }
  return out.text();
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
  const json& daemon = object_at(doc, "", "daemon");
  std::vector<std::string_view> keys;
  visit_ps_daemon(s.daemon, [&](const char* key, std::uint64_t& v) {
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
    keys.assign({"name"});
    visit_ps_job(job, [&](const char* key, std::uint64_t& v) {
      v = get_unsigned<std::uint64_t>(row, where, key);
      keys.push_back(key);
    });
    check_keys(row, where, keys);
    if (!s.jobs.emplace(id, job).second) {
      throw ControlError("jobs." + excerpt(name) + ": job " + std::to_string(id) + " is listed twice");
    }
    s.job_names.emplace(id, string_at(row, where, "name"));
  }
  return s;
}

std::string to_prometheus(const PsStats& s) {
  Exposition out;
  visit_ps_daemon(s.daemon,
                  [&](const char* key, std::uint64_t v) { out.add(exposed(kPsMetrics, key), Kind::kCounter, {}, v); });
  out.add({"atp_ps_jobs", "Jobs installed on the PS."}, Kind::kGauge, {}, s.jobs.size());
  for (const auto& [id, job] : s.jobs) {
    const auto named = s.job_names.find(id);
    const std::string name = named == s.job_names.end() || named->second.empty() ? std::to_string(id) : named->second;
    const Labels labels{{"atp_job", name}, {"atp_job_id", std::to_string(id)}};
    visit_ps_job(job, [&](const char* key, std::uint64_t v) {
      out.add(exposed(kPsJobMetrics, key), Kind::kCounter, labels, v);
    });
  }
  return out.text();
}

}  // namespace atp::control
