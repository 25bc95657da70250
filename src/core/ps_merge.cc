// The PS's merges and what it sends: int32 and float32 contributions summed, results and
// overflow requests, round-shape notices, resend requests, and the index a collided fragment moves to.
#include <algorithm>
#include <bit>

#include "atp/aggregator_index.h"
#include "atp/fixed_point.h"
#include "ps_impl.h"

namespace atp {
namespace {

double float_sum(const ps_detail::Slot& slot, std::size_t i) { return std::bit_cast<double>(slot.sums[i]); }

// A contribution that loss recovery sent: a worker's resend, or a partial aggregate a resend
// flushed from a switch. A collision's forwarded packet carries the resend flag too, but came on
// time: not recovery.
bool recovery(const Header& h) { return h.resend && !h.collision; }

}  // namespace

void PsEndpoint::Impl::merge_int(Slot& slot, const Header& h, std::span<const std::uint8_t> packet,
                                 const Contributors& c, PacketSink& out) {
  // A congestion mark is never lost, even on a discarded duplicate (as the switch does, Fig. 7 box 7).
  slot.ecn = slot.ecn || h.ecn;
  // A retransmission, merged or discarded below: its sender timed out while the fragment waited
  // for others, so the result's timing is no round trip (Karn's rule).
  slot.recovered = slot.recovered || recovery(h);
  if (overlaps(slot, c)) {
    // Part of it is already in the sums and the parts cannot be separated: discard it whole.
    ++stats.overlaps_dropped;
  } else {
    const bool saturated = add_to_sums(packet, slot.sums);  // at most 1024 int32 terms: cannot overflow int64
    slot.saturated = slot.saturated || saturated;
    slot.exponent_mismatch = slot.exponent_mismatch || h.scale_exponent != slot.scale_exponent;
    slot.magnitude = std::max(slot.magnitude, h.magnitude_or_next);
    if (h.collision && !slot.collision) {
      slot.collision = true;
      slot.collided_index = h.aggregator_index;
      slot.offered_aggregator = h.offered_aggregator;
    }
    merge_members(slot, c);
    ++stats.aggregations;
  }
  if (slot.missing_workers == 0) {
    complete_int(slot, out);
  } else if (recovery(h)) {
    request_resends(slot, out);
  }
}

// A worker's retransmission came for a fragment still missing others' contributions: its
// sender timed out waiting, so the missing ones are lost, or their first copies wait somewhere
// (in an aggregator claimed after a resend flushed the fragment, behind their own earlier holes)
// until their own timeouts, which may be far off. Each missing worker is asked for a resend
// (docs/protocol.md "Resend requests"). At most once per doubling of the slot's age, so that
// the requests of a fragment that stays incomplete thin out as its resends do.
void PsEndpoint::Impl::request_resends(Slot& slot, PacketSink& out) {
  if (address.empty()) return;
  if (slot.requested != kNever && now - slot.requested < slot.requested - slot.opened) return;
  slot.requested = now;
  Header h;
  h.is_ack = true;
  h.resend_request = true;
  h.job = config.job;
  h.seq = slot.seq;
  h.allocate = config.index_policy == IndexPolicy::kAllocated;
  h.aggregator_index = slot.aggregator_index;
  h.src = config.self;
  const std::span<std::uint8_t> packet = std::span(packet_buffer).first(kHeaderBytes);
  for (std::uint32_t w = 0; w < num_workers; ++w) {
    if ((slot.members[w / 64] >> (w % 64) & 1) != 0) continue;
    h.dst = address[w];
    encode_header(h, packet);
    out.send(packet);
    ++stats.resend_requests;
  }
}

// All workers are in. Either the int32 result goes out, or (saturation somewhere, or a sum
// outside int32) the overflow request, and the fragment starts over as float32 (§3.8).
void PsEndpoint::Impl::complete_int(Slot& slot, PacketSink& out) {
  bool overflow =
      slot.saturated || slot.exponent_mismatch || !resolved(slot.magnitude, slot.scale_exponent, num_workers);
  for (const std::int64_t sum : slot.sums) {
    overflow |= sum > kSaturatedMax || sum < kSaturatedMin;
  }
  if (slot.collision) ++stats.collisions;  // counted once: the first parameter packet carries it
  if (overflow) {
    slot.state = SlotState::kCollectingFloats;
    std::fill(slot.members.begin(), slot.members.end(), std::uint64_t{0});
    slot.missing_workers = num_workers;
    std::fill(slot.sums.begin(), slot.sums.end(), std::bit_cast<std::int64_t>(0.0));  // the double sums
    ++stats.overflows;
  } else {
    slot.state = SlotState::kComplete;
    ++stats.completions;
  }
  send_parameter(slot, config.multicast_group, out);
  ++stats.parameters_sent;
}

void PsEndpoint::Impl::merge_float(Slot& slot, const Header& h, std::span<const std::uint8_t> packet,
                                   const Contributors& c, PacketSink& out) {
  slot.ecn = slot.ecn || h.ecn;
  if (overlaps(slot, c)) {
    ++stats.overlaps_dropped;
    return;
  }
  for (std::size_t i = 0; i < slot.sums.size(); ++i) {
    const double sum = float_sum(slot, i) + std::bit_cast<float>(load_value(packet, i));
    slot.sums[i] = std::bit_cast<std::int64_t>(sum);
  }
  slot.magnitude = std::max(slot.magnitude, h.magnitude_or_next);
  merge_members(slot, c);
  slot.recovered = slot.recovered || recovery(h);
  ++stats.aggregations;
  if (slot.missing_workers != 0) return;
  slot.state = SlotState::kComplete;
  slot.float_result = true;
  ++stats.completions;
  send_parameter(slot, config.multicast_group, out);
  ++stats.parameters_sent;
}

// A contribution's round_shape differs from the slot's: fragments of allreduce calls of
// different sizes met at this seq (docs/protocol.md "Round shape"). Nothing is summed any more;
// the workers learn it from the multicast notice and fail their round.
void PsEndpoint::Impl::fail_round_shape(Slot& slot, PacketSink& out) {
  slot.state = SlotState::kShapeMismatch;
  ++stats.shape_mismatches;
  send_parameter(slot, config.multicast_group, out);
  ++stats.parameters_sent;
}

std::uint32_t PsEndpoint::Impl::moved_index(const Slot& slot) const {
  if (config.index_policy != IndexPolicy::kHashedSlots) {
    return rehash_aggregator_index(slot.collided_index, config.aggregators);
  }
  // The switch's offer, the aggregator free there the longest: the fragment's slot settles where
  // no other slot of any job is at home, in one move (a rehash may land on another's place).
  const std::uint32_t offered = slot.offered_aggregator - 1u;
  if (slot.offered_aggregator != 0 && config.aggregators.contains(offered) && offered != slot.collided_index) {
    return offered;
  }
  return rehash_aggregator_index(slot.collided_index, config.aggregators, slot.seq % config.max_window_seqs + 1);
}

// The parameter packet for the slot's state: the overflow request (no values) while collecting
// floats, the round-shape mismatch notice (no values), else the result, int32 or float32 (the
// double sums rounded to float once, here).
void PsEndpoint::Impl::send_parameter(const Slot& slot, Address dst, PacketSink& out) {
  const bool overflow_request = slot.state == SlotState::kCollectingFloats;
  const bool mismatch = slot.state == SlotState::kShapeMismatch;
  Header h;
  h.is_ack = true;
  h.ecn = slot.ecn;
  // A unicast answer is to a worker's resend of a fragment already complete.
  h.resend = slot.recovered || dst != config.multicast_group;
  h.overflow = overflow_request;
  h.float_payload = !overflow_request && !mismatch && slot.float_result;
  h.job = config.job;
  h.round_shape = mismatch ? kRoundShapeMismatch : 0;
  h.value_count = overflow_request || mismatch ? 0 : static_cast<std::uint16_t>(slot.sums.size());
  h.seq = slot.seq;
  // The switches free the aggregator the gradients used; on a collision, workers move this
  // fragment's base index to the one carried in bitmap (§3.6): rehashed, or with hashed_slots the
  // aggregator the switch offered, where it is the job's and not the one that collided. An
  // allocated fragment collides only in a full table, and its index stays.
  h.collision = slot.collision && !mismatch && config.index_policy != IndexPolicy::kAllocated;
  h.allocate = config.index_policy == IndexPolicy::kAllocated;
  h.bitmap = h.collision ? moved_index(slot) : 0;
  h.aggregator_index = slot.aggregator_index;
  h.src = config.self;
  h.dst = dst;
  if (!overflow_request && !mismatch) {
    h.scale_exponent = slot.float_result ? 0 : slot.scale_exponent;
    h.magnitude_or_next = next_exponent(slot.magnitude, num_workers, slot.scale_exponent);
  }
  const std::span<std::uint8_t> packet = std::span(packet_buffer).first(packet_size(h.value_count));
  encode_header(h, packet);
  if (slot.float_result) {
    for (std::size_t i = 0; i < h.value_count; ++i) {
      store_value(packet, i, std::bit_cast<std::int32_t>(static_cast<float>(float_sum(slot, i))));
    }
  } else {
    store_sums(packet, std::span(slot.sums).first(h.value_count));  // in int32 range: checked at completion
  }
  out.send(packet);
}

}  // namespace atp
