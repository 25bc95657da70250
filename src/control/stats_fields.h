// The numbers of the daemons' counters documents (stats.h), one list per row, which both codecs
// walk (stats.cc: JSON both ways; stats_prometheus.cc: Prometheus text), so that no two can
// disagree on a key. Private to the control layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "atp/control/stats.h"

namespace atp::control::stats_fields {

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

}  // namespace atp::control::stats_fields
