// RinaWorker's state (worker.h), shared by the files that make up its state machine: the packets
// it sends and their windows (worker_send.cc), the packets that come in (worker_receive.cc), acks,
// resends, asks and timers (worker_recovery.cc), rounds and redo passes (worker_rounds.cc), and the
// public class over it (worker.cc). Internal to src/rina/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "atp/rina/worker.h"
#include "loss_clock.h"
#include "window.h"

namespace atp {

struct RinaWorker::Impl {
  // Seqs a round reserves: its first pass and at most one redo pass (docs/rina.md "Exponents").
  static constexpr std::uint32_t kPasses = 2;

  // A fragment's complete sum, at its exponent.
  struct Final {
    std::vector<std::int32_t> values;
    std::int16_t exponent = 0;
    std::int16_t magnitude = kNoMagnitude;  // the largest among every worker's values of it
    std::uint32_t fragments = 0;            // its round's fragment count (Header::round_fragments)
    std::uint16_t shape = 0;                // Header::round_shape
  };

  // A hop's sum arriving at its carrier, in one piece or several (disjoint sets of workers).
  struct Merge {
    std::uint32_t bitmap = 0;
    std::vector<std::int64_t> sums;
    std::int16_t magnitude = kNoMagnitude;
    bool saturated = false;
    bool ecn = false;
    bool resent = false;  // some piece was (or held) a resend
    bool complete = false;
    std::uint32_t pieces = 0;                                  // packets merged in
    std::uint32_t alone_bits = 0;                              // workers that came in alone
    std::map<std::uint32_t, std::vector<std::int32_t>> alone;  // their values, by bit
    std::uint32_t aggregator_index = 0;
  };

  // What limits a contribution (docs/rina.md "Reliability and congestion control"): a first hop's go
  // out in one order on every worker of the rack, in the window; a carrier's of a later hop in a
  // window of its own, and when it goes, it pulls the rest of the rack's, which go at once. A
  // window that held a worker's later hops back could wait for a fragment that waits for it.
  enum class Pool : std::uint8_t { kFirstHop, kCarrier, kPulled };

  // A send that waits for its acknowledgement.
  struct Outstanding {
    std::vector<std::uint8_t> packet;
    Time first_sent{};
    Time last_sent{};
    Time expires{};
    std::uint8_t resends = 0;     // how often it was sent again (at most 255)
    bool fast_resent = false;     // resent by its LossClock, before the RTO
    bool probed = false;          // sent again as a tail probe (last_sent), the first copy not known lost
    Pool pool = Pool::kFirstHop;  // a contribution's (a gather's is unused)
    Seq cc_seq = 0;               // its flow's sequence number (the window's, and LossClock's order)
    std::uint32_t clock = 0;      // its LossClock (Impl::clock_of)
  };

  // What a carrier acknowledged, to say it again to a resend.
  struct AckSent {
    Address dst = 0;
    std::uint32_t aggregator_index = 0;
    RinaKind kind = RinaKind::kContribution;  // of the hop sum acknowledged: a seq's hops share it
  };

  enum class Flow : std::uint8_t { kReduceScatter, kAllgather };

  // An ack's echo of the mark its hop sum or gather arrived with, in its bitmap (which an ack
  // otherwise leaves 0). Not its ECN flag: an ack picks that up on its own way back, and the way
  // back from the next member crosses that member's uplink, a queue this worker's data never enters
  // (measured, a k=4 fat-tree with 4 of 8 racks aggregating: the worker just before each rack was
  // the ring's slowest member, its window cut by marks from the rack's uplink, 750 hop sums waiting).
  static constexpr std::uint32_t kEcnEcho = 1;

  static bool any_saturated(std::span<const std::int32_t> values) {
    return std::any_of(values.begin(), values.end(), is_saturated);
  }

  explicit Impl(RinaConfig c);  // worker.cc

  // The allgather's window starts from one packet (Rina §IV-C1: "starts from zero").
  static CongestionConfig allgather_congestion(CongestionConfig c) {
    c.initial_window = std::max<std::uint32_t>(1, c.min_window);
    return c;
  }
  Duration max_rto() const {
    return std::max(config.min_retransmit_timeout,
                    std::min(config.max_retransmit_timeout, config.progress_timeout / 8));
  }

