// RinaWorker's recovery (worker_impl.h): acks and the round trips they measure, loss detection,
// tail probes and resends, the asks for missing finals, and the timers that drive them.
#include <algorithm>
#include <bit>

#include "worker_impl.h"

namespace atp {
namespace {

constexpr int kMaxBackoff = 16;                                    // RTO multiples, as ATP's worker
constexpr std::uint32_t kMaxReordering = 4;                        // LossClock's widest window: a round trip
constexpr Duration kMinTailProbe = std::chrono::microseconds(10);  // as ATP's worker
constexpr std::size_t kRequestBatch = 64;                          // asks sent at once

}  // namespace

void RinaWorker::Impl::on_ack(Flow flow, const Header& h, Time now, PacketSink& out) {
  if (flow == Flow::kReduceScatter && h.round_shape == kRoundShapeMismatch) {
    if (state == WorkerState::kRunning) fail(size_mismatch());
    return;
  }
  // A gather's ack cannot say which copy it answers: only a gather sent once gives a sample.
  // And only its receiver's acknowledges it: the completing rack's carrier also acks the final
  // sent back to that rack (on_hop_sum), which has the same seq.
  if (flow == Flow::kAllgather) {
    const auto it = ag_out.find(h.seq);
    Header sent;
    if (it != ag_out.end() && decode_header(it->second.packet, sent) == DecodeError::kOk && sent.dst != h.src) {
      ++stats.duplicates;
      return;
    }
  }
  acknowledged(flow, h.seq, (h.bitmap & kEcnEcho) != 0, flow == Flow::kAllgather || h.resend, now, out);
}

// `from_resend`: the ack may answer a resent copy (Karn's rule then keeps its time out of the RTO).
void RinaWorker::Impl::acknowledged(Flow flow, Seq seq, bool ecn, bool from_resend, Time now, PacketSink& out) {
  auto& outstanding = flow == Flow::kReduceScatter ? sr_out : ag_out;
  const auto it = outstanding.find(seq);
  if (it == outstanding.end()) {
    ++stats.duplicates;
    return;
  }
  const Outstanding& o = it->second;
  const std::uint32_t c = o.clock;
  if (o.probed && o.resends == 0) {
    // Either copy's: no sample; for the clock, the probe's (the one the silence says was lost).
    clocks[c].on_ack(o.cc_seq, o.last_sent, now);
  } else if (o.resends == 0 || !from_resend) {  // the first copy's ack
    rtt.on_sample(now - o.first_sent);
    // A first copy answered only after two resends or more (three RTOs with the backoff) waited
    // for a late worker (a carrier acks once its whole rack's values are in), not a queue: it
    // floors no RTO (a rank 350 ms late made the next losses wait the longest RTO, rina_test).
    if (o.resends < 2) max_rtt_now = std::max(max_rtt_now, now - o.first_sent);
    clocks[c].on_ack(o.cc_seq, o.first_sent, now);
    // A fast retransmit the first copy made needless: the reordering window widens.
    if (o.fast_resent) {
      needless_resend = true;
      reordering = std::min(reordering + 1, kMaxReordering);
    }
  } else {
    // Until a first clean sample, a resend's ack stands in for one (as ATP's worker does): it
    // breaks the loop of a first RTO shorter than the round trip, where everything is resent
    // before its ack comes and nothing gives a sample.
    if (!rtt.has_sample()) rtt.raise_initial(2 * (now - o.last_sent));
    rtt.observe(now - o.first_sent);
  }
  if (flow == Flow::kReduceScatter) {
    sr.on_ack(o.cc_seq, ecn, sr_next, std::max(plain_in_flight, carrier_in_flight) >= sr.window());
  } else {
    ag.on_ack(o.cc_seq, ecn, ag_next, ag_out.size() >= ag.window());
  }
  forget(flow, it);
  backoff = 1;
  progress(now);
  detect_loss(c, now, out);
  pump(now, out);
}

// A send that needs no more resends: its timer, its place in its window and as its clock's tail
// go with it. Returns the next send.
auto RinaWorker::Impl::forget(Flow flow, std::map<Seq, Outstanding>::iterator it)
    -> std::map<Seq, Outstanding>::iterator {
  const Outstanding& o = it->second;
  const std::uint64_t k = key(flow, it->first);
  timers.erase({o.expires, k});
  if (tails[o.clock].key == k) tails[o.clock].sent = kNever;  // the clock's newest: no tail to probe
  if (o.pool == Pool::kFirstHop) --plain_in_flight;
  if (o.pool == Pool::kCarrier) --carrier_in_flight;
  return (flow == Flow::kReduceScatter ? sr_out : ag_out).erase(it);
}

// Tail loss (RACK-TLP's probe, RFC 8985 §7): a loss among a clock's last sends has no later send
// whose ack would show it, so only the RTO would, at its floor (1 ms) tens of round trips at
// 100 Gbit/s: Fig. 11's step 4 lost a worker's last two gathers, sent as its round ended, and the
// next member waited for them until the RTO. So when a clock's newest send has no ack two round
// trips (the clock's latest, else the smoothed one) after it went, it goes again, once: its ack
// (the probe's time for the clock) shows the losses before it to detect_loss. A contribution's
// probe is a plain copy (the switch drops it where the first copy is in and takes it where that
// was lost); no window is cut (a silence is no loss yet). Not before a round trip is measured.
// Per clock, not per worker: the worker's other acks went on coming (there for 190 us of the
// 550 a worker-wide silence waited, with a smoothed round trip of 179 us).
Time RinaWorker::Impl::tail_due(std::uint32_t c) const {
  if (tails[c].sent == kNever || !rtt.has_sample()) return kNever;
  const Duration round_trip = std::max(clocks[c].has_ack() ? clocks[c].rtt() : Duration::zero(), rtt.srtt());
  return deadline_after(tails[c].sent, std::max(2 * round_trip, kMinTailProbe));
}

void RinaWorker::Impl::probe_tail(std::uint32_t c, Time now, PacketSink& out) {
  const std::uint64_t k = tails[c].key;
  tails[c].sent = kNever;
  auto& outstanding = flow_of(k) == Flow::kReduceScatter ? sr_out : ag_out;
  const auto it = outstanding.find(seq_of_key(k));
  if (it == outstanding.end() || it->second.resends > 0) return;
  Outstanding& o = it->second;
  o.probed = true;
  o.last_sent = now;
  emit(o.packet, out);
  ++stats.retransmissions;
  ++stats.fast_retransmits;
  ++stats.tail_probes;
}

// Resends what clock c finds lost (LossClock): each send once, before its RTO; one window cut
// per window of data, as for a full host queue.
void RinaWorker::Impl::detect_loss(std::uint32_t c, Time now, PacketSink& out) {
  loss_due[c] = kNever;
  if (state == WorkerState::kFailed) return;
  const Flow flow = c / member_size(next_member()) == kGatherKind ? Flow::kAllgather : Flow::kReduceScatter;
  auto& outstanding = flow == Flow::kReduceScatter ? sr_out : ag_out;
  const auto pending = [&](std::uint64_t k, Time at) {
    const auto it = outstanding.find(seq_of_key(k));
    return it != outstanding.end() && it->second.resends == 0 && it->second.first_sent == at;
  };
  const auto lost = [&](std::uint64_t k) {
    Outstanding& o = outstanding.at(seq_of_key(k));
    (flow == Flow::kReduceScatter ? sr : ag).on_congestion(o.cc_seq, flow == Flow::kReduceScatter ? sr_next : ag_next);
    timers.erase({o.expires, k});
    resend(flow, o, now, out);
    o.fast_resent = true;
    ++stats.fast_retransmits;
    o.expires = deadline_after(now, rto());
    timers.emplace(o.expires, k);
  };
  // At least twice the round trips' variation: on the netns testbed at 200 Mbit/s, where acks
  // wait for processes on two busy cores, a quarter of the round trip alone resent 1.6-4x as much
  // as the RTO had (the resends flush the sums that wait for them) and timed out more.
  loss_due[c] = clocks[c].detect(now, reordering, 2 * rtt.rttvar(), pending, lost);
}

// Sends o again. A contribution's resend flushes the sum that waits for it. Before a round trip
// is measured the RTO is a guess (at 200 Mbit/s the first acks take ten of ATP's first RTOs):
// then its resends are plain copies, which the switch drops where the first copy is in, and which
// stand in for one that was lost; after the largest RTO, a resend all the same (a sum lost on its
// way is sent again only for one, and may have been the job's only fragment).
void RinaWorker::Impl::resend(Flow flow, Outstanding& o, Time now, PacketSink& out) {
  Header h;
  (void)decode_header(o.packet, h);
  if (flow == Flow::kReduceScatter && !h.resend && (rtt.has_sample() || now - o.first_sent >= max_rto())) {
    h.resend = true;
    encode_header(h, o.packet);
  }
  // A carrier's: its rack may have missed the pull too.
  if (o.pool == Pool::kCarrier && abstracted(member) && in_current_pass(h.seq)) {
    pull(static_cast<std::uint32_t>(h.seq - pass_base), out);
  }
  o.resends = static_cast<std::uint8_t>(std::min(o.resends + 1, 255));
  o.last_sent = now;
  emit(o.packet, out);
  ++stats.retransmissions;
}

void RinaWorker::Impl::on_host_queue_full(Time now) {
  if (state != WorkerState::kRunning) return;
  clock = now;
  for (auto [window, outstanding, next] : {std::tuple{&sr, &sr_out, sr_next}, std::tuple{&ag, &ag_out, ag_next}}) {
    if (outstanding->empty()) continue;  // nothing in flight: not this flow's queue
    ++stats.host_queue_full;
    window->on_congestion(outstanding->begin()->second.cc_seq, next);
  }
}

// RFC 6298's, and at least a quarter above the longest round trip of this round and the last:
// a round's first windows, all sent at once behind the last round's tail (whose few packets
// measured short queues), take longer than the mean. A resend that came too early costs more
// than a late one here: the sum that waits goes on without the workers still queued, who then
// cross the ring alone (at 200 Mbit/s the spine carried 1.8 times the round's bytes).
Duration RinaWorker::Impl::rto() const { return std::min(unbacked_rto() * backoff, max_rto()); }

Duration RinaWorker::Impl::unbacked_rto() const {
  const Duration recent = std::max(max_rtt_now, max_rtt_before);
  return std::max(rtt.rto(), recent + recent / 4);
}

void RinaWorker::Impl::progress(Time now) {
  last_progress = now;
  // Asks after two RTOs without news (not backed off: that is for resends), and again at least
  // every eighth of the progress timeout: several asks before a round gives up. The RTO with its
  // floor at the recent longest round trip: the finals still to come wait behind the same
  // queues (measured, netns at 200 Mbit/s with RFC 6298's alone: each worker asked for about a
  // quarter of a round's finals, and the answers nearly doubled what the spine carried).
  // Before a round trip is measured the RTO is a guess (ATP's first, 1 ms; at 200 Mbit/s the
  // first acks take ten times that), and asks then only add to the queues: the longest wait.
  request_interval =
      rtt.has_sample() ? std::min(2 * unbacked_rto(), config.progress_timeout / 8) : config.progress_timeout / 8;
}

void RinaWorker::Impl::on_timeout(Time now, PacketSink& out) {
  clock = now;
  if (state == WorkerState::kRunning && now >= deadline_after(last_progress, config.progress_timeout)) {
    return fail("job " + std::to_string(config.job) + ": rank " + std::to_string(config.rank) +
                " made no progress for " + format_duration(config.progress_timeout) + " (" + std::to_string(missing) +
                " fragments' sums missing; " + first_missing() + ")");
  }
  // Resends: every send whose timer ran out; one window cut per flow.
  std::vector<std::uint64_t> expired;
  while (!timers.empty() && timers.begin()->first <= now) {
    expired.push_back(timers.begin()->second);
    timers.erase(timers.begin());
  }
  bool cut[2] = {false, false};
  for (const std::uint64_t k : expired) {
    const Flow flow = flow_of(k);
    const bool allgather = flow == Flow::kAllgather;
    Outstanding& o = (allgather ? ag_out : sr_out).at(seq_of_key(k));
    if (!cut[allgather]) {
      cut[allgather] = true;
      ++stats.timeouts;
      (allgather ? ag : sr).on_timeout(o.cc_seq, allgather ? ag_next : sr_next);
    }
    resend(flow, o, now, out);
  }
  if (!expired.empty()) backoff = std::min(backoff * 2, kMaxBackoff);
  for (const std::uint64_t k : expired) {
    Outstanding& o = (flow_of(k) == Flow::kAllgather ? ag_out : sr_out).at(seq_of_key(k));
    o.expires = deadline_after(now, rto());
    timers.emplace(o.expires, k);
  }
  for (std::uint32_t c = 0; c < clocks.size(); ++c) {
    if (loss_due[c] <= now) detect_loss(c, now, out);
  }
  for (std::uint32_t c = 0; c < clocks.size(); ++c) {
    if (tail_due(c) <= now) probe_tail(c, now, out);
  }
  // Asks for finals that have not come after a quiet spell. In a rack, every other time a
  // rack-mate first: its switch gave the rack's workers the same copies, so one that has the
  // final answers from inside the rack, where the holder's answer (the carrier of f in its
  // origin member, across the ring) would load the ring's links with a final that, most often,
  // was only late (measured: netns at 200 Mbit/s, the answers were a third of the spine's bytes).
  if (state == WorkerState::kRunning && missing > 0 && now >= request_due()) {
    const bool in_rack = abstracted(member) && request_batches % 2 == 0;
    std::size_t asked = 0;
    unanswered.clear();
    ask_now = others_came = false;
    for (std::uint32_t f = 0; f < fragments && asked < kRequestBatch; ++f) {
      if (!in_pass[f] || finals.contains(seq_of(f))) continue;
      const std::uint32_t origin = chunk(f);
      if (origin == member && carries(f)) continue;  // this worker completes it itself
      send_control(RinaKind::kRequest, seq_of(f), in_rack ? rack_mate(f) : carrier(f, origin), 0, false, 0, out);
      unanswered.insert(f);
      ++stats.requests_sent;
      ++asked;
    }
    ++request_batches;
    request_interval = std::min(request_interval * 2, config.progress_timeout / 8);
    last_request = now;
  }
  pump(now, out);
}

// A rack-mate to ask for f's final: f's carrier in this member, or the next one when that is
// this worker. Requires abstracted(member).
Address RinaWorker::Impl::rack_mate(std::uint32_t f) const {
  const auto& ranks = config.members[member];
  const std::uint32_t r = carrier_rank(f, member);
  return config.workers[r != config.rank ? r : ranks[(f + 1) % ranks.size()]];
}

// Where the first fragment whose final is missing stands here, for the progress timeout's
// sentence: what a reader needs to tell a lost packet from a protocol that waits for nothing.
std::string RinaWorker::Impl::first_missing() const {
  for (std::uint32_t f = 0; f < fragments; ++f) {
    if (!in_pass[f] || finals.contains(seq_of(f))) continue;
    const Seq s = seq_of(f);
    const auto m = merges.find(s);
    std::string where = "the first, fragment " + std::to_string(f) + " (seq " + std::to_string(s) + "), is at hop " +
                        std::to_string(hop(f)) + " of " + std::to_string(ring) + " here, carried by rank " +
                        std::to_string(carrier_rank(f, member)) + "; this worker ";
    where += contributed[f] ? "sent its values" : "has not sent its values";
    if (sr_out.contains(s)) where += ", unacknowledged";
    if (m != merges.end()) {
      where += ", holds " + std::to_string(std::popcount(m->second.bitmap)) + " of the last hop's " +
               std::to_string(member_size(prev_member())) + " workers" + (m->second.complete ? " (complete)" : "");
    }
    return where;
  }
  return "none found";
}

// When to ask for the finals still missing: after a quiet spell (request_interval since the
// last progress or ask), or as soon as every final of the last asks has come and no other did
// meanwhile (then nothing else is on its way; where other finals come, asking for what the
// gathers bring doubles it: 20 times the asks at 200 Mbit/s on the netns testbed). One batch per
// quiet spell took 250 ms a batch behind a rank past its switch's reclaim timeout (rina_test).
Time RinaWorker::Impl::request_due() const {
  return ask_now ? last_progress : deadline_after(std::max(last_progress, last_request), request_interval);
}

Time RinaWorker::Impl::next_deadline() const {
  Time t = timers.empty() ? kNever : timers.begin()->first;
  for (const Time due : loss_due) t = std::min(t, due);
  for (std::uint32_t c = 0; c < clocks.size(); ++c) t = std::min(t, tail_due(c));
  if (state == WorkerState::kRunning) {
    t = std::min(t, deadline_after(last_progress, config.progress_timeout));
    if (missing > 0) t = std::min(t, request_due());
  }
  return t;
}

void RinaWorker::Impl::fail(std::string why) {
  state = WorkerState::kFailed;
  error = std::move(why);
}

}  // namespace atp
