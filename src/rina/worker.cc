// Rina's worker endpoint (include/atp/rina/worker.h), following docs/rina.md.
#include "atp/rina/worker.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "atp/values_per_packet.h"
#include "loss_clock.h"
#include "window.h"

namespace atp {
namespace {

// Seqs a round reserves: its first pass and at most one redo pass (docs/rina.md "Exponents").
constexpr std::uint32_t kPasses = 2;
constexpr std::uint64_t kMaxRoundFragments = std::uint64_t{1} << 30;
constexpr std::size_t kMaxEarlyPackets = 16384;                    // kept for a pass or round not started yet
constexpr int kMaxBackoff = 16;                                    // RTO multiples, as ATP's worker
constexpr std::uint32_t kMaxReordering = 4;                        // LossClock's widest window: a round trip
constexpr Duration kMinTailProbe = std::chrono::microseconds(10);  // as ATP's worker
constexpr std::size_t kRequestBatch = 64;                          // asks sent at once

void throw_if_bad(const RinaConfig& c) {
  if (const std::optional<std::string> bad = rina_config_error(c)) throw std::invalid_argument(*bad);
}

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
constexpr std::uint32_t kEcnEcho = 1;

bool any_saturated(std::span<const std::int32_t> values) {
  return std::any_of(values.begin(), values.end(), is_saturated);
}

}  // namespace

struct RinaWorker::Impl {
  explicit Impl(RinaConfig c)
      : config((throw_if_bad(c), std::move(c))),
        ring(config.members.size()),
        n(static_cast<std::uint32_t>(config.workers.size())),
        v(config.values_per_packet),
        rtt(config.retransmit_timeout, config.min_retransmit_timeout, max_rto(), 0),
        sr(config.congestion, static_cast<std::uint32_t>(packet_size(v))),
        ag(allgather_congestion(config.congestion), static_cast<std::uint32_t>(packet_size(v))) {
    for (std::uint32_t m = 0; m < ring; ++m) {
      for (std::uint32_t p = 0; p < config.members[m].size(); ++p) {
        if (config.members[m][p] == config.rank) {
          member = m;
          position = p;
        }
      }
    }
    self = config.workers[config.rank];
    round_base = config.initial_seq;
    clocks.resize(std::size_t{kKinds} * member_size(next_member()));
    loss_due.assign(clocks.size(), kNever);
    tails.resize(clocks.size());
  }

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

  // ---- packets out ----
  void emit(std::span<const std::uint8_t> packet, PacketSink& out) {
    out.send(packet);
    ++stats.packets_sent;
  }
  // `resend` on an ack: a piece of the hop sum it acknowledges was a resend (else every worker's
  // first copy made it, whatever it resent since: its round trip is a sample).
  void send_control(RinaKind kind, Seq seq, Address dst, std::uint32_t aggregator_index, bool ecn,
                    std::uint16_t round_shape, PacketSink& out, bool resend = false) {
    Header h;
    h.resend = resend;
    h.rina = kind;
    h.job = config.job;
    h.seq = seq;
    h.src = self;
    h.dst = dst;
    h.aggregator_index = aggregator_index;
    h.ecn = ecn;
    if ((kind == RinaKind::kAck || kind == RinaKind::kGatherAck) && ecn) h.bitmap = kEcnEcho;
    h.round_shape = round_shape;
    std::uint8_t bytes[kHeaderBytes];
    encode_header(h, bytes);
    emit(bytes, out);
  }
  Header fragment_header(RinaKind kind, std::uint32_t f, Address dst, std::int16_t e, std::int16_t magnitude) {
    Header h;
    h.rina = kind;
    h.job = config.job;
    h.seq = seq_of(f);
    h.round_fragments = fragments;
    h.round_shape = shape(f);
    h.src = self;
    h.dst = dst;
    h.scale_exponent = e;
    h.magnitude_or_next = magnitude;
    return h;
  }
  void track(Flow flow, Seq seq, std::vector<std::uint8_t> packet, Pool pool, Time now) {
    Outstanding o;
    o.packet = std::move(packet);
    o.first_sent = now;
    o.last_sent = now;
    o.expires = deadline_after(now, rto());
    o.pool = pool;
    o.cc_seq = flow == Flow::kReduceScatter ? sr_next++ : ag_next++;
    o.clock = clock_of(flow, pool, seq);
    clocks[o.clock].on_send(key(flow, seq), o.cc_seq, now);
    timers.emplace(o.expires, key(flow, seq));
    tails[o.clock] = Tail{now, key(flow, seq)};
    (flow == Flow::kReduceScatter ? sr_out : ag_out).emplace(seq, std::move(o));
  }
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

