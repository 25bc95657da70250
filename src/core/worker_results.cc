// The ATP worker endpoint's receiving side: parameter packets in, results stored, remaps learnt,
// overflow notices answered with float32 resends, the round completed.
#include <algorithm>
#include <cmath>
#include <string>

#include "atp/fixed_point.h"
#include "worker_impl.h"

namespace atp {

void WorkerEndpoint::Impl::on_packet(std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
  Header h;
  if (decode_header(bytes, h) == DecodeError::kOk) return on_packet(h, bytes, now, out);
  clock = now;
  ++stats.dropped;
}

void WorkerEndpoint::Impl::on_packet(const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
  clock = now;
  if (state == WorkerState::kFailed || h.job != config.job || !h.is_ack || h.rina != RinaKind::kNone) {
    ++stats.dropped;
    return;
  }
  if (h.round_shape == kRoundShapeMismatch) {
    on_shape_mismatch(h);
    return;
  }
  // Overflow notices and resend requests carry no values; results carry exactly one fragment.
  if (!h.overflow && !h.resend_request && h.value_count != config.values_per_packet) {
    ++stats.dropped;
    return;
  }
  const std::uint32_t i = h.seq - round_base;  // fragment index if it is of this round
  if (i >= round_fragments) {
    on_other_round(h);
    return;
  }
  const std::uint32_t k = flow_of(i);
  const std::uint32_t j = i / num_flows();  // i = first_fragment(k) + j * P, first_fragment(k) < P
  if (h.resend_request) {
    answer_resend_request(k, j, now, out);
    return;
  }
  if (j >= flows[k].next_to_send) {  // never sent, so no PS can have its result: forged or corrupt
    ++stats.dropped;
    return;
  }
  ++stats.parameters_received;
  if (h.ecn) ++stats.ecn_parameters;
  if ((fragments[i].flags & kReceived) != 0) {
    ++stats.duplicate_parameters;
    return;
  }
  if (h.overflow) {
    on_overflow(i, out);
    return;
  }
  on_result(i, h, bytes, now, out);
}

// A parameter packet whose seq is no fragment of this round: an earlier round's (a duplicate, or
// a resend request that crossed its result), else forged or corrupt.
void WorkerEndpoint::Impl::on_other_round(const Header& h) {
  if (!from_earlier_round(h.seq)) {
    ++stats.dropped;
  } else if (h.resend_request) {
    ++stats.resend_requests_ignored;  // its result came: the PS's request crossed it
  } else {
    ++stats.parameters_received;
    if (h.ecn) ++stats.ecn_parameters;
    ++stats.duplicate_parameters;
  }
}

// The int32 aggregate of fragment i (sent, no result yet) saturated: the PS collects this fragment
// as float32 from every worker. Resend it once now; any later retransmission of it is float32 too.
void WorkerEndpoint::Impl::on_overflow(std::uint32_t i, PacketSink& out) {
  Fragment& frag = fragments[i];
  if ((frag.flags & kFloatMode) != 0) {
    ++stats.duplicate_parameters;
    return;
  }
  // The float resend is also the fragment's one fast retransmit: while the PS collects floats
  // from every worker, results for later fragments overtake it without meaning a loss.
  frag.flags |= kFloatMode | kFastResent;
  ++stats.float_resends;
  send_fragment(i, /*resend=*/true, out);
}

// The first result of fragment i, which this worker sent: what it says about the fragment's
// resends and the round trip, the result stored, then the flow's window, recovery and sends.
void WorkerEndpoint::Impl::on_result(std::uint32_t i, const Header& h, std::span<const std::uint8_t> bytes, Time now,
                                     PacketSink& out) {
  const std::uint32_t k = flow_of(i);
  const std::uint32_t j = i / num_flows();
  Flow& f = flows[k];
  Fragment& frag = fragments[i];
  review_resends(f, frag, h);
  sample_round_trip(f, frag, h, now);
  if (f.samples_from == kNever) f.samples_from = now;
  store_result(i, h, bytes);
  f.received_end = std::max(f.received_end, j + 1);
  note_result(f, j, frag, now);
  if (h.collision) learn_remap(h.seq, h.bitmap);
  f.progress_deadline = deadline_after(now, config.progress_timeout);
  // Every new result acknowledges data, so it feeds the window (and its ECN mark is not lost).
  f.cc.on_ack(h.seq, h.ecn, next_seq(f, k));
  if (j == f.expected) advance_expected(k, now, out);
  rescue_holes(k, out);
  if (f.expected < f.fragment_count) detect_loss(k, out);
  if (fragments_received == round_fragments) {
    complete_round();
    return;
  }
  send_new(k, now, out);
  arm_tail_probe(k, now);
}

// What a result (the fragment's first) says about the fragment's resends: whether recovery from a
// timeout goes on, whether a window cut is undone, whether the reordering window widens.
void WorkerEndpoint::Impl::review_resends(Flow& f, const Fragment& frag, const Header& h) {
  // A result for a fragment sent only once shows the pipe is flowing: no more recovery resends.
  // So does one without the PS's resend flag for a resent fragment: no resend went into it, so
  // this worker's first copy did, and the timeout that resent it was spurious (a round trip that
  // grew past the RTO). Recovery going on would resend every later fragment of the window as
  // each result comes in order, each flushing the switches' partial sums to the PS.
  if ((frag.flags & kResent) == 0 || !h.resend) f.recover = 0;
  // Resent, and the result without the PS's resend flag: the first copy made it, so the loss
  // that the resend answered was not one (results overtook it, or it took longer than the
  // RTO), and the window cut that came with it is undone.
  if ((frag.flags & kResent) != 0 && (frag.flags & kFloatMode) == 0 && !h.resend && f.cc.undo(h.seq)) {
    ++stats.undone_cuts;
  }
  // A fast retransmit that the first copy made needless: the reordering window widens.
  if ((frag.flags & (kFastResent | kFloatMode)) == kFastResent && !h.resend) {
    f.needless_resend = true;
    f.reordering = std::min(f.reordering + 1, 4u);
  }
}

// The round trip a result measures, if any, into the flow's estimate.
void WorkerEndpoint::Impl::sample_round_trip(Flow& f, const Fragment& frag, const Header& h, Time now) {
  // A result for a fragment sent once is also a round trip sample; one for a resent fragment is
  // not (Karn: which copy?), nor one that waited for another worker's resend (the PS sets the
  // result's resend flag then): that is the other worker's loss, not this path's delay.
  if ((frag.flags & kResent) == 0) {
    // Nor one sent before the round's first result: see samples_from.
    if (h.resend || frag.sent < f.samples_from) {
      f.rtt.observe(now - frag.first_sent);
    } else {
      f.rtt.on_sample(now - frag.sent);
    }
  } else if (!h.resend && (frag.flags & kFastResent) == 0 && frag.first_sent >= f.samples_from) {
    // Resent by a timeout, and the first copy made the result (no resend went into it): the
    // timeout was spurious, and its round trip, timed from that first copy, is a sample the
    // resend does not blur. A queue that grew past the RTO shows here and nowhere else, since
    // every fragment behind it is resent (Karn keeps them out); ATP pays for such resends twice
    // (each is a packet to the PS and an answer from it, at every worker), so the estimate
    // takes it whole, unclipped (RttEstimator::on_spurious_timeout).
    f.rtt.on_spurious_timeout(now - frag.first_sent);
  } else if (!f.rtt.has_sample() && !h.resend) {
    // Until a first clean sample, this worker's own resend stands in, timed from its latest
    // send: the round trip if the result answers that copy; less if it answers an earlier one,
    // but the resend went out an RTO after it, so the stand-in is the round trip less that RTO
    // and the next RTO (the stand-in plus 4 x its half) is past the round trip whenever the RTO
    // was at least a third of it. It breaks the loop of an initial RTO shorter than the round
    // trip, where every fragment is resent before its result comes and none gives a sample.
    f.rtt.raise_initial(2 * (now - frag.sent));
    f.rtt.observe(now - frag.first_sent);
  } else {
    f.rtt.observe(now - frag.first_sent);
  }
}

// The result of flow k's expected fragment: `expected` moves past every fragment with a result,
// the RTO restarts from the estimate.
void WorkerEndpoint::Impl::advance_expected(std::uint32_t k, Time now, PacketSink& out) {
  Flow& f = flows[k];
  const std::uint32_t old_expected = f.expected;
  ++f.expected;
  while (f.expected < f.next_to_send && (fragments[fragment_of(k, f.expected)].flags & kReceived) != 0) {
    ++f.expected;
  }
  // Progress resets the backoff to the estimate (the initial RTO before any sample).
  f.rto = f.rtt.rto();
  f.rto_deadline = f.expected < f.next_to_send ? deadline_after(now, f.rto) : kNever;
  if (f.expected == f.fragment_count) f.progress_deadline = kNever;
  // Partial ack: this result, for a resent fragment, moved `expected` by one and nothing
  // later has a result.
  if (f.expected < f.recover && f.expected == old_expected + 1 && f.received_end <= f.expected) {
    resend_after_partial_ack(k, out);
  }
}

// Seqs of earlier rounds (at most 2^31 back, beyond which serial order is ambiguous).
bool WorkerEndpoint::Impl::from_earlier_round(Seq seq) const {
  const std::uint32_t back = round_base - seq;
  const std::uint64_t horizon = std::min<std::uint64_t>(seqs_before_round, kMaxRoundFragments);
  return back >= 1 && back <= horizon;
}

void WorkerEndpoint::Impl::learn_remap(Seq seq, std::uint32_t new_index) {
  if (!config.aggregators.contains(new_index)) return;  // not an index of this job's range: ignore
  const auto [it, inserted] = remap.try_emplace(remap_key(seq), new_index);
  if (inserted || it->second != new_index) {
    it->second = new_index;
    ++stats.remaps;
  }
}

// Writes fragment i's sum over its input, which is never read again: no later packet of the
// round carries fragment i (resends are only for fragments without a result).
void WorkerEndpoint::Impl::store_result(std::uint32_t i, const Header& h, std::span<const std::uint8_t> bytes) {
  const std::size_t first = std::size_t{i} * config.values_per_packet;
  const std::size_t real = std::min<std::size_t>(config.values_per_packet, result.size() - first);  // no padding
  const std::span<float> out = result.subspan(first, real);
  if (h.float_payload) {
    load_floats(bytes, out);
    fragments[i].flags |= kFloatResult;
    float_fragments.push_back(i);
  } else {
    load_dequantized(bytes, std::ldexp(1.0, h.scale_exponent), out);
    result_exponents[i] = h.scale_exponent;
  }
  // Every worker gets the same parameter packet: the same exponent for the position's next
  // round. kNoMagnitude is no exponent (decode_header lets it through for gradients): kept as it was.
  if (next_exponents->size() <= i) next_exponents->resize(std::size_t{i} + 1, first_exponent);
  if (h.magnitude_or_next != kNoMagnitude) (*next_exponents)[i] = h.magnitude_or_next;
  fragments[i].flags |= kReceived;
  ++fragments_received;
}

void WorkerEndpoint::Impl::complete_round() {
  state = WorkerState::kIdle;
  ++stats.rounds_completed;
  std::sort(float_fragments.begin(), float_fragments.end());
  for (Flow& f : flows) {
    f.rto_deadline = kNever;
    f.progress_deadline = kNever;
  }
}

// The PS says the workers' rounds differ in size at h.seq (docs/protocol.md "Round shape"). For
// a fragment of this round that this worker sent and has no result of, that ends the round:
// no result will ever come. Anything else is not about this round: counted as a drop.
void WorkerEndpoint::Impl::on_shape_mismatch(const Header& h) {
  const std::uint32_t i = h.seq - round_base;
  if (state != WorkerState::kRunning || i >= round_fragments || i / num_flows() >= flows[flow_of(i)].next_to_send ||
      (fragments[i].flags & kReceived) != 0) {
    ++stats.dropped;
    return;
  }
  ++stats.parameters_received;
  fail("job " + std::to_string(config.job) + ": the workers all-reduce tensors of different sizes (this worker: " +
       std::to_string(result.size()) + " values in this call); every worker must pass the same number of values");
}

}  // namespace atp
