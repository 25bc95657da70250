// RinaWorker's packets out (worker_impl.h): the contributions and gathers it builds, what it
// keeps of each until its ack, and the order and windows they leave in.
#include <algorithm>
#include <cmath>

#include "worker_impl.h"

namespace atp {

void RinaWorker::Impl::emit(std::span<const std::uint8_t> packet, PacketSink& out) {
  out.send(packet);
  ++stats.packets_sent;
}

// `resend` on an ack: a piece of the hop sum it acknowledges was a resend (else every worker's
// first copy made it, whatever it resent since: its round trip is a sample).
void RinaWorker::Impl::send_control(RinaKind kind, Seq seq, Address dst, std::uint32_t aggregator_index, bool ecn,
                                    std::uint16_t round_shape, PacketSink& out, bool resend) {
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

Header RinaWorker::Impl::fragment_header(RinaKind kind, std::uint32_t f, Address dst, std::int16_t e,
                                         std::int16_t magnitude) {
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

void RinaWorker::Impl::track(Flow flow, Seq seq, std::vector<std::uint8_t> packet, Pool pool, Time now) {
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

void RinaWorker::Impl::send_contribution(std::uint32_t f, Pool pool, Time now, PacketSink& out) {
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

void RinaWorker::Impl::send_gather(std::uint32_t f, Time now, PacketSink& out) {
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
void RinaWorker::Impl::pump(Time now, PacketSink& out) {
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
std::pair<std::uint64_t, std::uint32_t> RinaWorker::Impl::order(std::uint32_t f) const {
  return {(std::uint64_t{f - chunk_begin(chunk(f))} << 32) | hop(f), f};
}

std::uint32_t RinaWorker::Impl::chunk_begin(std::uint32_t c) const {
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
std::uint32_t RinaWorker::Impl::aggregator_of(std::uint32_t f) const {
  const std::uint32_t slots = config.aggregator_slots;
  if (slots < 2 * ring) return seq_of(f) % slots;
  const std::uint32_t run = slots / ring;
  const std::uint32_t c = chunk(f);
  return c * run + static_cast<std::uint32_t>((f - chunk_begin(c) + std::uint64_t{pass_base}) % run);
}

// The rack's other workers may send their values of f's hop now (Rina's pull, §IV-B3: here the
// fragment's carrier, as it sends the last hop's sum with its own values, asks, and its ToR
// hands the pull to the rack). Until then their contributions would only wait in the switch.
void RinaWorker::Impl::pull(std::uint32_t f, PacketSink& out) {
  send_control(RinaKind::kPull, seq_of(f), ack_destination(member), aggregator_of(f), false, 0, out);
}

}  // namespace atp
