// The switch's Rina mode (docs/rina.md "The switch's Rina mode"): a rack's contributions
// aggregated, finals, gathers, pulls and acks sent to the rack's members.
#include <algorithm>
#include <bit>

#include "atp/switch.h"
#include "switch_match.h"

namespace atp {

using switch_detail::contains;
using switch_detail::holds;

void SwitchPipeline::to_members(const JobState& job, Header& h, PortId except, std::span<std::uint8_t> packet,
                                PortSink& out) {
  // Addressed to the job's group, which every worker's host takes (one of another's unicast
  // address it would drop, or route back).
  h.dst = multicast_group_address(h.job);
  encode_header(h, packet);
  for (const PortId port : job.rina_members) {
    if (port != except) out.send(port, packet);
  }
}

void SwitchPipeline::process_rina(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet,
                                  Time now, PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  const auto& members = job.rina_members;
  if (!members.empty() && table_.size() != 0) {
    const auto member = std::find(members.begin(), members.end(), ingress);
    const auto route = routes_.find(h.dst);
    const bool to_rack = route != routes_.end() && contains(members, route->second);
    const bool from_rack = member != members.end();
    switch (h.rina) {
      case RinaKind::kContribution:
      case RinaKind::kFinal:
        if (from_rack) {
          rina_aggregate(ingress, static_cast<std::size_t>(member - members.begin()), h, job, packet, now, out);
          return;
        }
        // The previous member's complete final: every worker of the rack needs it (the first of
        // the allgather's multicasts); a partial one only its receiver, which merges it.
        if (h.rina == RinaKind::kFinal && to_rack && h.fan_in != 0 && std::popcount(h.bitmap) == h.fan_in) {
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      case RinaKind::kGather:
        if (!from_rack && to_rack && !h.resend) {  // a request's answer (resend) is for its asker alone
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      case RinaKind::kPull:
        if (to_rack) {  // a carrier asks its rack for the fragment's values
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      case RinaKind::kAck:
        if (to_rack) {  // every worker of the rack contributed; the fragment's aggregator is done
          const std::uint32_t i = row_of(h.aggregator_index);
          const Aggregator& a = table_.at(i);
          if (holds(a, h)) {
            table_.release(i);
            ++counters.deallocations;
          } else {
            reclaim_if_stale(i, now, out);
          }
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      default:
        break;
    }
  }
  if (forward(h, ingress, packet, out)) ++counters.forwarded;
}

void SwitchPipeline::rina_aggregate(PortId ingress, std::size_t member, Header& h, const JobState& job,
                                    std::span<std::uint8_t> packet, Time now, PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  if (h.value_count > table_.width()) {
    ++counters_.too_wide;
    return;
  }
  // A worker speaks for itself only: its port's bit, the rack's fan-in.
  const std::uint32_t bit = std::uint32_t{1} << member;
  if (h.bitmap != bit || h.fan_in != job.rina_members.size()) {
    ++counters_.malformed;
    return;
  }
  const std::uint32_t i = row_of(h.aggregator_index);
  reclaim_if_stale(i, now, out);
  Aggregator& a = table_.at(i);
  const bool holds_fragment = holds(a, h);
  if (holds_fragment && a.value_count != h.value_count) {
    ++counters_.malformed;
    return;
  }
  if (holds_fragment && (a.round_shape != h.round_shape || a.round_fragments != h.round_fragments)) {
    separate_round_shapes(ingress, h, job, nullptr, i, packet, out);
    return;
  }
  if (h.resend) {
    // A resend is never added to a sum, so that every worker's first copy is in one sum at most
    // and the receiver can take a worker that also came alone out of it (docs/rina.md). One that
    // is in the aggregator of its fragment says that sum waits (for a worker that collided or was
    // lost): the sum goes on as it is, and is freed. Else the resend goes on alone.
    if (holds_fragment && (a.bitmap & bit) != 0) {
      ++counters.resend_flushes;
      rina_send_sum(ingress, h, job, i, packet, out);
      table_.release(i);
    } else if (forward(h, ingress, packet, out)) {
      ++counters.forwarded;
    }
    return;
  }
  if (!a.in_use) {
    table_.claim(i, h.job, h.seq, h.value_count, h.round_shape, now);
    a.round_fragments = h.round_fragments;
    claimed_by_[i].atp = false;
  } else if (!holds_fragment) {
    ++counters.collisions;  // held by another fragment: on alone, for the receiver to merge
    forward(h, ingress, packet, out);
    return;
  }
  if ((a.bitmap & bit) != 0) {
    absorb_duplicate(a, h, counters);
    return;
  }
  aggregate(i, bit, h, packet, counters, now);
  if (a.counter < h.fan_in) return;
  // Complete. The aggregator stays held until the receiver's ack frees it: a resend finds it.
  ++counters.completions;
  rina_send_sum(ingress, h, job, i, packet, out);
}

void SwitchPipeline::rina_send_sum(PortId ingress, Header& h, const JobState& job, std::uint32_t i,
                                   std::span<std::uint8_t> packet, PortSink& out) {
  const Aggregator& a = table_.at(i);
  write_sum(i, nullptr, h, packet);
  forward(h, ingress, packet, out);
  if (h.rina == RinaKind::kFinal && a.counter == job.rina_members.size()) {
    // The completing rack has its final at once (docs/rina.md: no chunk goes round twice): a copy
    // of its own, since the packet in hand went on as it is. From the final's next receiver, not
    // from the worker whose contribution completed it: that worker's kernel drops a packet from
    // its own address arriving from outside (a martian source), so it never got its rack's final.
    const auto route = routes_.find(h.dst);
    Header copy = h;
    copy.src = h.dst;
    const std::span<std::uint8_t> bytes = std::span(flush_packet_).first(packet.size());
    std::copy(packet.begin(), packet.end(), bytes.begin());
    to_members(job, copy, route == routes_.end() ? ingress : route->second, bytes, out);
  }
}

}  // namespace atp