  void send_contribution(std::uint32_t f, Pool pool, Time now, PacketSink& out) {
    const std::uint32_t k = hop(f);
    const std::int16_t e = exponent[f];
    std::vector<std::int32_t> values(v, 0);
    const std::span<const float> mine = values_of(f);
    quantize(mine, std::ldexp(1.0, e), values);
    std::int16_t magnitude = magnitude_of(mine);
    bool saturated = any_saturated(values);
    if (carries(f) && k > 0) {  // this worker's values plus the hop sum it received
      const Merge& m = merges.at(seq_of(f));
      for (std::uint32_t i = 0; i < v; ++i) {
        const std::int64_t sum = std::int64_t{values[i]} + m.sums[i];
        saturated = saturated || sum > kSaturatedMax || sum < kSaturatedMin;
        values[i] = static_cast<std::int32_t>(std::clamp<std::int64_t>(sum, kSaturatedMin, kSaturatedMax));
      }
      saturated = saturated || m.saturated;
      magnitude = std::max(magnitude, m.magnitude);
    }
    if (saturated && !is_saturated(values[0])) values[0] = kSaturatedMax;  // sticky in every sum after
    contributed[f] = true;
    const RinaKind kind = k + 1 == ring ? RinaKind::kFinal : RinaKind::kContribution;
    Header h = fragment_header(kind, f, carrier(f, next_member()), e, magnitude);
    h.bitmap = std::uint32_t{1} << position;
    h.fan_in = static_cast<std::uint8_t>(member_size(member));
    h.aggregator_index = aggregator_of(f);
    std::vector<std::uint8_t> packet = build_packet(h, values);
    emit(packet, out);
    ++stats.contributions_sent;
    track(Flow::kReduceScatter, h.seq, std::move(packet), pool, now);
    if (pool == Pool::kCarrier && abstracted(member)) pull(f, out);
    // An autonomous worker completing a fragment has its final in what it sent.
    if (kind == RinaKind::kFinal && !abstracted(member)) record_final(f, std::move(values), e, magnitude, now, out);
  }

  void send_gather(std::uint32_t f, Time now, PacketSink& out) {
    const Final& fin = finals.at(seq_of(f));
    Header h = fragment_header(RinaKind::kGather, f, carrier(f, next_member()), fin.exponent, fin.magnitude);
    std::vector<std::uint8_t> packet = build_packet(h, fin.values);
    emit(packet, out);
    ++stats.gathers_sent;
    track(Flow::kAllgather, h.seq, std::move(packet), Pool::kPulled, now);
  }