  // ---- the ring's shape for this round ----
  std::uint32_t member_size(std::uint32_t m) const { return static_cast<std::uint32_t>(config.members[m].size()); }
  bool abstracted(std::uint32_t m) const { return member_size(m) > 1; }
  std::uint32_t next_member() const { return (member + 1) % ring; }
  std::uint32_t prev_member() const { return (member + ring - 1) % ring; }
  std::uint32_t carrier_rank(std::uint32_t f, std::uint32_t m) const { return config.members[m][f % member_size(m)]; }
  Address carrier(std::uint32_t f, std::uint32_t m) const { return config.workers[carrier_rank(f, m)]; }
  bool carries(std::uint32_t f) const { return carrier_rank(f, member) == config.rank; }
  std::uint32_t chunk(std::uint32_t f) const { return chunk_of[f]; }
  // This member's reduce-scatter hop of fragment f: 0 where its chunk starts, ring-1 completes it.
  std::uint32_t hop(std::uint32_t f) const { return (member + ring - chunk(f)) % ring; }
  // Whether this worker passes f's final on round the allgather: it carries f here, and neither
  // this member nor the next one completed it (the completing rack has it from its switch).
  bool forwards(std::uint32_t f) const {
    const std::uint32_t completer = (chunk(f) + ring - 1) % ring;
    return ring > 1 && carries(f) && member != completer && next_member() != completer;
  }
  std::uint16_t shape(std::uint32_t f) const { return f + 1 == fragments ? last_count : 0; }
  Seq seq_of(std::uint32_t f) const { return pass_base + f; }
  bool in_current_pass(Seq s) const {
    const std::int64_t f = static_cast<std::int32_t>(s - pass_base);
    return state == WorkerState::kRunning && f >= 0 && f < fragments && in_pass[static_cast<std::size_t>(f)];
  }
  // Where acknowledgements to member m go: its agent (its ToR hands them to the whole rack), or
  // another worker of it when the agent is this worker (a ring of one rack).
  Address ack_destination(std::uint32_t m) const {
    const auto& ranks = config.members[m];
    return config.workers[ranks[0] != config.rank || ranks.size() == 1 ? ranks[0] : ranks[1]];
  }
  // Whether `src` is one of member m's workers.
  bool from_member(std::uint32_t m, Address src) const {
    const auto& ranks = config.members[m];
    return std::any_of(ranks.begin(), ranks.end(), [&](std::uint32_t r) { return config.workers[r] == src; });
  }

  // ---- a send's identity: its flow and seq, and its LossClock ----
  static std::uint64_t key(Flow flow, Seq seq) { return (std::uint64_t{flow == Flow::kAllgather} << 32) | seq; }
  static Flow flow_of(std::uint64_t key) { return (key >> 32) != 0 ? Flow::kAllgather : Flow::kReduceScatter; }
  static Seq seq_of_key(std::uint64_t key) { return static_cast<Seq>(key & 0xFFFFFFFFu); }
  // The LossClock of a send of this pass: one for each kind (a contribution's pool: kFirstHop,
  // kCarrier, kPulled; or a gather) and receiver (the next member's carrier), whose acks come back
  // in the order of their sends. Across receivers they do not: each is behind a queue of its own
  // in its switch, which holds other traffic too (measured, two racks at 10 Gbit/s: a first hop
  // to one carrier acknowledged 93 us after its send, one of the same burst to another 74 us).
  std::uint32_t clock_of(Flow flow, Pool pool, Seq seq) const {
    const std::uint32_t kind = flow == Flow::kAllgather ? kGatherKind : static_cast<std::uint32_t>(pool);
    return kind * member_size(next_member()) + (seq - pass_base) % member_size(next_member());
  }
  static constexpr std::uint32_t kGatherKind = 3;
  static constexpr std::uint32_t kKinds = 4;

  // Fragment f's values of this worker's tensor.
  std::span<const float> values_of(std::uint32_t f) const {
    const std::size_t first = std::size_t{f} * v;
    return tensor.subspan(first, std::min<std::size_t>(v, tensor.size() - first));
  }

  // ---- packets out, and what the windows let go (worker_send.cc) ----
  void emit(std::span<const std::uint8_t> packet, PacketSink& out);
  void send_control(RinaKind kind, Seq seq, Address dst, std::uint32_t aggregator_index, bool ecn,
                    std::uint16_t round_shape, PacketSink& out, bool resend = false);
  Header fragment_header(RinaKind kind, std::uint32_t f, Address dst, std::int16_t e, std::int16_t magnitude);
  void track(Flow flow, Seq seq, std::vector<std::uint8_t> packet, Pool pool, Time now);
  void send_contribution(std::uint32_t f, Pool pool, Time now, PacketSink& out);
  void send_gather(std::uint32_t f, Time now, PacketSink& out);
  void pump(Time now, PacketSink& out);
  std::pair<std::uint64_t, std::uint32_t> order(std::uint32_t f) const;
  std::uint32_t chunk_begin(std::uint32_t c) const;
  std::uint32_t aggregator_of(std::uint32_t f) const;
  void pull(std::uint32_t f, PacketSink& out);

  // ---- rounds and passes (worker_rounds.cc) ----
  bool start(std::span<float> in, Time now, PacketSink& out);
  void start_pass(std::uint32_t p, const std::vector<std::uint32_t>& set, Time now, PacketSink& out);
  void end_pass(Time now, PacketSink& out);
  Seq latest_seq(std::uint32_t f) const;
  void record_final(std::uint32_t f, std::vector<std::int32_t> values, std::int16_t e, std::int16_t magnitude, Time now,
                    PacketSink& out);

