// RinaWorker's packets in (worker_impl.h): hop sums a carrier adds up, finals and gathers, asks,
// and packets of a pass that is over or has not begun.
#include <algorithm>
#include <bit>

#include "worker_impl.h"

namespace atp {
namespace {

constexpr std::size_t kMaxEarlyPackets = 16384;  // kept for a pass or round not started yet

}  // namespace

void RinaWorker::Impl::on_packet(std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
  Header h;
  if (decode_header(bytes, h) == DecodeError::kOk) return on_packet(h, bytes, now, out);
  clock = now;
  ++stats.dropped;
}

void RinaWorker::Impl::on_packet(const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
  clock = now;
  if (state == WorkerState::kFailed || h.job != config.job || h.rina == RinaKind::kNone) {
    ++stats.dropped;
    return;
  }
  if (h.rina == RinaKind::kAck) return on_ack(Flow::kReduceScatter, h, now, out);
  if (h.rina == RinaKind::kGatherAck) return on_ack(Flow::kAllgather, h, now, out);
  // About a fragment: of the running pass, of one to come, or of one gone by.
  const std::int64_t ahead = static_cast<std::int32_t>(h.seq - pass_base);
  const bool running = state == WorkerState::kRunning;
  if (running && ahead >= 0 && ahead < fragments) {
    const auto f = static_cast<std::uint32_t>(ahead);
    if (!in_pass[f]) return on_stale(h, now, out);  // not redone: its final stands (pass 0's)
    return on_fragment(h, bytes, f, now, out);
  }
  if (ahead >= (running ? std::int64_t{fragments} : 0)) {
    if (early.size() >= kMaxEarlyPackets) {
      ++stats.dropped;  // its sender resends it
      return;
    }
    early.emplace_back(bytes.begin(), bytes.end());
    ++stats.early_kept;
    return;
  }
  on_stale(h, now, out);
}

void RinaWorker::Impl::replay_early(Time now, PacketSink& out) {
  std::vector<std::vector<std::uint8_t>> kept;
  std::vector<std::vector<std::uint8_t>> now_due;
  for (auto& packet : early) {
    Header h;
    (void)decode_header(packet, h);
    const std::int64_t ahead = static_cast<std::int32_t>(h.seq - pass_base);
    (ahead >= fragments ? kept : now_due).push_back(std::move(packet));
  }
  early = std::move(kept);
  for (const auto& packet : now_due) {
    if (state != WorkerState::kRunning) return;
    on_packet(packet, now, out);
  }
}

void RinaWorker::Impl::on_fragment(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now,
                                   PacketSink& out) {
  switch (h.rina) {
    case RinaKind::kContribution:
    case RinaKind::kFinal:
      if (h.dst == self) return on_hop_sum(h, bytes, f, now, out);
      // The rack's copy (to the job's group) of a complete final from its ToR: the completing
      // rack's, or the origin rack's, whose carrier of f takes it as its last hop's sum.
      if (h.rina == RinaKind::kFinal && is_multicast(h.dst) && h.fan_in != 0 && std::popcount(h.bitmap) == h.fan_in) {
        if (carries(f) && hop(f) == 0) return on_hop_sum(h, bytes, f, now, out);
        return take_final(h, bytes, f, now, out);
      }
      ++stats.dropped;
      return;
    case RinaKind::kGather:
      // Its receiver (this member's carrier of f) acknowledges; the rack's copies reach the rest.
      if ((h.dst == self || (is_multicast(h.dst) && carries(f))) && !h.resend) {
        send_control(RinaKind::kGatherAck, h.seq, h.src, 0, h.ecn, 0, out);
      }
      return take_final(h, bytes, f, now, out);
    case RinaKind::kRequest:
      return answer(h, out);
    case RinaKind::kPull:
      if (hop(f) > 0 && !carries(f) && !contributed[f]) {
        send_contribution(f, Pool::kPulled, now, out);
      } else {
        ++stats.duplicates;
      }
      return;
    default:
      ++stats.dropped;
      return;
  }
}

// A packet whose fragment's pass is over: say again what was said, answer what can be.
void RinaWorker::Impl::on_stale(const Header& h, Time, PacketSink& out) {
  // A hop sum this worker took in: to it, or (an autonomous member's final, complete) to its rack.
  if ((h.rina == RinaKind::kContribution || h.rina == RinaKind::kFinal) && (h.dst == self || is_multicast(h.dst))) {
    // The same hop's sum again, from the member before: a fragment keeps its seq at every hop,
    // and another hop's sum passing by (a final's copy to the rack) is no resend of it.
    const auto acked = acks_sent.find(h.seq);
    if (acked != acks_sent.end() && acked->second.kind == h.rina && from_member(prev_member(), h.src)) {
      ++stats.duplicates;
      send_control(RinaKind::kAck, h.seq, h.src, acked->second.aggregator_index, false, 0, out, true);
      return;
    }
  } else if (h.rina == RinaKind::kGather && !h.resend) {  // its sender still waits: any of the rack answers
    ++stats.duplicates;
    send_control(RinaKind::kGatherAck, h.seq, h.src, 0, false, 0, out);
    return;
  } else if (h.rina == RinaKind::kRequest) {
    return answer(h, out);
  }
  ++stats.dropped;
}

void RinaWorker::Impl::answer(const Header& h, PacketSink& out) {
  const auto fin = finals.find(h.seq);
  if (fin == finals.end()) {
    ++stats.dropped;  // not here yet: the asker asks again
    return;
  }
  Header g;
  g.rina = RinaKind::kGather;
  g.job = config.job;
  g.seq = h.seq;
  g.round_fragments = fin->second.fragments;
  g.round_shape = fin->second.shape;
  g.src = self;
  g.dst = h.src;
  g.resend = true;  // an answer: for the asker alone
  g.scale_exponent = fin->second.exponent;
  g.magnitude_or_next = fin->second.magnitude;
  emit(build_packet(g, fin->second.values), out);
  ++stats.gathers_sent;
}

// Checks a fragment packet's round against this worker's: false when the sender cuts another
// tensor size. Then the round fails here, and every other worker is told (an ack that says so),
// so that all of them fail at once with the reason instead of waiting for the progress timeout.
bool RinaWorker::Impl::same_round(const Header& h, std::uint32_t f, PacketSink& out) {
  if (h.round_fragments == fragments && h.round_shape == shape(f)) return true;
  for (const Address w : config.workers) {
    if (w != self) send_control(RinaKind::kAck, h.seq, w, 0, false, kRoundShapeMismatch, out);
  }
  fail(size_mismatch());
  return false;
}

std::string RinaWorker::Impl::size_mismatch() const {
  return "job " + std::to_string(config.job) +
         ": the workers all-reduce tensors of different sizes (this worker: " + std::to_string(tensor.size()) +
         " values in this call); every worker must pass the same number of values";
}

void RinaWorker::Impl::take_final(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now,
                                  PacketSink& out) {
  if (h.value_count != v || h.scale_exponent != exponent[f]) {
    ++stats.dropped;
    return;
  }
  if (!same_round(h, f, out)) return;
  std::vector<std::int32_t> values(v);
  load_values(bytes, values);
  record_final(f, std::move(values), h.scale_exponent, h.magnitude_or_next, now, out);
}

// A hop's sum (or a piece of it) for a fragment this worker carries here.
void RinaWorker::Impl::on_hop_sum(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now,
                                  PacketSink& out) {
  const std::uint32_t k = hop(f);
  const std::uint32_t prev = prev_member();
  if (!hop_sum_fits(h, f)) {
    ++stats.dropped;
    return;
  }
  if (!same_round(h, f, out)) return;
  Merge& m = merges[h.seq];
  if (m.complete) {
    ++stats.duplicates;
    send_control(RinaKind::kAck, h.seq, h.src, m.aggregator_index, h.ecn, 0, out, true);
    return;
  }
  if (!merge_piece(m, h, bytes)) return;
  progress(now);
  if (static_cast<std::uint32_t>(std::popcount(m.bitmap)) < member_size(prev)) return;

  // In: custody passes to this worker; the contributors may stop resending.
  m.complete = true;
  const Address ack_to = ack_destination(prev);
  send_control(RinaKind::kAck, h.seq, ack_to, m.aggregator_index, m.ecn, 0, out, m.resent);
  acks_sent[h.seq] = AckSent{ack_to, m.aggregator_index, h.rina};
  if (ring == 1) acknowledged(Flow::kReduceScatter, h.seq, false, true, now, out);  // its own contribution too
  if (state != WorkerState::kRunning) return;
  if (k == 0) return take_merged_final(h, f, m, now, out);  // the last hop's: the final
  ready_carrier.insert(order(f));
  pump(now, out);
}

// Whether a hop sum's header is what this worker expects of f here: f is its to carry, the sum is
// of the right kind (the last hop's is the final), from the member before, with that member's
// fan-in, a bitmap within it, a whole fragment's values and this pass's exponent.
bool RinaWorker::Impl::hop_sum_fits(const Header& h, std::uint32_t f) const {
  const std::uint32_t prev = prev_member();
  const std::uint32_t size = member_size(prev);
  const RinaKind expected = hop(f) == 0 ? RinaKind::kFinal : RinaKind::kContribution;
  return carries(f) && h.rina == expected && from_member(prev, h.src) && h.fan_in == size && h.bitmap != 0 &&
         (size >= 32 || (h.bitmap >> size) == 0) && h.value_count == v && h.scale_exponent == exponent[f];
}

// Adds a piece of a hop's sum into m. Returns false (and counts why) when it brings nothing: its
// workers are all in already, or it overlaps workers in a way no switch sends.
bool RinaWorker::Impl::merge_piece(Merge& m, const Header& h, std::span<const std::uint8_t> bytes) {
  if (m.sums.empty()) m.sums.assign(v, 0);
  const std::uint32_t overlap = m.bitmap & h.bitmap;
  if (overlap == h.bitmap) {
    ++stats.duplicates;  // every worker of it is in already
    return false;
  }
  if (std::popcount(h.bitmap) == 1) {
    // A worker alone (a resend, or a first copy that found its slot taken): kept apart as well,
    // so that a later sum of first copies that holds it can take it out again.
    std::vector<std::int32_t>& alone = m.alone[h.bitmap];
    alone.resize(v);
    load_values(bytes, alone);
    m.alone_bits |= h.bitmap;
  } else if (overlap != 0) {
    // A sum of first copies that holds workers already in alone (the switches never add a resend
    // to a sum, so nothing else overlaps): those workers' values come out of it, exactly.
    if ((overlap & ~m.alone_bits) != 0) {
      ++stats.overlaps_dropped;  // not a piece the switches send; its workers resend alone
      return false;
    }
    for (const auto& [bit, values] : m.alone) {
      if ((overlap & bit) == 0) continue;
      for (std::uint32_t i = 0; i < v; ++i) m.sums[i] -= values[i];
      m.saturated = m.saturated || std::any_of(values.begin(), values.end(), is_saturated);
    }
  }
  m.saturated = add_to_sums(bytes, m.sums) || m.saturated;
  m.bitmap |= h.bitmap;
  m.magnitude = std::max(m.magnitude, h.magnitude_or_next);
  m.ecn = m.ecn || h.ecn;
  m.resent = m.resent || h.resend;
  m.aggregator_index = h.aggregator_index;
  ++m.pieces;
  ++stats.merges;
  return true;
}

// The last hop's sum is complete in m: f's final, recorded here and, where it came in pieces,
// sent on to those who got no copy of it.
void RinaWorker::Impl::take_merged_final(const Header& h, std::uint32_t f, const Merge& m, Time now, PacketSink& out) {
  const std::uint32_t prev = prev_member();
  std::vector<std::int32_t> values(v);
  for (std::uint32_t i = 0; i < v; ++i) {
    values[i] = static_cast<std::int32_t>(std::clamp<std::int64_t>(m.sums[i], kSaturatedMin, kSaturatedMax));
  }
  const bool out_of_range =
      std::any_of(m.sums.begin(), m.sums.end(), [](std::int64_t s) { return s > kSaturatedMax || s < kSaturatedMin; });
  if ((m.saturated || out_of_range) && !is_saturated(values[0])) values[0] = kSaturatedMax;
  // Put together here from pieces (a resend flushed the completing rack's sum, or a
  // contribution found its switch slot taken), the final was never whole in a switch, so no
  // worker of either rack got a copy: it goes back to the completing rack as a gather its
  // switch hands to all (netns at 200 Mbit/s, that rack had waited for such finals 40-60 ms at
  // the end of most rounds), and to each rack-mate here as an answer (a gather marked resend,
  // for it alone; in process, every final a rack asked for without loss was one of these).
  // Sent once: a loss there is what the asks are for.
  const auto gather_to = [&](Address dst, bool answer) {
    Header g = fragment_header(RinaKind::kGather, f, dst, h.scale_exponent, m.magnitude);
    g.resend = answer;
    emit(build_packet(g, values), out);
    ++stats.gathers_sent;
  };
  if (m.pieces > 1 && abstracted(prev)) gather_to(carrier(f, prev), false);
  for (const std::uint32_t r : config.members[member]) {
    if (m.pieces > 1 && r != config.rank) gather_to(config.workers[r], true);
  }
  record_final(f, std::move(values), h.scale_exponent, m.magnitude, now, out);
}

}  // namespace atp