  // Sends what the windows allow: the reduce-scatter's contributions in the order of their hops
  // (a carrier's dependent ones in an allowance of their own, so that they never wait behind
  // contributions that wait for them), then the allgather's.
  void pump(Time now, PacketSink& out) {
    if (state != WorkerState::kRunning) return;
    const std::uint32_t window = sr.window();
    for (const Pool pool : {Pool::kFirstHop, Pool::kCarrier}) {
      const bool carrier_pool = pool == Pool::kCarrier;
      auto& ready = carrier_pool ? ready_carrier : ready_plain;
      std::uint32_t& in_flight = carrier_pool ? carrier_in_flight : plain_in_flight;
      while (!ready.empty() && in_flight < window) {
        const std::uint32_t f = ready.begin()->second;
        ready.erase(ready.begin());
        ++in_flight;
        send_contribution(f, pool, now, out);
        if (state != WorkerState::kRunning) return;
      }
    }
    while (!ready_gather.empty() && ag_out.size() < ag.window()) {
      const std::uint32_t f = ready_gather.front();
      ready_gather.pop_front();
      send_gather(f, now, out);
    }
  }
  // The order contributions go out in: by position in their chunk, then by hop, so that every
  // hop's fragment i leaves together and the ring pipelines (hop k of fragment i needs only hop k-1
  // of fragment i). Hop by hop instead would leave the allgather's multicasts to the round's
  // last hop: the downlinks idle for the first hops and carry every final at the end.
  std::pair<std::uint64_t, std::uint32_t> order(std::uint32_t f) const {
    return {(std::uint64_t{f - chunk_begin(chunk(f))} << 32) | hop(f), f};
  }
  std::uint32_t chunk_begin(std::uint32_t c) const {
    return static_cast<std::uint32_t>(std::uint64_t{fragments} * c / ring);
  }
  // The aggregator of fragment f in its rack's switch (the packets' aggregator_index): each chunk
  // a run of its own of the table's slots, its fragments round-robin over the run. The ring
  // pipelines every chunk at once (order above), so a switch holds fragment i of each chunk
  // together: by seq % slots, fragments of two chunks shared an aggregator once a round had more
  // fragments than the table, and a rack-mate's copy that found its aggregator taken went on
  // alone while the other's waited in it for a timeout (Fig. 11, 11,446 fragments on 4096
  // aggregators: 824 collisions, 128 timeouts, 47.0 Gbit/s against 50.9 with no rack
  // aggregating). The pass turns the runs, as the seq did. A table smaller than two slots a
  // chunk keeps seq % slots.
  std::uint32_t aggregator_of(std::uint32_t f) const {
    const std::uint32_t slots = config.aggregator_slots;
    if (slots < 2 * ring) return seq_of(f) % slots;
    const std::uint32_t run = slots / ring;
    const std::uint32_t c = chunk(f);
    return c * run + static_cast<std::uint32_t>((f - chunk_begin(c) + std::uint64_t{pass_base}) % run);
  }

  // ---- rounds and passes ----
  // `in` is read until the round ends and then holds the sums: no pass over the tensor here, so
  // that `now` is still when the round starts (a copy of a 228 MB tensor on a busy host took
  // longer than the progress timeout before the first packet left).
  bool start(std::span<float> in, Time now, PacketSink& out) {
    if (state != WorkerState::kIdle) return false;
    const std::uint64_t count = fragment_count(in.size(), v);
    if (count > kMaxRoundFragments) return false;
    clock = now;
    max_rtt_before = max_rtt_now;
    max_rtt_now = Duration::zero();
    if (!needless_resend) reordering = std::max(reordering - 1, 1u);
    needless_resend = false;
    tensor = in;
    fragments = static_cast<std::uint32_t>(count);
    last_count = fragments == 0 ? 0 : static_cast<std::uint16_t>(in.size() - std::size_t{fragments - 1} * v);
    if (exponent_by_position.size() < fragments) {
      exponent_by_position.resize(fragments, initial_exponent(config.scale));
    }
    exponent.assign(exponent_by_position.begin(), exponent_by_position.begin() + fragments);
    result_exponent.assign(fragments, 0);
    chunk_of.resize(fragments);
    for (std::uint32_t c = 0; c < ring; ++c) {
      const auto begin = static_cast<std::uint32_t>(std::uint64_t{fragments} * c / ring);
      const auto end = static_cast<std::uint32_t>(std::uint64_t{fragments} * (c + 1) / ring);
      for (std::uint32_t f = begin; f < end; ++f) chunk_of[f] = c;
    }
    state = WorkerState::kRunning;
    std::vector<std::uint32_t> all(fragments);
    for (std::uint32_t f = 0; f < fragments; ++f) all[f] = f;
    start_pass(0, all, now, out);
    return true;
  }

