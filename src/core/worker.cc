// The ATP worker endpoint: fragments and quantizes a tensor, sends one sliding-window flow per
// PS shard, recovers losses (overdue holes, RACK-style; the RTO), handles remaps and overflow, assembles results.
#include "atp/worker.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "atp/fixed_point.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

// Per-fragment flags of the current round.
constexpr std::uint8_t kReceived = 1u << 0;     // its result is in `result`
constexpr std::uint8_t kFastResent = 1u << 1;   // the one fast retransmit of this fragment was used
constexpr std::uint8_t kFloatMode = 1u << 2;    // the PS asked for float32: every (re)send is float32
constexpr std::uint8_t kFloatResult = 1u << 3;  // the result came over the float32 path
constexpr std::uint8_t kResent = 1u << 4;       // sent again at least once (any reason)
// Bits 5-6: how many times its fast retransmit went unanswered and went again (probe_holes).
constexpr unsigned kProbeShift = 5;
constexpr std::uint8_t kProbes = 3u << kProbeShift;

// The most times a fast retransmit without a result goes again before the RTO (probe_holes).
constexpr unsigned kMaxHoleProbes = 3;
// The least a tail probe waits for results (arm_tail_probe): a round trip measured as zero (a
// zero-delay link, a test) would otherwise resend at once.
constexpr Duration kMinTailProbe = std::chrono::microseconds(10);
// The most a flow's RTO backs off, in multiples of its estimate (RttEstimator::rto()).
constexpr int kMaxBackoff = 16;

// A round may not span more than half the sequence space, or serial arithmetic breaks.
constexpr std::uint64_t kMaxRoundFragments = std::uint64_t{1} << 31;

// The largest RTO a flow uses: the configured bound, and at most an eighth of the progress
// timeout, so that a hole several workers must resend in turn is recovered before the job gives up.
Duration max_retransmit_timeout(const WorkerConfig& c) {
  return std::max(c.min_retransmit_timeout, std::min(c.max_retransmit_timeout, c.progress_timeout / 8));
}

}  // namespace

struct WorkerEndpoint::Impl {
  struct Fragment {
    Time first_sent = kNever;            // its first send
    Time sent = kNever;                  // its latest send (the first, unless kResent)
    std::uint32_t aggregator_index = 0;  // fixed at the first send: resends must find the same aggregator
    std::uint8_t flags = 0;              // kReceived | kFastResent | kFloatMode | kFloatResult | kResent | kProbes
    // Scale per fragment, fixed at the first send: the exponent its values are sent at (the
    // PS's choice from this position's last round), then its result's; and its largest magnitude.
    std::int16_t exponent = 0;
    std::int16_t magnitude = kNoMagnitude;
  };

