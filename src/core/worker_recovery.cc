// The ATP worker endpoint's loss recovery: overdue holes (RACK-style, RFC 8985), probes of
// resent holes and of a window's tail, the PS's resend requests, the RTO and recovery after it.
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "worker_impl.h"

namespace atp {
namespace {

// The most times a fast retransmit without a result goes again before the RTO (probe_holes).
constexpr unsigned kMaxHoleProbes = 3;
// The least a tail probe waits for results (arm_tail_probe): a round trip measured as zero (a
// zero-delay link, a test) would otherwise resend at once.
constexpr Duration kMinTailProbe = std::chrono::microseconds(10);
// The most a flow's RTO backs off, in multiples of its estimate (RttEstimator::rto()).
constexpr int kMaxBackoff = 16;

}  // namespace

// A new result of flow f, for local index j: one of the three newest? The newest sent so far
// (RACK's clock; a resent fragment's result may answer either copy: not used)?
void WorkerEndpoint::Impl::note_result(Flow& f, std::uint32_t j, const Fragment& frag, Time now) {
  std::uint32_t v = j + 1;
  for (std::uint32_t& n : f.newest) {
    if (v > n) std::swap(v, n);
  }
  if ((frag.flags & kResent) == 0 && (f.rack_sent == kNever || frag.first_sent >= f.rack_sent)) {
    f.rack_sent = frag.first_sent;
    f.rack_rtt = now - frag.first_sent;
  }
}

// Paper §3.7 (there: three later results for the expected fragment), for every hole at once,
// by time (RACK, RFC 8985): a fragment without a result, older than the newest result, is lost
// once it is overdue, a round trip (the newest result's) and the reordering window past its
// send (the window: none with three later results until reordering is seen; see Flow). So a
// window with several holes resends them all within about a round trip instead of one per
// round trip, holes at the end of a round (which no three later results ever follow) do not
// wait for the RTO, and a fragment that took a slower way (to the PS around a full table,
// where it queues behind every worker's copy) is late, not lost. Every worker sees the
// same results, so a hole that is another worker's loss is resent by every worker: the first
// resend flushes the aggregator's partial sum to the PS, which completes the fragment from the
// resends. The window is cut once per round trip (AimdWindow::on_loss).
void WorkerEndpoint::Impl::detect_loss(std::uint32_t k, PacketSink& out) {
  Flow& f = flows[k];
  if (config.loss_recovery == LossRecovery::kTimeoutOnly) return;
  const Duration rtt = f.rack_sent != kNever ? f.rack_rtt : f.rtt.srtt();
  const Duration window = (f.rtt.has_sample() ? f.rtt.srtt() : rtt) * std::max(f.reordering, 1u) / 4;
  f.loss_deadline = kNever;
  std::uint32_t j = std::max(f.loss_scan, f.expected);
  for (; j + 1 < f.received_end; ++j) {
    const std::uint32_t i = fragment_of(k, j);
    Fragment& frag = fragments[i];
    if ((frag.flags & (kReceived | kFastResent)) != 0) continue;
    const bool three_later = j + 1 < f.newest.back() && f.reordering == 0;
    const Time due = deadline_after(frag.first_sent, three_later ? rtt : rtt + window);
    if (due > clock) {  // later holes were sent later still
      f.loss_deadline = due;
      break;
    }
    frag.flags |= kFastResent;
    ++stats.fast_retransmits;
    send_fragment(i, /*resend=*/true, out);
    f.cc.on_loss(seq_of_fragment(i), next_seq(f, k));
    f.resent_holes.push_back(j);
    if (f.hole_deadline == kNever) f.hole_deadline = deadline_after(clock, hole_probe(f));
  }
  f.loss_scan = j;
}

// A fast retransmit that got no result within two round trips (it may take the PS's longer
// way) and their variation was lost too, or its answer was: it goes once more. The RTO would
// come later by its floor (min_retransmit_timeout, tens of round trips on a fast fabric), and
// meanwhile the hole holds the window: without new sends no later result can reveal the loss
// (RACK's lost-retransmission rule, RFC 8985, needs them). Up to kMaxHoleProbes times per hole,
// each after twice the wait of the one before; beyond, the RTO. (Once was not enough: at 1%
// loss each way on a worker's link, a resend and its one probe both failed for about one hole
// in 2,500, and most runs of Fig. 10's 1% point paid a whole RTO for it.)
Duration WorkerEndpoint::Impl::hole_probe(const Flow& f) {
  if (f.rtt.has_sample()) return 2 * f.rtt.srtt() + 4 * f.rtt.rttvar();
  return f.rack_sent != kNever ? 3 * f.rack_rtt : f.rto;  // no clean sample yet
}

// Tail loss (RACK-TLP's probe, RFC 8985 §7): the holes detect_loss finds need a later result,
// which the last fragments of a window (a round's whole tail, often: a first window holds
// most rounds) never get; only the RTO would find them, whose floor is tens of round trips on a
// fast fabric. So when results stop for two round trips while fragments are out, the newest of
// them goes again: its result, or its resend's (which flushes the aggregator's partial sum to
// the PS, as any resend does), reveals the holes before it to detect_loss. Armed by each new
// result, so never before the round's first (workers still waiting for a late one send no
// probe), and once per silence: a probe that gets no answer leaves the rest to the RTO. Not
// while holes are known (due for a fast retransmit, resent and waiting, or a timeout's to
// rescue: the flow is in recovery, as RFC 8985 §7.2 asks), not a loss signal by itself (the
// window stays), and not before the RTO would go anyway.
void WorkerEndpoint::Impl::arm_tail_probe(std::uint32_t k, Time now) {
  Flow& f = flows[k];
  f.tail_deadline = kNever;
  if (config.loss_recovery == LossRecovery::kTimeoutOnly || f.expected >= f.next_to_send || f.loss_deadline != kNever ||
      holes_unanswered(f, k) || f.expected < f.recover || f.rescue_next < f.rescue_end ||
      (fragments[newest_outstanding(f, k)].flags & kFastResent) != 0) {
    return;
  }
  const Duration pto = std::max(kMinTailProbe, 2 * (f.rtt.has_sample() ? f.rtt.srtt() : f.rack_rtt));
  const Time due = deadline_after(now, pto);
  if (due < f.rto_deadline) f.tail_deadline = due;
}

// Whether a fast-resent hole of flow k still waits for its result (probe_holes forgets the
// answered ones only when it next runs).
bool WorkerEndpoint::Impl::holes_unanswered(const Flow& f, std::uint32_t k) const {
  return std::any_of(f.resent_holes.begin(), f.resent_holes.end(),
                     [&](std::uint32_t j) { return (fragments[fragment_of(k, j)].flags & kReceived) == 0; });
}

// The fragment (index) of flow k sent last that has no result; the flow has one.
std::uint32_t WorkerEndpoint::Impl::newest_outstanding(const Flow& f, std::uint32_t k) const {
  std::uint32_t j = f.next_to_send - 1;
  while (j > f.expected && (fragments[fragment_of(k, j)].flags & kReceived) != 0) --j;
  return fragment_of(k, j);
}

void WorkerEndpoint::Impl::probe_tail(std::uint32_t k, PacketSink& out) {
  Flow& f = flows[k];
  f.tail_deadline = kNever;
  if (f.expected >= f.next_to_send) return;
  ++stats.fast_retransmits;
  ++stats.tail_probes;
  send_fragment(newest_outstanding(f, k), /*resend=*/true, out);
}

void WorkerEndpoint::Impl::probe_holes(std::uint32_t k, Time now, PacketSink& out) {
  Flow& f = flows[k];
  const Duration probe = hole_probe(f);
  f.hole_deadline = kNever;
  std::erase_if(f.resent_holes, [&](std::uint32_t j) {
    const std::uint32_t i = fragment_of(k, j);
    Fragment& frag = fragments[i];
    const unsigned probes = (frag.flags & kProbes) >> kProbeShift;
    if ((frag.flags & kReceived) != 0 || probes == kMaxHoleProbes) return true;
    const Duration wait = probe * (1 << probes);  // each probe waits twice as long as the one before
    if (frag.sent + wait > now) {                 // resent since (by a timeout, or only just)
      f.hole_deadline = std::min(f.hole_deadline, deadline_after(frag.sent, wait));
      return false;
    }
    frag.flags = static_cast<std::uint8_t>((frag.flags & ~kProbes) | ((probes + 1) << kProbeShift));
    ++stats.fast_retransmits;
    send_fragment(i, /*resend=*/true, out);
    if (probes + 1 == kMaxHoleProbes) return true;
    f.hole_deadline = std::min(f.hole_deadline, deadline_after(now, 2 * wait));
    return false;
  });
}

// The PS lacks local fragment j of flow k from this worker while others' resends come in
// (docs/protocol.md "Resend requests"): it goes again at once, unless its result is in or its
// latest copy is younger than the RTO's estimate (the request may have crossed it; a round trip
// alone is too short where queues vary, and each needless copy loads the PS's link). A fragment
// not sent yet waits behind the window, whose oldest fragment's result was lost (the PS sent it,
// since another worker is past it): that one goes again, and its result opens the window. Not
// a loss signal: the window stays (the copy may have been lost in a partial sum the PS could
// not merge, or be waiting in an aggregator). The RTO-only baseline ignores requests.
void WorkerEndpoint::Impl::answer_resend_request(std::uint32_t k, std::uint32_t j, Time now, PacketSink& out) {
  const Flow& f = flows[k];
  if (j >= f.next_to_send) j = f.expected;
  const std::uint32_t i = fragment_of(k, j);
  if (config.loss_recovery == LossRecovery::kTimeoutOnly || j >= f.next_to_send ||
      (fragments[i].flags & kReceived) != 0 || now - fragments[i].sent < f.rtt.rto()) {
    ++stats.resend_requests_ignored;
    return;
  }
  ++stats.requested_resends;
  send_fragment(i, /*resend=*/true, out);
}

// A result moved `expected` forward during timeout recovery: the new expected fragment was
// sent before the timeout and most likely lost with the others, so it goes now instead of an
// RTO later. Once per fragment (it counts as the fragment's fast resend).
void WorkerEndpoint::Impl::resend_after_partial_ack(std::uint32_t k, PacketSink& out) {
  if (config.loss_recovery == LossRecovery::kTimeoutOnly) return;
  Flow& f = flows[k];
  const std::uint32_t i = fragment_of(k, f.expected);
  if ((fragments[i].flags & (kReceived | kFastResent)) != 0) return;
  fragments[i].flags |= kFastResent;
  send_fragment(i, /*resend=*/true, out);
}

// A new result during recovery from a timeout: two more of the holes it found go out, as slow
// start grows a window (one for the result, one more), but none more than a window ahead of
// the expected fragment.
void WorkerEndpoint::Impl::rescue_holes(std::uint32_t k, PacketSink& out) {
  if (config.loss_recovery == LossRecovery::kTimeoutOnly) return;
  Flow& f = flows[k];
  const std::uint64_t end = std::min<std::uint64_t>(f.rescue_end, std::uint64_t{f.expected} + f.cc.window());
  f.rescue_next = resend_holes(k, std::max(f.rescue_next, f.expected), end, 2, out);
}

// Resends flow k's fragments without a result among local indices [from, end), oldest first,
// at most `budget` of them. Returns where it stopped: one past the last index it looked at.
std::uint32_t WorkerEndpoint::Impl::resend_holes(std::uint32_t k, std::uint32_t from, std::uint64_t end,
                                                 std::uint32_t budget, PacketSink& out) {
  std::uint32_t j = from;
  while (j < end && budget > 0) {
    const std::uint32_t i = fragment_of(k, j++);
    if ((fragments[i].flags & kReceived) != 0) continue;
    send_fragment(i, /*resend=*/true, out);
    --budget;
  }
  return j;
}

void WorkerEndpoint::Impl::on_host_queue_full(Time now) {
  if (state != WorkerState::kRunning) return;
  clock = now;
  for (std::uint32_t k = 0; k < num_flows(); ++k) {
    Flow& f = flows[k];
    if (f.expected == f.next_to_send) continue;  // nothing in flight: not this flow's queue
    ++stats.host_queue_full;
    f.cc.on_congestion(seq_of(k, f.expected), next_seq(f, k));
  }
}

void WorkerEndpoint::Impl::on_timeout(Time now, PacketSink& out) {
  if (state != WorkerState::kRunning) return;
  clock = now;
  for (std::uint32_t k = 0; k < num_flows(); ++k) {
    if (flows[k].progress_deadline <= now) {
      fail("job " + std::to_string(config.job) + ": no parameter packet from PS " + format_address(config.ps[k].ps) +
           " for " + format_duration(config.progress_timeout) +
           "; the PS or switch is unreachable, or another worker of the job stopped");
      return;
    }
  }
  const Duration max_rto = max_retransmit_timeout(config);
  for (std::uint32_t k = 0; k < num_flows(); ++k) {
    Flow& f = flows[k];
    if (f.loss_deadline <= now) detect_loss(k, out);
    if (f.hole_deadline <= now) probe_holes(k, now, out);
    if (f.tail_deadline <= now) probe_tail(k, out);
    if (f.rto_deadline > now) continue;
    ++stats.timeouts;
    f.tail_deadline = kNever;
    // The window shrinks first, and the burst of resends is capped by it: after a timeout
    // every worker that missed the same results resends at once, and an uncapped burst can
    // fill a drop-tail queue and lose the very fragment everyone waits for, every time. The
    // same data timing out again (the window holds) resends half as many as the timeout before,
    // at least the oldest hole: a window's worth at every backed-off RTO would fill the links
    // with resends that flush the switches' aggregators, while the job waits for one worker's
    // recovery. Recovering by timeouts alone, every timeout resends all the window allows.
    const bool news =
        f.cc.on_timeout(seq_of(k, f.expected), next_seq(f, k)) || config.loss_recovery == LossRecovery::kTimeoutOnly;
    f.recover = f.next_to_send;
    // Resend the holes, expected fragment first: unacknowledged fragments older than the
    // newest result. Not the fragments after the newest result: nothing says they are lost,
    // and they may sit in switch aggregators waiting for slower workers. A resend would flush
    // those aggregates to the PS, so the slower workers' first copies would then stall in
    // fresh aggregators until their own timeout, one window per RTO. The holes past the burst
    // go as results come back (rescue_holes).
    const std::uint32_t end = std::max(f.expected + 1, f.received_end);
    f.timeout_burst = news ? f.cc.window() : std::max<std::uint32_t>(1, f.timeout_burst / 2);
    const std::uint32_t stop = resend_holes(k, f.expected, end, f.timeout_burst, out);
    f.rescue_next = news ? stop : std::max(f.rescue_next, stop);
    f.rescue_end = std::max(f.rescue_end, end);
    // Exponential backoff, to at most kMaxBackoff times the estimate: far enough to get past a
    // round trip that grew that much (a queue that built up, or no sample yet), and a hole never
    // costs more than that many estimates, which several workers' holes in turn may each cost.
    const Duration cap = std::min(max_rto, kMaxBackoff * f.rtt.rto());
    f.rto = f.rto > cap / 2 ? cap : f.rto * 2;
    f.rto_deadline = deadline_after(now, f.rto + timeout_jitter(f.rto));
  }
}

// Up to a quarter of the RTO, different for every worker and every timeout, so that workers
// that missed the same parameter packet do not resend in lockstep. Derived from the address
// and the timeout count, not from an RNG, so that runs stay reproducible.
Duration WorkerEndpoint::Impl::timeout_jitter(Duration rto) const {
  std::uint64_t x = (std::uint64_t{config.self} << 32) ^ (std::uint64_t{config.job} << 16) ^ stats.timeouts;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  const auto quarter = static_cast<std::uint64_t>(rto.count() / 4);
  return quarter == 0 ? Duration::zero() : Duration(static_cast<Duration::rep>(x % quarter));
}

}  // namespace atp