  void start_pass(std::uint32_t p, const std::vector<std::uint32_t>& set, Time now, PacketSink& out) {
    pass = p;
    pass_base = round_base + p * fragments;
    missing = static_cast<std::uint32_t>(set.size());
    request_batches = 0;
    unanswered.clear();
    ask_now = others_came = false;
    in_pass.assign(fragments, false);
    contributed.assign(fragments, false);
    merges.clear();
    ready_plain.clear();
    ready_carrier.clear();
    ready_gather.clear();
    progress(now);
    if (missing == 0) return end_pass(now, out);
    for (const std::uint32_t f : set) {
      in_pass[f] = true;
      if (ring == 1 && !abstracted(member)) continue;  // a job of one worker: nothing to send
      // A first hop needs nothing; a later one waits for the last hop's sum: its carrier sends
      // when that is in, the rest of its rack when the carrier pulls them.
      if (hop(f) == 0) ready_plain.insert(order(f));
    }
    if (ring == 1 && !abstracted(member)) {  // its own values are the sum
      for (const std::uint32_t f : set) {
        std::vector<std::int32_t> values(v, 0);
        const std::span<const float> mine = values_of(f);
        quantize(mine, std::ldexp(1.0, exponent[f]), values);
        record_final(f, std::move(values), exponent[f], magnitude_of(mine), now, out);
        if (state != WorkerState::kRunning || pass != p) return;
      }
      return;
    }
    replay_early(now, out);
    pump(now, out);
  }

  // Every final of the pass is in: redo the fragments whose exponent did not fit (every worker
  // sees the same finals, so all agree on which), or finish the round.
  void end_pass(Time now, PacketSink& out) {
    // The finals this worker still owes the next member go now, whatever the window: its last one
    // came with the pass's end, and a worker that is done sends nothing more unasked (measured:
    // the next member waited two RTOs and asked, a 2 ms stall at the end of a 0.75 ms round).
    while (!ready_gather.empty()) {
      send_gather(ready_gather.front(), now, out);
      ready_gather.pop_front();
    }
    // Every final of the pass is in, so each contribution this worker sent to it before the last
    // hop was summed: one whose ack was lost needs no resend (its RTO would come in the next round,
    // halve the window and hold a place in it until then). A last hop's carries the final to the
    // member that started the fragment, which may still wait for it.
    for (auto it = sr_out.begin(); it != sr_out.end();) {
      const std::int64_t f = static_cast<std::int32_t>(it->first - pass_base);
      const bool summed = f >= 0 && f < fragments && hop(static_cast<std::uint32_t>(f)) + 1 < ring;
      it = summed ? forget(Flow::kReduceScatter, it) : std::next(it);
    }
    std::vector<std::uint32_t> redo;
    for (std::uint32_t f = 0; f < fragments; ++f) {
      if (!in_pass[f]) continue;
      const Final& fin = finals.at(seq_of(f));
      const std::int16_t better = next_exponent(fin.magnitude, n, fin.exponent);
      if (any_saturated(fin.values)) {
        if (better >= fin.exponent) {
          return fail("job " + std::to_string(config.job) + ": fragment " + std::to_string(f) +
                      " holds an Inf or NaN, which Rina does not carry (ATP's float32 path does); "
                      "use algorithm atp for such tensors");
        }
      } else if (resolved(fin.magnitude, fin.exponent, n)) {
        continue;
      }
      redo.push_back(f);
      exponent[f] = better;
    }
    if (!redo.empty()) {
      if (pass + 1 >= kPasses) {
        return fail("job " + std::to_string(config.job) + ": fragment " + std::to_string(redo.front()) +
                    " still does not fit its exponent after a redo");
      }
      stats.redone_fragments += redo.size();
      return start_pass(pass + 1, redo, now, out);
    }
    // Done: the results, and each position's exponent for the next round.
    for (std::uint32_t f = 0; f < fragments; ++f) {
      const Final& fin = finals.at(latest_seq(f));
      const double scale = std::ldexp(1.0, fin.exponent);
      const std::size_t first = std::size_t{f} * v;
      const std::size_t count = std::min<std::size_t>(v, tensor.size() - first);
      for (std::size_t i = 0; i < count; ++i) tensor[first + i] = dequantize_one(fin.values[i], scale);
      result_exponent[f] = fin.exponent;
      exponent_by_position[f] = next_exponent(fin.magnitude, n, fin.exponent);
    }
    // Finals and acks of this round stay to answer late asks and resends; the round before goes.
    const Seq next_base = round_base + kPasses * fragments;
    std::erase_if(finals, [&](const auto& e) { return seq_before(e.first, previous_round_base); });
    std::erase_if(acks_sent, [&](const auto& e) { return seq_before(e.first, previous_round_base); });
    previous_round_base = round_base;
    round_base = next_base;
    pass_base = next_base;
    merges.clear();
    ++stats.rounds_completed;
    state = WorkerState::kIdle;
  }
  // The seq of f's final in the last pass that had it.
  Seq latest_seq(std::uint32_t f) const {
    for (std::uint32_t p = pass + 1; p-- > 0;) {
      const Seq s = round_base + p * fragments + f;
      if (finals.contains(s)) return s;
    }
    return round_base + f;
  }

