// The ATP switch's gradient packets (Fig. 7 and Fig. 17): aggregated at this node's role, flushed
// by resends, or sent on to the PS. Follows docs/protocol.md "Switch".
#include <algorithm>
#include <optional>

#include "atp/switch.h"
#include "switch_match.h"

namespace atp {

using switch_detail::holds;

namespace {

// Which child of `role` sent gradient packet `h` as its whole sum: that child's bit in `bit`
// (left empty for a packet that is no child's whole sum). False for a child's packet whose fan-in
// is not the child's or whose bitmap is empty or holds bits past it.
bool child_bit(const AggregationRole& role, const Header& h, std::optional<std::uint32_t>& bit) {
  const auto child =
      std::find_if(role.children.begin(), role.children.end(), [&](const TreeChild& c) { return c.node == h.node; });
  if (child != role.children.end()) {
    const std::uint32_t whole = whole_bitmap(child->fan_in);
    if (h.fan_in != child->fan_in || h.bitmap == 0 || (h.bitmap & ~whole) != 0) return false;
    if (h.bitmap == whole) bit = 1u << (child - role.children.begin());
  }
  return true;
}

}  // namespace

void SwitchPipeline::absorb_duplicate(Aggregator& a, const Header& h, SwitchJobCounters& counters) {
  a.ecn = a.ecn || h.ecn;
  if (h.ecn) ++counters.ecn_merged;
  ++counters.duplicates;
}

void SwitchPipeline::aggregate(std::uint32_t i, std::uint32_t bit, const Header& h,
                               std::span<const std::uint8_t> packet, SwitchJobCounters& counters, Time now) {
  Aggregator& a = table_.at(i);
  const std::span<std::int32_t> row = table_.values(i).first(h.value_count);
  if (a.counter == 0) {
    load_values(packet, row);  // the first packet of the fragment: its values are the sum so far
    a.scale_exponent = h.scale_exponent;
    a.magnitude = h.magnitude_or_next;
  } else {
    accumulate_values(packet, row);  // sticky_saturating_add (fixed_point.h), value by value
    // Values at another scale cannot be added: saturated (sticky), the sum makes the PS collect
    // the fragment as float32, which is exact whatever the workers' exponents.
    if (h.scale_exponent != a.scale_exponent && !row.empty()) row[0] = kSaturatedMax;
    a.magnitude = std::max(a.magnitude, h.magnitude_or_next);
  }
  a.bitmap |= bit;
  ++a.counter;
  a.ecn = a.ecn || h.ecn;
  table_.touch(i, now);
  ++counters.aggregations;
  if (h.ecn) ++counters.ecn_merged;
}

void SwitchPipeline::write_sum(std::uint32_t i, const AggregationRole* role, Header& h,
                               std::span<std::uint8_t> packet) {
  label_sum(i, role, h);
  write_held(i, h, packet);
}

void SwitchPipeline::label_sum(std::uint32_t i, const AggregationRole* role, Header& h) const {
  if (role != nullptr) {
    h.node = role->node;
    h.fan_in = static_cast<std::uint8_t>(role->children.size());
  } else {
    h.round_fragments = table_.at(i).round_fragments;
  }
}

void SwitchPipeline::write_held(std::uint32_t i, Header& h, std::span<std::uint8_t> packet) {
  const Aggregator& a = table_.at(i);
  store_values(packet, table_.values(i).first(a.value_count));
  h.bitmap = a.bitmap;
  h.ecn = h.ecn || a.ecn;
  h.round_shape = a.round_shape;
  h.scale_exponent = a.scale_exponent;
  h.magnitude_or_next = a.magnitude;
  encode_header(h, packet);
}

void SwitchPipeline::flush_partial(PortId ingress, const Header& h, const AggregationRole* role, std::uint32_t i,
                                   PortSink& out) {
  Header labelled = h;
  label_sum(i, role, labelled);
  send_held(ingress, labelled, i, out);
}

void SwitchPipeline::send_held(PortId ingress, Header flushed, std::uint32_t i, PortSink& out) {
  flushed.resend = true;  // no switch above claims an aggregator for it
  flushed.collision = false;
  flushed.ecn = false;
  const std::span<std::uint8_t> bytes = std::span(flush_packet_).first(packet_size(table_.at(i).value_count));
  flushed.value_count = table_.at(i).value_count;
  write_held(i, flushed, bytes);
  forward(flushed, ingress, bytes, out);
  table_.release(i);
}

void SwitchPipeline::flush_on_resend(PortId ingress, Header& h, const AggregationRole& role,
                                     std::optional<std::uint32_t> bit, SwitchJobCounters& counters, std::uint32_t i,
                                     std::span<std::uint8_t> packet, PortSink& out) {
  ++counters.resend_flushes;
  if (bit && (table_.at(i).bitmap & *bit) != 0) {
    // Boxes 4 and 7: the child is in already, so the node's sum (maybe partial) holds all the
    // packet has and goes on in its place; the aggregator is freed, so later resends pass through.
    write_sum(i, &role, h, packet);
    table_.release(i);
    forward(h, ingress, packet, out);
    return;
  }
  // Anything else, a child's whole sum that is not in yet included (Fig. 17 would add it, box 5):
  // the held sum goes on as a partial of its own, then the packet. A resend's contribution may be
  // at the PS already (its first copy went another way, or the timeout was spurious), and the PS
  // drops a packet that overlaps what it has whole: added, it would take the held sum down with
  // it. Apart, the PS merges what it lacks of each.
  flush_partial(ingress, h, &role, i, out);
  forward(h, ingress, packet, out);
}

void SwitchPipeline::separate_round_shapes(PortId ingress, Header& h, const JobState& job, const AggregationRole* role,
                                           std::uint32_t i, std::span<std::uint8_t> packet, PortSink& out) {
  ++job.counters->round_shape_mismatches;
  if (table_.at(i).counter < (role != nullptr ? role->children.size() : h.fan_in)) {
    // A partial sum: on to the PS now, as a resend flushes it (Fig. 17 boxes 4-7, without
    // adding the packet), so that the PS sees both shapes at once instead of after the workers'
    // timeouts.
    flush_partial(ingress, h, role, i, out);
  }
  // A complete sum already went on; its aggregator waits for the PS's parameter packet. The
  // packet goes on as a resend: no switch above adds it to anything.
  h.resend = true;
  encode_header(h, packet);
  if (forward(h, ingress, packet, out)) ++job.counters->forwarded;
}

void SwitchPipeline::process_gradient(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet,
                                      Time now, PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  const auto role =
      std::find_if(job.roles.begin(), job.roles.end(), [&](const AggregationRole& r) { return r.ps == h.dst; });
  // Float packets (the overflow path) are summed at the PS, never here; packets for another
  // PS are aggregated elsewhere (or nowhere) and only pass through.
  if (h.float_payload || role == job.roles.end() || table_.size() == 0) {
    if (forward(h, ingress, packet, out)) ++counters.forwarded;
    return;
  }
  if (h.value_count > table_.width()) {
    ++counters_.too_wide;
    return;
  }
  // Fig. 7 box 3, on a tree of any depth: the whole sum of one of this node's children is added
  // at that child's bit. Anything else (a partial sum flushed early below, a packet that went
  // past a busy aggregator below) is not added here; the PS merges it.
  std::optional<std::uint32_t> bit;
  if (!child_bit(*role, h, bit)) {
    ++counters_.malformed;  // it would corrupt the counter
    return;
  }

  // The aggregator at the packet's index, or with `allocate` the one found by <job, seq> (none:
  // the one free the longest, claimed below).
  std::uint32_t i = h.allocate ? table_.find(h.job, h.seq) : row_of(h.aggregator_index);
  if (i != AggregatorTable::kNone) reclaim_if_stale(i, now, out);  // a stale aggregator counts as free
  if (h.allocate && (i == AggregatorTable::kNone || !table_.at(i).in_use) && flushed_.contains(h.job, h.seq)) {
    // A reclaim sent what the others gave on to the PS: a late child's packet follows it there,
    // as a resend (so that no switch above claims for it), instead of waiting alone in an
    // aggregator for packets gone ahead.
    h.resend = true;
    encode_header(h, packet);
    if (forward(h, ingress, packet, out)) ++counters.forwarded;
    return;
  }
  // An allocated fragment that collided before goes on colliding, whole at the PS.
  if (h.allocate && (i == AggregatorTable::kNone || !table_.at(i).in_use)) {
    i = collided_.contains(h.job, h.seq) ? AggregatorTable::kNone : allocatable(now, out);
  }
  Aggregator& a = table_.at(i != AggregatorTable::kNone ? i : 0);  // kNone: a full table, never read
  const bool holds_fragment = i != AggregatorTable::kNone && holds(a, h);
  if (holds_fragment && a.value_count != h.value_count) {
    ++counters_.malformed;  // every packet of a job has the same length
    return;
  }
  if (holds_fragment && a.round_shape != h.round_shape) {
    // Fragments of allreduce calls of different sizes share the seq: never add them together
    // (docs/protocol.md "Round shape"). The PS, which gets both, fails the workers' round.
    separate_round_shapes(ingress, h, job, &*role, i, packet, out);
    return;
  }

  if (h.resend) {
    // Fig. 17 box 1: a resend flushes the aggregator of its fragment, and never claims one.
    if (holds_fragment) {
      flush_on_resend(ingress, h, *role, bit, counters, i, packet, out);
    } else if (forward(h, ingress, packet, out)) {
      ++counters.forwarded;
    }
    return;
  }
  if (!bit) {
    if (forward(h, ingress, packet, out)) ++counters.forwarded;
    return;
  }
  aggregate_child(ingress, h, job, *role, *bit, i, packet, now, out);
}

void SwitchPipeline::aggregate_child(PortId ingress, Header& h, const JobState& job, const AggregationRole& role,
                                     std::uint32_t bit, std::uint32_t i, std::span<std::uint8_t> packet, Time now,
                                     PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  Aggregator& a = table_.at(i != AggregatorTable::kNone ? i : 0);  // kNone: a full table, never read
  const bool holds_fragment = i != AggregatorTable::kNone && holds(a, h);
  // The table brake (over_share): a job over an even share of a contended table (nearly full, or
  // found full by another job's fragment lately) gets no aggregator, which stays for the others;
  // its fragment goes to the PS marked, so that its windows shrink.
  const bool braked = h.allocate && !holds_fragment && i != AggregatorTable::kNone && over_share(h.job);
  if (i != AggregatorTable::kNone && !a.in_use && !braked) {
    table_.claim(i, h.job, h.seq, h.value_count, h.round_shape, now, h.allocate);  // first come, first served
    if (h.allocate) ++claims_;
    Claim& claim = claimed_by_[i];
    claim = {true, h, ingress};
    claim.header.node = role.node;
    claim.header.fan_in = static_cast<std::uint8_t>(role.children.size());
  } else if (!holds_fragment) {
    send_collided(ingress, h, braked, counters, packet, out);
    return;
  }

  if ((a.bitmap & bit) != 0) {  // box 4 -> box 7: this child is already in
    absorb_duplicate(a, h, counters);
    return;
  }
  aggregate(i, bit, h, packet, counters, now);   // box 5
  if (a.counter < role.children.size()) return;  // box 6: wait for the other children

  // Complete: the packet carries the node's whole sum on towards the PS (the parent node adds it).
  // The aggregator stays held so that duplicates and resends still find it, until the parameter
  // packet frees it.
  h.ecn = false;
  write_sum(i, &role, h, packet);
  ++counters.completions;
  forward(h, ingress, packet, out);
}

void SwitchPipeline::send_collided(PortId ingress, Header& h, bool braked, SwitchJobCounters& counters,
                                   std::span<std::uint8_t> packet, PortSink& out) {
  // Box 1 -> box 2: held by another fragment (with `allocate`: no aggregator free, or the
  // brake). The PS aggregates this packet; resend keeps the switches above from adding it,
  // collision makes the PS move the index: to the aggregator offered here, the one free the
  // longest, or rehashed (an allocated fragment's index stays).
  h.resend = true;
  h.collision = true;
  if (braked) {
    h.ecn = true;
    ++counters.table_marks;
  }
  if (h.allocate) {
    collided_.insert(h.job, h.seq);
    if (!braked) last_collision_ = {true, h.job, claims_};
  }
  const std::uint32_t row = h.allocate ? AggregatorTable::kNone : table_.offer();
  const std::uint64_t offered =
      row == AggregatorTable::kNone ? 0 : std::uint64_t{row} * slice_.count + slice_.index + 1;
  h.offered_aggregator = offered <= 0xFFFF ? static_cast<std::uint16_t>(offered) : 0;
  encode_header(h, packet);
  ++counters.collisions;
  forward(h, ingress, packet, out);
}

}  // namespace atp