  // One PS shard: the fragments whose job-wide number (fragments of earlier rounds + index in
  // the round) is k modulo P, so that the shard's sequence numbers are exactly P apart across
  // round boundaries too (the PS bounds its memory by that spacing). Addressed by local index j:
  // fragment first_fragment(k) + j * P of the round. The window is anchored at `expected`, as
  // in the paper's §3.6.
  struct Flow {
    AimdWindow cc;
    RttEstimator rtt;                  // this flow's measured round trips; kept across rounds
    std::uint32_t fragment_count = 0;  // this flow's fragments in the current round
    std::uint32_t expected = 0;        // local index of the first fragment without a result
    std::uint32_t next_to_send = 0;    // local index of the first fragment never sent
    std::uint32_t received_end = 0;    // one past the newest local index with a result (0: none yet)
    std::uint32_t loss_scan = 0;       // where detect_loss's search for lost holes goes on
    // RACK's clock (RFC 8985): the latest first send among results of fragments sent once, and
    // that result's round trip. A hole is due back a round trip plus the reordering window after
    // its own send; lost only once that passed (loss_deadline: when the next hole falls due). The
    // window, as RACK's: none for a hole with three later results (newest[2]: one past the
    // third-newest local index with a result) while no reordering was seen; else `reordering`
    // quarters of srtt (of that round trip before any sample), at least one: one more (up to
    // four) after each fast retransmit its first copy made needless, one less after a round
    // without one.
    std::array<std::uint32_t, 3> newest{};
    Time rack_sent = kNever;
    Duration rack_rtt{};
    Time loss_deadline = kNever;
    std::uint32_t reordering = 0;
    bool needless_resend = false;               // this round
    std::vector<std::uint32_t> resent_holes{};  // local indices fast-resent and maybe still without a result
    Time hole_deadline = kNever;                // when the oldest of them goes again (probe_holes)
    Time tail_deadline = kNever;                // when the newest fragment without a result goes again (probe_tail)
    // After a timeout, the fragments sent before it (local index < recover) may all be lost, as
    // when a link or switch was down for a while. While results arrive only for resent fragments
    // (none for a fragment sent once, none for a later one), each that advances `expected` below
    // `recover` resends the new expected fragment at once (as TCP NewReno's partial acks do): a
    // window lost whole is recovered one RTT per fragment instead of one RTO per fragment. A
    // result for a fragment sent once shows the pipe is flowing: recovery ends (recover = 0) and
    // loss detection and the RTO take over again.
    std::uint32_t recover = 0;
    // Holes a timeout found (local indices in [expected, rescue_end) without a result: each was
    // older than a result and an RTO passed) that its burst did not resend: they are resent from
    // rescue_next on as new results come back (rescue_holes), as RFC 6675's recovery does after a
    // timeout: clocked by results, which a burst at every backed-off RTO is not.
    std::uint32_t rescue_next = 0;
    std::uint32_t rescue_end = 0;
    std::uint32_t timeout_burst = 0;  // packets the last timeout could resend at most
    // Fragments sent before this are no round-trip samples (kNever: none yet this round): when
    // the round's first result for this flow came. Fragments sent before it waited for the last
    // worker to start the round (compute skew, a slow start-up) as much as for the path, which
    // can be far longer than a round trip. (Moving it also to each result a resend went into
    // cost ATP a quarter of its share beside a TCP flow without ECN, 0.37 of the link against
    // 0.52: docs/protocol.md, "Worker".)
    Time samples_from = kNever;
    Duration rto{};                   // current retransmission timeout: rtt.rto(), backed off by timeouts
    Time rto_deadline = kNever;       // armed while fragments are unacknowledged
    Time progress_deadline = kNever;  // last new result + progress_timeout
  };

  explicit Impl(WorkerConfig c) : config(std::move(c)) {
    if (const std::optional<std::string> bad = worker_config_error(config)) throw std::invalid_argument(*bad);
    const auto packet_bytes = static_cast<std::uint32_t>(packet_size(config.values_per_packet));
    flows.reserve(config.ps.size());
    for (std::size_t k = 0; k < config.ps.size(); ++k) {
      flows.push_back(
          Flow{AimdWindow(config.congestion, packet_bytes),
               RttEstimator(config.retransmit_timeout, config.min_retransmit_timeout, max_retransmit_timeout(config))});
    }
    packet.resize(packet_bytes);
    round_base = config.initial_seq;
  }

  std::uint32_t num_flows() const { return static_cast<std::uint32_t>(flows.size()); }
  // The flow of fragment i of the current round, and the round's first fragment of flow k.
  std::uint32_t flow_of(std::uint32_t i) const {
    return static_cast<std::uint32_t>((seqs_before_round + i) % num_flows());
  }
  std::uint32_t first_fragment(std::uint32_t k) const {
    const auto shift = static_cast<std::uint32_t>(seqs_before_round % num_flows());
    return k >= shift ? k - shift : k + num_flows() - shift;
  }
  std::uint32_t fragment_of(std::uint32_t k, std::uint32_t j) const { return first_fragment(k) + j * num_flows(); }
  Seq seq_of_fragment(std::uint32_t i) const { return round_base + i; }  // wraps by design
  Seq seq_of(std::uint32_t k, std::uint32_t j) const { return seq_of_fragment(fragment_of(k, j)); }
  // One past the newest seq the flow has sent: everything from here on is sent later.
  Seq next_seq(const Flow& f, std::uint32_t k) const {
    return f.next_to_send == 0 ? seq_of(k, 0) : seq_of(k, f.next_to_send - 1) + 1;
  }

