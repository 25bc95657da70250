// The daemons' counters as Prometheus text (stats.h's to_prometheus, prometheus-cpp's text
// serializer): each field of stats_fields.h's lists with its metric family, help and labels.
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <initializer_list>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "atp/control/stats.h"
#include "stats_fields.h"

namespace atp::control {
namespace {

using namespace stats_fields;  // NOLINT(google-build-using-namespace): the rows' lists, this file's vocabulary

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

}  // namespace

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
