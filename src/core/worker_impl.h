// The ATP worker endpoint's state, shared by the files that implement it: sending and the round
// (worker.cc), receiving results (worker_results.cc), loss recovery (worker_recovery.cc). Internal to src/core/.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/worker.h"

namespace atp {

struct WorkerEndpoint::Impl {
  // Per-fragment flags of the current round.
  static constexpr std::uint8_t kReceived = 1u << 0;     // its result is in `result`
  static constexpr std::uint8_t kFastResent = 1u << 1;   // the one fast retransmit of this fragment was used
  static constexpr std::uint8_t kFloatMode = 1u << 2;    // the PS asked for float32: every (re)send is float32
  static constexpr std::uint8_t kFloatResult = 1u << 3;  // the result came over the float32 path
  static constexpr std::uint8_t kResent = 1u << 4;       // sent again at least once (any reason)
  // Bits 5-6: how many times its fast retransmit went unanswered and went again (probe_holes).
  static constexpr unsigned kProbeShift = 5;
  static constexpr std::uint8_t kProbes = 3u << kProbeShift;

  // A round may not span more than half the sequence space, or serial arithmetic breaks.
  static constexpr std::uint64_t kMaxRoundFragments = std::uint64_t{1} << 31;

  // The largest RTO a flow uses: the configured bound, and at most an eighth of the progress
  // timeout, so that a hole several workers must resend in turn is recovered before the job gives up.
  static Duration max_retransmit_timeout(const WorkerConfig& c) {
    return std::max(c.min_retransmit_timeout, std::min(c.max_retransmit_timeout, c.progress_timeout / 8));
  }

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

  explicit Impl(WorkerConfig c);

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

  // Real (not padding) values in the round's last fragment: 1..values_per_packet.
  std::uint16_t last_fragment_values() const {
    return static_cast<std::uint16_t>(input.size() - std::size_t{round_fragments - 1} * config.values_per_packet);
  }

  // Sending and the round (worker.cc).
  void send_fragment(std::uint32_t i, bool resend, PacketSink& out);
  void send_new(std::uint32_t k, Time now, PacketSink& out);
  bool start(std::span<const float> in, std::span<float> sums, Time now, PacketSink& out);
  void use_exponent_history(std::size_t values);
  void fail(std::string why);
  Time next_deadline() const;

  // Receiving results (worker_results.cc).
  void on_packet(std::span<const std::uint8_t> bytes, Time now, PacketSink& out);
  void on_packet(const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out);
  void on_other_round(const Header& h);
  void on_overflow(std::uint32_t i, PacketSink& out);
  void on_result(std::uint32_t i, const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out);
  void review_resends(Flow& f, const Fragment& frag, const Header& h);
  static void sample_round_trip(Flow& f, const Fragment& frag, const Header& h, Time now);
  void advance_expected(std::uint32_t k, Time now, PacketSink& out);
  bool from_earlier_round(Seq seq) const;
  void learn_remap(Seq seq, std::uint32_t new_index);
  void store_result(std::uint32_t i, const Header& h, std::span<const std::uint8_t> bytes);
  void complete_round();
  void on_shape_mismatch(const Header& h);

  // Loss recovery (worker_recovery.cc).
  static void note_result(Flow& f, std::uint32_t j, const Fragment& frag, Time now);
  void detect_loss(std::uint32_t k, PacketSink& out);
  static Duration hole_probe(const Flow& f);
  void arm_tail_probe(std::uint32_t k, Time now);
  bool holes_unanswered(const Flow& f, std::uint32_t k) const;
  std::uint32_t newest_outstanding(const Flow& f, std::uint32_t k) const;
  void probe_tail(std::uint32_t k, PacketSink& out);
  void probe_holes(std::uint32_t k, Time now, PacketSink& out);
  void answer_resend_request(std::uint32_t k, std::uint32_t j, Time now, PacketSink& out);
  void resend_after_partial_ack(std::uint32_t k, PacketSink& out);
  void rescue_holes(std::uint32_t k, PacketSink& out);
  std::uint32_t resend_holes(std::uint32_t k, std::uint32_t from, std::uint64_t end, std::uint32_t budget,
                             PacketSink& out);
  void on_host_queue_full(Time now);
  void on_timeout(Time now, PacketSink& out);
  Duration timeout_jitter(Duration rto) const;

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
  const std::int16_t first_exponent = initial_exponent(config.scale);

  // Reused for every packet, so that sending allocates nothing.
  std::vector<std::uint8_t> packet;  // one gradient packet
};

}  // namespace atp