  // Sequence numbers this worker can have in flight at once: max_window per flow (the PS's
  // max_window_seqs). kHashedSlots reuses an index every this many.
  std::uint32_t index_slots() const {
    return static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(std::uint64_t{config.congestion.max_window} * num_flows(), 1, 0xFFFFFFFFu));
  }
  // Remaps are kept per base index (§3.6: "any subsequent gradient that would have been sent with
  // the old index"), or per slot with kHashedSlots, whose slots share a base index when there are
  // more of them than the range has aggregators.
  std::uint32_t remap_key(Seq seq) const {
    return config.index_policy == IndexPolicy::kHashedSlots
               ? seq % index_slots()
               : base_aggregator_index(config.job, seq, config.aggregators, config.index_policy);
  }

  std::uint32_t aggregator_index_for(Seq seq) const {
    const auto it = remap.find(remap_key(seq));
    return it != remap.end() ? it->second
                             : base_aggregator_index(config.job, seq, config.aggregators, config.index_policy,
                                                     index_slots(), config.slot_home);
  }

  // Builds fragment i in the reusable buffer and sends it.
  void send_fragment(std::uint32_t i, bool resend, PacketSink& out) {
    Fragment& frag = fragments[i];
    const Seq seq = seq_of_fragment(i);
    const std::size_t first = std::size_t{i} * config.values_per_packet;
    const std::span<const float> in =
        input.subspan(first, std::min<std::size_t>(config.values_per_packet, input.size() - first));
    if (!resend) {
      frag.aggregator_index = aggregator_index_for(seq);
      frag.exponent = i < next_exponents->size() ? (*next_exponents)[i] : first_exponent;
      frag.magnitude = magnitude_of(in);
    }
    if (resend) frag.flags |= kResent;
    frag.sent = clock;
    if (!resend) frag.first_sent = clock;
    const PsRoute& route = config.ps[flow_of(i)];
    Header h;
    h.resend = resend;
    h.float_payload = (frag.flags & kFloatMode) != 0;
    h.allocate = config.index_policy == IndexPolicy::kAllocated;
    h.job = config.job;
    h.value_count = config.values_per_packet;
    h.seq = seq;
    h.node = route.node;
    h.bitmap = 1;
    h.fan_in = 1;
    h.round_shape = i + 1 == round_fragments ? last_fragment_values() : 0;  // same on every (re)send
    h.aggregator_index = frag.aggregator_index;
    h.src = config.self;
    h.dst = route.ps;
    h.scale_exponent = h.float_payload ? 0 : frag.exponent;
    h.magnitude_or_next = frag.magnitude;
    encode_header(h, packet);
    if (h.float_payload) {
      store_floats(packet, in);
    } else {
      store_quantized(packet, in, std::ldexp(1.0, frag.exponent));
    }
    // The round's last fragment is zero-padded to the packet's width.
    std::fill(packet.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + 4 * in.size()), packet.end(), 0);
    out.send(packet);
    ++stats.gradient_packets_sent;
    if (resend) ++stats.retransmissions;
  }

  // Real (not padding) values in the round's last fragment: 1..values_per_packet.
  std::uint16_t last_fragment_values() const {
    return static_cast<std::uint16_t>(input.size() - std::size_t{round_fragments - 1} * config.values_per_packet);
  }

  // Sends new fragments of flow k while the window has room.
  void send_new(std::uint32_t k, Time now, PacketSink& out) {
    Flow& f = flows[k];
    const std::uint32_t window = f.cc.window();
    while (f.next_to_send < f.fragment_count && f.next_to_send - f.expected < window) {
      send_fragment(fragment_of(k, f.next_to_send), /*resend=*/false, out);
      ++f.next_to_send;
    }
    if (f.rto_deadline == kNever && f.expected < f.next_to_send) f.rto_deadline = deadline_after(now, f.rto);
  }

  bool start(std::span<const float> in, std::span<float> sums, Time now, PacketSink& out) {
    if (state != WorkerState::kIdle || sums.size() != in.size()) return false;
    clock = now;
    const std::uint64_t count = fragment_count(in.size(), config.values_per_packet);
    if (count > kMaxRoundFragments) return false;
    // Sequence numbers continue from the previous round.
    round_base += round_fragments;
    seqs_before_round += round_fragments;
    round_fragments = static_cast<std::uint32_t>(count);
    fragments_received = 0;
    input = in;
    result = sums;
    use_exponent_history(in.size());
    fragments.assign(count, Fragment{});
    float_fragments.clear();
    result_exponents.assign(count, 0);
    if (count == 0) {
      ++stats.rounds_completed;
      return true;
    }
    state = WorkerState::kRunning;
    for (std::uint32_t k = 0; k < num_flows(); ++k) {
      Flow& f = flows[k];
      const std::uint32_t first = first_fragment(k);
      f.fragment_count = round_fragments > first ? (round_fragments - first + num_flows() - 1) / num_flows() : 0;
      f.expected = 0;
      f.next_to_send = 0;
      f.received_end = 0;
      f.loss_scan = 0;
      f.newest = {};
      f.rack_sent = kNever;
      f.loss_deadline = kNever;
      if (!f.needless_resend && f.reordering > 0) --f.reordering;
      f.needless_resend = false;
      f.resent_holes.clear();
      f.hole_deadline = kNever;
      f.tail_deadline = kNever;
      f.recover = 0;
      f.rescue_next = 0;
      f.rescue_end = 0;
      f.rto = f.rtt.rto();
      f.rto_deadline = kNever;
      f.samples_from = kNever;
      f.progress_deadline = f.fragment_count > 0 ? deadline_after(now, config.progress_timeout) : kNever;
      send_new(k, now, out);
    }
    return true;
  }

  // Seqs of earlier rounds (at most 2^31 back, beyond which serial order is ambiguous).
  bool from_earlier_round(Seq seq) const {
    const std::uint32_t back = round_base - seq;
    const std::uint64_t horizon = std::min<std::uint64_t>(seqs_before_round, kMaxRoundFragments);
    return back >= 1 && back <= horizon;
  }

  void learn_remap(Seq seq, std::uint32_t new_index) {
    if (!config.aggregators.contains(new_index)) return;  // not an index of this job's range: ignore
    const auto [it, inserted] = remap.try_emplace(remap_key(seq), new_index);
    if (inserted || it->second != new_index) {
      it->second = new_index;
      ++stats.remaps;
    }
  }

  // Writes fragment i's sum over its input, which is never read again: no later packet of the
  // round carries fragment i (resends are only for fragments without a result).
  void store_result(std::uint32_t i, const Header& h, std::span<const std::uint8_t> bytes) {
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

  void complete_round() {
    state = WorkerState::kIdle;
    ++stats.rounds_completed;
    std::sort(float_fragments.begin(), float_fragments.end());
    for (Flow& f : flows) {
      f.rto_deadline = kNever;
      f.progress_deadline = kNever;
    }
  }

  void on_packet(std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
    Header h;
    if (decode_header(bytes, h) == DecodeError::kOk) return on_packet(h, bytes, now, out);
    clock = now;
    ++stats.dropped;
  }

  void on_packet(const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
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
      if (!from_earlier_round(h.seq)) {
        ++stats.dropped;
      } else if (h.resend_request) {
        ++stats.resend_requests_ignored;  // its result came: the PS's request crossed it
      } else {
        ++stats.parameters_received;
        if (h.ecn) ++stats.ecn_parameters;
        ++stats.duplicate_parameters;
      }
      return;
    }
    const std::uint32_t k = flow_of(i);
    const std::uint32_t j = i / num_flows();  // i = first_fragment(k) + j * P, first_fragment(k) < P
    Flow& f = flows[k];
    if (h.resend_request) {
      answer_resend_request(k, j, now, out);
      return;
    }
    if (j >= f.next_to_send) {  // never sent, so no PS can have its result: forged or corrupt
      ++stats.dropped;
      return;
    }
    ++stats.parameters_received;
    if (h.ecn) ++stats.ecn_parameters;
    Fragment& frag = fragments[i];
    if ((frag.flags & kReceived) != 0) {
      ++stats.duplicate_parameters;
      return;
    }
    if (h.overflow) {
      // The int32 aggregate saturated: the PS collects this fragment as float32 from every
      // worker. Resend it once now; any later retransmission of it is float32 too.
      if ((frag.flags & kFloatMode) != 0) {
        ++stats.duplicate_parameters;
        return;
      }
      // The float resend is also the fragment's one fast retransmit: while the PS collects floats
      // from every worker, results for later fragments overtake it without meaning a loss.
      frag.flags |= kFloatMode | kFastResent;
      ++stats.float_resends;
      send_fragment(i, /*resend=*/true, out);
      return;
    }

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
    if (f.samples_from == kNever) f.samples_from = now;
    store_result(i, h, bytes);
    f.received_end = std::max(f.received_end, j + 1);
    note_result(f, j, frag, now);
    if (h.collision) learn_remap(h.seq, h.bitmap);
    f.progress_deadline = deadline_after(now, config.progress_timeout);
    // Every new result acknowledges data, so it feeds the window (and its ECN mark is not lost).
    f.cc.on_ack(h.seq, h.ecn, next_seq(f, k));
    if (j == f.expected) {
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
    rescue_holes(k, out);
    if (f.expected < f.fragment_count) detect_loss(k, out);
    if (fragments_received == round_fragments) {
      complete_round();
      return;
    }
    send_new(k, now, out);
    arm_tail_probe(k, now);
  }

  // A new result of flow f, for local index j: one of the three newest? The newest sent so far
  // (RACK's clock; a resent fragment's result may answer either copy: not used)?
  static void note_result(Flow& f, std::uint32_t j, const Fragment& frag, Time now) {
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
  void detect_loss(std::uint32_t k, PacketSink& out) {
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
  static Duration hole_probe(const Flow& f) {
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
  void arm_tail_probe(std::uint32_t k, Time now) {
    Flow& f = flows[k];
    f.tail_deadline = kNever;
    if (config.loss_recovery == LossRecovery::kTimeoutOnly || f.expected >= f.next_to_send ||
        f.loss_deadline != kNever || holes_unanswered(f, k) || f.expected < f.recover || f.rescue_next < f.rescue_end ||
        (fragments[newest_outstanding(f, k)].flags & kFastResent) != 0) {
      return;
    }
    const Duration pto = std::max(kMinTailProbe, 2 * (f.rtt.has_sample() ? f.rtt.srtt() : f.rack_rtt));
    const Time due = deadline_after(now, pto);
    if (due < f.rto_deadline) f.tail_deadline = due;
  }

  // Whether a fast-resent hole of flow k still waits for its result (probe_holes forgets the
  // answered ones only when it next runs).
  bool holes_unanswered(const Flow& f, std::uint32_t k) const {
    return std::any_of(f.resent_holes.begin(), f.resent_holes.end(),
                       [&](std::uint32_t j) { return (fragments[fragment_of(k, j)].flags & kReceived) == 0; });
  }

  // The fragment (index) of flow k sent last that has no result; the flow has one.
  std::uint32_t newest_outstanding(const Flow& f, std::uint32_t k) const {
    std::uint32_t j = f.next_to_send - 1;
    while (j > f.expected && (fragments[fragment_of(k, j)].flags & kReceived) != 0) --j;
    return fragment_of(k, j);
  }

  void probe_tail(std::uint32_t k, PacketSink& out) {
    Flow& f = flows[k];
    f.tail_deadline = kNever;
    if (f.expected >= f.next_to_send) return;
    ++stats.fast_retransmits;
    ++stats.tail_probes;
    send_fragment(newest_outstanding(f, k), /*resend=*/true, out);
  }

  void probe_holes(std::uint32_t k, Time now, PacketSink& out) {
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
  void answer_resend_request(std::uint32_t k, std::uint32_t j, Time now, PacketSink& out) {
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
  void resend_after_partial_ack(std::uint32_t k, PacketSink& out) {
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
  void rescue_holes(std::uint32_t k, PacketSink& out) {
    if (config.loss_recovery == LossRecovery::kTimeoutOnly) return;
    Flow& f = flows[k];
    const std::uint64_t end = std::min<std::uint64_t>(f.rescue_end, std::uint64_t{f.expected} + f.cc.window());
    f.rescue_next = resend_holes(k, std::max(f.rescue_next, f.expected), end, 2, out);
  }

  // Resends flow k's fragments without a result among local indices [from, end), oldest first,
  // at most `budget` of them. Returns where it stopped: one past the last index it looked at.
  std::uint32_t resend_holes(std::uint32_t k, std::uint32_t from, std::uint64_t end, std::uint32_t budget,
                             PacketSink& out) {
    std::uint32_t j = from;
    while (j < end && budget > 0) {
      const std::uint32_t i = fragment_of(k, j++);
      if ((fragments[i].flags & kReceived) != 0) continue;
      send_fragment(i, /*resend=*/true, out);
      --budget;
    }
    return j;
  }

  // The PS says the workers' rounds differ in size at h.seq (docs/protocol.md "Round shape"). For
  // a fragment of this round that this worker sent and has no result of, that ends the round:
  // no result will ever come. Anything else is not about this round: counted as a drop.
  void on_shape_mismatch(const Header& h) {
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

  void fail(std::string why) {
    state = WorkerState::kFailed;
    error = std::move(why);
    for (Flow& f : flows) {
      f.rto_deadline = kNever;
      f.progress_deadline = kNever;
    }
  }

  void on_host_queue_full(Time now) {
    if (state != WorkerState::kRunning) return;
    clock = now;
    for (std::uint32_t k = 0; k < num_flows(); ++k) {
      Flow& f = flows[k];
      if (f.expected == f.next_to_send) continue;  // nothing in flight: not this flow's queue
      ++stats.host_queue_full;
      f.cc.on_congestion(seq_of(k, f.expected), next_seq(f, k));
    }
  }

  void on_timeout(Time now, PacketSink& out) {
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
  Duration timeout_jitter(Duration rto) const {
    std::uint64_t x = (std::uint64_t{config.self} << 32) ^ (std::uint64_t{config.job} << 16) ^ stats.timeouts;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    const auto quarter = static_cast<std::uint64_t>(rto.count() / 4);
    return quarter == 0 ? Duration::zero() : Duration(static_cast<Duration::rep>(x % quarter));
  }

  Time next_deadline() const {
    if (state != WorkerState::kRunning) return kNever;
    Time t = kNever;
    for (const Flow& f : flows)
      t = std::min({t, f.rto_deadline, f.progress_deadline, f.hole_deadline, f.loss_deadline, f.tail_deadline});
    return t;
  }

  WorkerConfig config;
  WorkerState state = WorkerState::kIdle;
  Time clock{};  // the time of the call being handled (start, on_packet, on_timeout)
  std::string error;
  WorkerStats stats;
  std::vector<Flow> flows;                                 // flows[k] sends to config.ps[k]
  std::unordered_map<std::uint32_t, std::uint32_t> remap;  // base aggregator index -> index to use

  // The current round (or the last one, when idle).
  Seq round_base = 0;                   // seq of fragment 0
  std::uint32_t round_fragments = 0;    // fragments in the round
  std::uint64_t seqs_before_round = 0;  // seqs used by earlier rounds: their parameters are duplicates
  std::uint32_t fragments_received = 0;
  // The round's values and where their sums go (the caller's, or owned_*), the same size; they
  // may be the same memory.
  std::span<const float> input;
  std::span<float> result;
  std::vector<float> owned_input, owned_result;  // start() without a place for the sums
  std::vector<Fragment> fragments;               // round_fragments entries
  std::vector<std::uint32_t> float_fragments;
  std::vector<std::int16_t> result_exponents;  // round_fragments entries: each int result's exponent
  // By fragment position, across the rounds of one size: the exponent the PS chose for the
  // position's next round of that size (a position no such round reached yet starts at
  // first_exponent). Kept per size because a training step allreduces several tensors in turn
  // (DDP's buckets, of different sizes, in the same order every step): the k-th fragment of the
  // next call is of another tensor, whose magnitudes the last call's results say nothing about,
  // while the same tensor's last step is a good guess. At most kExponentHistories sizes, the least
  // recently used forgotten first: every worker of a job calls with the same sizes in the same
  // order, so all keep and forget the same ones and send each fragment at the same exponent.
  struct ExponentHistory {
    std::size_t values = 0;       // the rounds' size
    std::uint64_t last_used = 0;  // the round that last used it
    std::vector<std::int16_t> next;
  };
  static constexpr std::size_t kExponentHistories = 64;
  std::vector<ExponentHistory> exponent_histories;
  std::uint64_t rounds_started = 0;
  std::vector<std::int16_t>* next_exponents = nullptr;  // this round's size's history

  // Points next_exponents at the history of rounds of `values` values. A size without one starts
  // from the last round's exponents (DDP rebuilds its buckets after the first step: the new ones'
  // magnitudes are nearer the last round's than the job's scale), in the slot of the least
  // recently used size once there are kExponentHistories.
  void use_exponent_history(std::size_t values) {
    ++rounds_started;
    auto it = std::find_if(exponent_histories.begin(), exponent_histories.end(),
                           [&](const ExponentHistory& h) { return h.values == values; });
    if (it == exponent_histories.end()) {
      std::vector<std::int16_t> last = next_exponents != nullptr ? *next_exponents : std::vector<std::int16_t>();
      if (exponent_histories.size() < kExponentHistories) {
        it = exponent_histories.emplace(exponent_histories.end());
      } else {
        it = std::min_element(
            exponent_histories.begin(), exponent_histories.end(),
            [](const ExponentHistory& a, const ExponentHistory& b) { return a.last_used < b.last_used; });
      }
      *it = ExponentHistory{values, 0, std::move(last)};
    }
    it->last_used = rounds_started;
    next_exponents = &it->next;
  }
  const std::int16_t first_exponent = initial_exponent(config.scale);

  // Reused for every packet, so that sending allocates nothing.
  std::vector<std::uint8_t> packet;  // one gradient packet
};

WorkerEndpoint::WorkerEndpoint(WorkerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
WorkerEndpoint::~WorkerEndpoint() = default;
WorkerEndpoint::WorkerEndpoint(WorkerEndpoint&&) noexcept = default;
WorkerEndpoint& WorkerEndpoint::operator=(WorkerEndpoint&&) noexcept = default;

bool WorkerEndpoint::start(std::span<const float> input, Time now, PacketSink& out) {
  if (impl_->state != WorkerState::kIdle) return false;
  impl_->owned_input.assign(input.begin(), input.end());
  impl_->owned_result.resize(input.size());
  return impl_->start(impl_->owned_input, impl_->owned_result, now, out);
}
bool WorkerEndpoint::start_in_place(std::span<float> values, Time now, PacketSink& out) {
  return impl_->start(values, values, now, out);
}
void WorkerEndpoint::on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(packet, now, out);
}
void WorkerEndpoint::on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(header, packet, now, out);
}
void WorkerEndpoint::on_timeout(Time now, PacketSink& out) { impl_->on_timeout(now, out); }
void WorkerEndpoint::on_host_queue_full(Time now) { impl_->on_host_queue_full(now); }
Time WorkerEndpoint::next_deadline() const { return impl_->next_deadline(); }
WorkerState WorkerEndpoint::state() const { return impl_->state; }
const std::string& WorkerEndpoint::error() const { return impl_->error; }
std::span<const float> WorkerEndpoint::result() const { return impl_->result; }
const std::vector<std::uint32_t>& WorkerEndpoint::float_fragments() const { return impl_->float_fragments; }
const std::vector<std::int16_t>& WorkerEndpoint::result_exponents() const { return impl_->result_exponents; }
const WorkerStats& WorkerEndpoint::stats() const { return impl_->stats; }
Seq WorkerEndpoint::resume_seq() const { return impl_->round_base + 2 * impl_->round_fragments; }  // same-size rounds
std::uint32_t WorkerEndpoint::window(std::size_t ps_index) const {
  return ps_index < impl_->flows.size() ? impl_->flows[ps_index].cc.window() : 0;
}
const WorkerConfig& WorkerEndpoint::config() const { return impl_->config; }

}  // namespace atp
