// The ATP switch dataplane: per-packet admission, aggregation (Fig. 7), loss handling (Fig. 17),
// deallocation by parameter packets and timeout reclaim (§3.7). Follows docs/protocol.md "Switch".
// This file: setup, timeouts, admission and parameter packets; gradients are switch_gradient.cc's,
// Rina's mode switch_rina.cc's, the tables switch_table.cc's.

#include "atp/switch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "switch_match.h"

namespace atp {

using switch_detail::contains;
using switch_detail::holds;

// ---------------------------------------------------------------------------------------------
// Counters

SwitchCounters& operator+=(SwitchCounters& sum, const SwitchCounters& c) {
  static_assert(sizeof(SwitchCounters) == 7 * sizeof(std::uint64_t), "sum every SwitchCounters field");
  sum.packets += c.packets;
  sum.malformed += c.malformed;
  sum.unknown_job += c.unknown_job;
  sum.not_admitted += c.not_admitted;
  sum.no_route += c.no_route;
  sum.too_wide += c.too_wide;
  sum.reclaimed += c.reclaimed;
  return sum;
}

SwitchJobCounters& operator+=(SwitchJobCounters& sum, const SwitchJobCounters& c) {
  static_assert(sizeof(SwitchJobCounters) == 11 * sizeof(std::uint64_t), "sum every SwitchJobCounters field");
  sum.aggregations += c.aggregations;
  sum.completions += c.completions;
  sum.collisions += c.collisions;
  sum.resend_flushes += c.resend_flushes;
  sum.duplicates += c.duplicates;
  sum.forwarded += c.forwarded;
  sum.deallocations += c.deallocations;
  sum.reclaimed += c.reclaimed;
  sum.ecn_merged += c.ecn_merged;
  sum.round_shape_mismatches += c.round_shape_mismatches;
  sum.table_marks += c.table_marks;
  return sum;
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: setup

SwitchPipeline::SwitchPipeline(const SwitchConfig& config, TableSlice slice)
    : config_(config),
      slice_(slice),
      table_(config.atp_capable ? config.num_aggregators / slice.count : 0,
             config.atp_capable ? config.aggregator_width : 0),
      flush_packet_(packet_size(table_.width())),
      claimed_by_(table_.size()),
      collided_(table_.size()),
      flushed_(table_.size()) {}

void SwitchPipeline::add_route(Address dst, PortId port) { routes_[dst] = port; }

bool SwitchPipeline::remove_route(Address dst) { return routes_.erase(dst) > 0; }

void SwitchPipeline::add_multicast_group(Address group, std::vector<PortId> ports) {
  multicast_groups_[group] = std::move(ports);
}

bool SwitchPipeline::remove_multicast_group(Address group) { return multicast_groups_.erase(group) > 0; }

void SwitchPipeline::install_job(const SwitchJobEntry& entry) {
  for (const AggregationRole& role : entry.roles) {
    const bool fits =
        role.children.size() <= 32 && std::all_of(role.children.begin(), role.children.end(),
                                                  [](const TreeChild& c) { return c.fan_in >= 1 && c.fan_in <= 32; });
    if (!fits) {
      throw std::invalid_argument("job " + std::to_string(entry.job) + ": an aggregation role has " +
                                  std::to_string(role.children.size()) +
                                  " children; a bitmap holds 32, each child's fan-in 1..32");
    }
  }
  JobState& job = jobs_[entry.job];
  job.admitted_ports = entry.admitted_ports;
  job.roles = entry.roles;
  job.rina_members = entry.rina_members;
  // Created here, not on the packet path, so that processing a packet never allocates.
  job.counters = &job_counters_[entry.job];
}

bool SwitchPipeline::remove_job(JobId job) {
  if (jobs_.erase(job) == 0) return false;
  for (std::uint32_t i = 0; i < table_.size(); ++i) {
    if (table_.at(i).in_use && table_.at(i).job == job) table_.release(i);
  }
  return true;
}

SwitchJobCounters SwitchPipeline::job_counters(JobId job) const {
  const auto it = job_counters_.find(job);
  return it == job_counters_.end() ? SwitchJobCounters{} : it->second;
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: timeouts

bool SwitchPipeline::is_stale(const Aggregator& a, Time now) const {
  if (config_.reclaim_timeout <= Duration::zero()) return false;
  // now - timestamp >= timeout, written so that it cannot overflow for any pair of times.
  return now >= a.timestamp && now - a.timestamp >= config_.reclaim_timeout;
}

void SwitchPipeline::reclaim(std::uint32_t index, PortSink& out) {
  const Aggregator& a = table_.at(index);
  const auto it = job_counters_.find(a.job);
  if (it != job_counters_.end()) ++it->second.reclaimed;
  ++counters_.reclaimed;
  const Claim& claim = claimed_by_[index];
  if (claim.atp && a.counter < claim.header.fan_in) {
    // Children are missing: late (a straggler still computing) or lost (their resends flush what
    // is here, and pass through once it is gone). Either way what the others sent goes on to the
    // PS as a partial sum, which it merges; thrown away, every one of them would have to resend.
    if (a.allocated) flushed_.insert(a.job, a.seq);
    send_held(claim.ingress, claim.header, index, out);  // the header carries the node's node and fan_in
  }
  table_.release(index);  // a complete one (send_held freed a partial one)
}

void SwitchPipeline::reclaim_if_stale(std::uint32_t index, Time now, PortSink& out) {
  if (table_.at(index).in_use && is_stale(table_.at(index), now)) reclaim(index, out);
}

std::uint32_t SwitchPipeline::allocatable(Time now, PortSink& out) {
  if (table_.longest_free() == AggregatorTable::kNone && table_.oldest() != AggregatorTable::kNone) {
    reclaim_if_stale(table_.oldest(), now, out);  // a full table: the oldest aggregator, if stale, is free
  }
  return table_.longest_free();
}

bool SwitchPipeline::over_share(JobId job) const {
  const std::uint32_t size = table_.size();
  const bool recent = last_collision_.valid && claims_ - last_collision_.since_claim < size;
  const bool nearly_full = size - table_.in_use() < size / kBrakeFreeFraction;
  if (!nearly_full && !(recent && last_collision_.job != job)) return false;
  std::uint64_t sharing = table_.holding_jobs();
  if (recent && table_.held_by(last_collision_.job) == 0) ++sharing;
  return std::uint64_t{table_.held_by(job)} * sharing > size;
}

void SwitchPipeline::on_timeout(Time now, PortSink& out) {
  // The list is oldest first: stop at the first aggregator that is still fresh.
  for (std::uint32_t i = table_.oldest(); i != AggregatorTable::kNone; i = table_.oldest()) {
    if (!is_stale(table_.at(i), now)) break;
    reclaim(i, out);
  }
}

Time SwitchPipeline::next_deadline() const {
  const std::uint32_t oldest = table_.oldest();
  if (oldest == AggregatorTable::kNone || config_.reclaim_timeout <= Duration::zero()) return kNever;
  const Time timestamp = table_.at(oldest).timestamp;
  if (timestamp > kNever - config_.reclaim_timeout) return kNever;
  return timestamp + config_.reclaim_timeout;
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: packets

bool SwitchPipeline::forward(const Header& h, PortId ingress, std::span<const std::uint8_t> packet, PortSink& out) {
  if (is_multicast(h.dst)) {
    const auto group = multicast_groups_.find(h.dst);
    if (group == multicast_groups_.end()) {
      ++counters_.no_route;
      return false;
    }
    for (const PortId port : group->second) {
      if (port != ingress) out.send(port, packet);
    }
    return true;
  }
  const auto route = routes_.find(h.dst);
  if (route == routes_.end()) {
    ++counters_.no_route;
    return false;
  }
  out.send(route->second, packet);
  return true;
}

void SwitchPipeline::process(PortId ingress, std::span<std::uint8_t> packet, Time now, PortSink& out) {
  ++counters_.packets;
  Header h;
  if (decode_header(packet, h) != DecodeError::kOk) {
    ++counters_.malformed;
    return;
  }

  if (!config_.atp_capable) {
    // A plain switch: no admission, no aggregation. Count the job only if the control plane
    // installed it (a lookup, never an insertion: spoofed job ids must not grow the map).
    const auto it = job_counters_.find(h.job);
    if (forward(h, ingress, packet, out) && it != job_counters_.end()) ++it->second.forwarded;
    return;
  }

  const auto job = jobs_.find(h.job);
  if (job == jobs_.end()) {
    ++counters_.unknown_job;
    return;
  }
  if (!contains(job->second.admitted_ports, ingress)) {
    ++counters_.not_admitted;
    return;
  }
  if (h.rina != RinaKind::kNone) {
    process_rina(ingress, h, job->second, packet, now, out);
  } else if (h.is_ack) {
    process_parameter(ingress, h, job->second, packet, now, out);
  } else {
    process_gradient(ingress, h, job->second, packet, now, out);
  }
}

void SwitchPipeline::process_parameter(PortId ingress, const Header& h, const JobState& job,
                                       std::span<const std::uint8_t> packet, Time now, PortSink& out) {
  // Fig. 7 box 8: a parameter packet (first or re-sent, multicast or unicast) frees the
  // aggregator of its fragment; failing that, it reclaims a stale one at its index (§3.7).
  if (table_.size() != 0 && !h.resend_request) {
    if (h.allocate) {
      collided_.erase(h.job, h.seq);
      flushed_.erase(h.job, h.seq);
    }
    const std::uint32_t i = h.allocate ? table_.find(h.job, h.seq) : row_of(h.aggregator_index);
    if (i != AggregatorTable::kNone && holds(table_.at(i), h)) {
      table_.release(i);
      ++job.counters->deallocations;
    } else if (i != AggregatorTable::kNone) {
      reclaim_if_stale(i, now, out);
    }
  }
  if (forward(h, ingress, packet, out)) ++job.counters->forwarded;
}

}  // namespace atp