  void record_final(std::uint32_t f, std::vector<std::int32_t> values, std::int16_t e, std::int16_t magnitude, Time now,
                    PacketSink& out) {
    const Seq s = seq_of(f);
    if (finals.contains(s)) {
      ++stats.duplicates;
      return;
    }
    stats.final_values += values.size();
    finals.emplace(s, Final{std::move(values), e, magnitude, fragments, shape(f)});
    progress(now);
    if (unanswered.erase(f) == 0) {
      others_came = true;
    } else if (unanswered.empty()) {
      ask_now = !others_came;
    }
    if (forwards(f)) ready_gather.push_back(f);
    if (--missing == 0) return end_pass(now, out);
    pump(now, out);
  }

  // ---- packets in ----
  void on_packet(std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
    Header h;
    if (decode_header(bytes, h) == DecodeError::kOk) return on_packet(h, bytes, now, out);
    clock = now;
    ++stats.dropped;
  }

  void on_packet(const Header& h, std::span<const std::uint8_t> bytes, Time now, PacketSink& out) {
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

  void replay_early(Time now, PacketSink& out) {
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

  void on_fragment(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now, PacketSink& out) {
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
  void on_stale(const Header& h, Time, PacketSink& out) {
    // A hop sum this worker took in: to it, or (an autonomous member's final, complete) to its rack.
    if ((h.rina == RinaKind::kContribution || h.rina == RinaKind::kFinal) && (h.dst == self || is_multicast(h.dst))) {
      // The same hop's sum again, from the member before: a fragment keeps its seq at every hop,
      // and another hop's sum passing by (a final's copy to the rack) is no resend of it.
      const auto acked = acks_sent.find(h.seq);
      const auto& from = config.members[prev_member()];
      const bool from_prev =
          std::any_of(from.begin(), from.end(), [&](std::uint32_t r) { return config.workers[r] == h.src; });
      if (acked != acks_sent.end() && acked->second.kind == h.rina && from_prev) {
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

  void answer(const Header& h, PacketSink& out) {
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
  bool same_round(const Header& h, std::uint32_t f, PacketSink& out) {
    if (h.round_fragments == fragments && h.round_shape == shape(f)) return true;
    for (const Address w : config.workers) {
      if (w != self) send_control(RinaKind::kAck, h.seq, w, 0, false, kRoundShapeMismatch, out);
    }
    fail(size_mismatch());
    return false;
  }
  std::string size_mismatch() const {
    return "job " + std::to_string(config.job) +
           ": the workers all-reduce tensors of different sizes (this worker: " + std::to_string(tensor.size()) +
           " values in this call); every worker must pass the same number of values";
  }

  void take_final(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now, PacketSink& out) {
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
  void on_hop_sum(const Header& h, std::span<const std::uint8_t> bytes, std::uint32_t f, Time now, PacketSink& out) {
    const std::uint32_t k = hop(f);
    const std::uint32_t prev = prev_member();
    const std::uint32_t size = member_size(prev);
    const auto& from = config.members[prev];
    const bool from_prev =
        std::any_of(from.begin(), from.end(), [&](std::uint32_t r) { return config.workers[r] == h.src; });
    const RinaKind expected = k == 0 ? RinaKind::kFinal : RinaKind::kContribution;
    if (!carries(f) || h.rina != expected || !from_prev || h.fan_in != size || h.bitmap == 0 ||
        (size < 32 && (h.bitmap >> size) != 0) || h.value_count != v || h.scale_exponent != exponent[f]) {
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
    if (m.sums.empty()) m.sums.assign(v, 0);
    const std::uint32_t overlap = m.bitmap & h.bitmap;
    if (overlap == h.bitmap) {
      ++stats.duplicates;  // every worker of it is in already
      return;
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
        return;
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
    progress(now);
    if (static_cast<std::uint32_t>(std::popcount(m.bitmap)) < size) return;

    // In: custody passes to this worker; the contributors may stop resending.
    m.complete = true;
    const Address ack_to = ack_destination(prev);
    send_control(RinaKind::kAck, h.seq, ack_to, m.aggregator_index, m.ecn, 0, out, m.resent);
    acks_sent[h.seq] = AckSent{ack_to, m.aggregator_index, h.rina};
    if (ring == 1) acknowledged(Flow::kReduceScatter, h.seq, false, true, now, out);  // its own contribution too
    if (state != WorkerState::kRunning) return;
    if (k == 0) {  // the last hop's: the final
      std::vector<std::int32_t> values(v);
      for (std::uint32_t i = 0; i < v; ++i) {
        values[i] = static_cast<std::int32_t>(std::clamp<std::int64_t>(m.sums[i], kSaturatedMin, kSaturatedMax));
      }
      const bool out_of_range = std::any_of(m.sums.begin(), m.sums.end(),
                                            [](std::int64_t s) { return s > kSaturatedMax || s < kSaturatedMin; });
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
      return record_final(f, std::move(values), h.scale_exponent, m.magnitude, now, out);
    }
    ready_carrier.insert(order(f));
    pump(now, out);
  }

  // The rack's other workers may send their values of f's hop now (Rina's pull, §IV-B3: here the
  // fragment's carrier, as it sends the last hop's sum with its own values, asks, and its ToR
  // hands the pull to the rack). Until then their contributions would only wait in the switch.
  void pull(std::uint32_t f, PacketSink& out) {
    send_control(RinaKind::kPull, seq_of(f), ack_destination(member), aggregator_of(f), false, 0, out);
  }

  void on_ack(Flow flow, const Header& h, Time now, PacketSink& out) {
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
  void acknowledged(Flow flow, Seq seq, bool ecn, bool from_resend, Time now, PacketSink& out) {
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
  std::map<Seq, Outstanding>::iterator forget(Flow flow, std::map<Seq, Outstanding>::iterator it) {
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
  Time tail_due(std::uint32_t c) const {
    if (tails[c].sent == kNever || !rtt.has_sample()) return kNever;
    const Duration round_trip = std::max(clocks[c].has_ack() ? clocks[c].rtt() : Duration::zero(), rtt.srtt());
    return deadline_after(tails[c].sent, std::max(2 * round_trip, kMinTailProbe));
  }
  void probe_tail(std::uint32_t c, Time now, PacketSink& out) {
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
  void detect_loss(std::uint32_t c, Time now, PacketSink& out) {
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
      (flow == Flow::kReduceScatter ? sr : ag)
          .on_congestion(o.cc_seq, flow == Flow::kReduceScatter ? sr_next : ag_next);
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
  void resend(Flow flow, Outstanding& o, Time now, PacketSink& out) {
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

  void on_host_queue_full(Time now) {
    if (state != WorkerState::kRunning) return;
    clock = now;
    for (auto [window, outstanding, next] : {std::tuple{&sr, &sr_out, sr_next}, std::tuple{&ag, &ag_out, ag_next}}) {
      if (outstanding->empty()) continue;  // nothing in flight: not this flow's queue
      ++stats.host_queue_full;
      window->on_congestion(outstanding->begin()->second.cc_seq, next);
    }
  }

  // ---- time ----
  // RFC 6298's, and at least a quarter above the longest round trip of this round and the last:
  // a round's first windows, all sent at once behind the last round's tail (whose few packets
  // measured short queues), take longer than the mean. A resend that came too early costs more
  // than a late one here: the sum that waits goes on without the workers still queued, who then
  // cross the ring alone (at 200 Mbit/s the spine carried 1.8 times the round's bytes).
  Duration rto() const { return std::min(unbacked_rto() * backoff, max_rto()); }
  Duration unbacked_rto() const {
    const Duration recent = std::max(max_rtt_now, max_rtt_before);
    return std::max(rtt.rto(), recent + recent / 4);
  }
  void progress(Time now) {
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

  void on_timeout(Time now, PacketSink& out) {
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
  Address rack_mate(std::uint32_t f) const {
    const auto& ranks = config.members[member];
    const std::uint32_t r = carrier_rank(f, member);
    return config.workers[r != config.rank ? r : ranks[(f + 1) % ranks.size()]];
  }

  // Where the first fragment whose final is missing stands here, for the progress timeout's
  // sentence: what a reader needs to tell a lost packet from a protocol that waits for nothing.
  std::string first_missing() const {
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
  Time request_due() const {
    return ask_now ? last_progress : deadline_after(std::max(last_progress, last_request), request_interval);
  }

  Time next_deadline() const {
    Time t = timers.empty() ? kNever : timers.begin()->first;
    for (const Time due : loss_due) t = std::min(t, due);
    for (std::uint32_t c = 0; c < clocks.size(); ++c) t = std::min(t, tail_due(c));
    if (state == WorkerState::kRunning) {
      t = std::min(t, deadline_after(last_progress, config.progress_timeout));
      if (missing > 0) t = std::min(t, request_due());
    }
    return t;
  }

  void fail(std::string why) {
    state = WorkerState::kFailed;
    error = std::move(why);
  }

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

RinaWorker::RinaWorker(RinaConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
RinaWorker::~RinaWorker() = default;
RinaWorker::RinaWorker(RinaWorker&&) noexcept = default;
RinaWorker& RinaWorker::operator=(RinaWorker&&) noexcept = default;

bool RinaWorker::start(std::span<const float> input, Time now, PacketSink& out) {
  if (impl_->state != WorkerState::kIdle) return false;
  impl_->owned.assign(input.begin(), input.end());
  return impl_->start(impl_->owned, now, out);
}
bool RinaWorker::start_in_place(std::span<float> values, Time now, PacketSink& out) {
  return impl_->start(values, now, out);
}
void RinaWorker::on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(packet, now, out);
}
void RinaWorker::on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(header, packet, now, out);
}
void RinaWorker::on_timeout(Time now, PacketSink& out) { impl_->on_timeout(now, out); }
Time RinaWorker::next_deadline() const { return impl_->next_deadline(); }
WorkerState RinaWorker::state() const { return impl_->state; }
const std::string& RinaWorker::error() const { return impl_->error; }
std::span<const float> RinaWorker::result() const { return impl_->tensor; }
const std::vector<std::int16_t>& RinaWorker::result_exponents() const { return impl_->result_exponent; }
std::vector<std::int16_t> RinaWorker::next_exponents(std::uint32_t fragments) const {
  std::vector<std::int16_t> e(fragments, initial_exponent(impl_->config.scale));
  std::copy_n(impl_->exponent_by_position.begin(), std::min<std::size_t>(fragments, impl_->exponent_by_position.size()),
              e.begin());
  return e;
}
Seq RinaWorker::resume_seq() const { return impl_->round_base + 2 * kPasses * impl_->fragments; }
void RinaWorker::on_host_queue_full(Time now) { impl_->on_host_queue_full(now); }
const RinaStats& RinaWorker::stats() const { return impl_->stats; }
const RinaConfig& RinaWorker::config() const { return impl_->config; }
std::uint32_t RinaWorker::window() const { return impl_->sr.window(); }

}  // namespace atp