  // ---- packets in (worker_receive.cc) ----
  void on_packet(std::span<const std::uint8_t> bytes, Time now, PacketSink& out);
  void on_packet(const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out);
  void replay_early(Time now, PacketSink& out);
  void on_fragment(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now, PacketSink& out);
  void on_stale(const Header& h, Time, PacketSink& out);
  void answer(const Header& h, PacketSink& out);
  bool same_round(const Header& h, std::uint32_t f, PacketSink& out);
  std::string size_mismatch() const;
  void take_final(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now, PacketSink& out);
  void on_hop_sum(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now, PacketSink& out);
  bool hop_sum_fits(const Header& h, std::uint32_t f) const;
  bool merge_piece(Merge& m, const Header& h, std::span<const std::uint8_t> bytes);
  void take_merged_final(const Header& h, std::uint32_t f, const Merge& m, Time now, PacketSink& out);

  // ---- acks, resends, asks and timers (worker_recovery.cc) ----
  void on_ack(Flow flow, const Header& h, Time now, PacketSink& out);
  void acknowledged(Flow flow, Seq seq, bool ecn, bool from_resend, Time now, PacketSink& out);
  std::map<Seq, Outstanding>::iterator forget(Flow flow, std::map<Seq, Outstanding>::iterator it);
  Time tail_due(std::uint32_t c) const;
  void probe_tail(std::uint32_t c, Time now, PacketSink& out);
  void detect_loss(std::uint32_t c, Time now, PacketSink& out);
  void resend(Flow flow, Outstanding& o, Time now, PacketSink& out);
  void on_host_queue_full(Time now);
  Duration rto() const;
  Duration unbacked_rto() const;
  void progress(Time now);
  void on_timeout(Time now, PacketSink& out);
  Address rack_mate(std::uint32_t f) const;
  std::string first_missing() const;
  Time request_due() const;
  Time next_deadline() const;
  void fail(std::string why);

  RinaConfig config;
  std::uint32_t ring;  // G
  std::uint32_t n;     // workers
  std::uint16_t v;     // values per fragment
  std::uint32_t member = 0, position = 0;
  Address self = 0;
  RttEstimator rtt;
  RinaWindow sr, ag;
  Seq sr_next = 0, ag_next = 0;  // congestion-control sequence numbers of the two flows
  int backoff = 1;
  Duration max_rtt_now{}, max_rtt_before{};  // the longest round trip measured this round, the last
  std::vector<LossClock> clocks;             // by clock_of
  std::vector<Time> loss_due;                // when each clock's next send falls due
  // LossClock's reordering window, in quarters of a round trip: one more (up to kMaxReordering)
  // after each fast retransmit its first copy made needless, one less after a round without one.
  std::uint32_t reordering = 1;
  bool needless_resend = false;  // this round
  // Each clock's newest send while it waits for its ack and no probe went for it (tail_due).
  struct Tail {
    Time sent = kNever;
    std::uint64_t key = 0;
  };
  std::vector<Tail> tails;

  WorkerState state = WorkerState::kIdle;
  std::string error;
  RinaStats stats;
  Time clock{};
  Time last_progress{}, last_request{};
  Duration request_interval{};
  std::uint32_t request_batches = 0;   // this pass's asks (batches): even ones go to a rack-mate first
  std::set<std::uint32_t> unanswered;  // the fragments of the last asks whose finals have not come
  bool others_came = false;            // since the last asks, a final they did not ask for
  bool ask_now = false;                // theirs all came, no other did: ask for the rest at once (request_due)

  // The round.
  std::span<float> tensor;   // the round's input; its sums once the round completed
  std::vector<float> owned;  // start()'s copy
  std::uint32_t fragments = 0;
  std::uint16_t last_count = 0;
  std::vector<std::uint32_t> chunk_of;
  std::vector<std::int16_t> exponent;              // this pass's, by fragment
  std::vector<std::int16_t> exponent_by_position;  // the next round's, by fragment position
  std::vector<std::int16_t> result_exponent;
  Seq round_base = 0, previous_round_base = 0, pass_base = 0;
  std::uint32_t pass = 0;
  std::uint32_t missing = 0;  // finals of this pass not in yet
  std::vector<bool> in_pass;
  std::vector<bool> contributed;               // this pass: sent its contribution (a pull after that is news to nobody)
  std::map<Seq, Merge> merges;                 // hop sums this worker carries, this pass
  std::unordered_map<Seq, Final> finals;       // this round's and the last one's, by seq
  std::unordered_map<Seq, AckSent> acks_sent;  // what it acknowledged, for resends
  std::set<std::pair<std::uint64_t, std::uint32_t>> ready_plain, ready_carrier;  // contributions to send, in order()
  std::deque<std::uint32_t> ready_gather;
  std::uint32_t plain_in_flight = 0, carrier_in_flight = 0;
  std::map<Seq, Outstanding> sr_out, ag_out;
  std::set<std::pair<Time, std::uint64_t>> timers;  // (expiry, flow and seq)
  std::vector<std::vector<std::uint8_t>> early;
};

}  // namespace atp
