// Tests of EgressQueue, the one egress model of every runtime: serialization timing, drop-tail,
// ECN marking, seeded faults and their exact RNG scheme, release order, reuse from callbacks.
#include "atp/io/egress_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "atp/io/ethernet.h"
#include "atp/wire.h"

namespace atp {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

// A 62-value ATP gradient packet (288 B; 330 B with encapsulation) tagged with `seq`.
std::vector<std::uint8_t> packet(Seq seq) {
  Header h;
  h.job = 1;
  h.seq = seq;
  const std::vector<std::int32_t> v(kDefaultValuesPerPacket, 0);
  return build_packet(h, v);
}
Header header_of(std::span<const std::uint8_t> p) {
  Header h;
  EXPECT_EQ(decode_header(p, h), DecodeError::kOk);
  return h;
}

struct Released {
  std::int64_t ns;
  Seq seq;
  bool ecn;
};
// Releases everything held, at each packet's own release time.
std::vector<Released> drain(EgressQueue& q) {
  std::vector<Released> out;
  while (q.next_release() != kNever) {
    const Time t = q.next_release();
    q.release(t, [&](std::span<std::uint8_t> p) {
      const Header h = header_of(p);
      out.push_back({to_ns(t), h.seq, h.ecn});
    });
  }
  return out;
}

TEST(EgressQueue, NoRateReleasesAfterTheDelayInFifoOrder) {
  EgressConfig c;
  c.delay = microseconds(3);
  EgressQueue q(c);
  EXPECT_EQ(q.next_release(), kNever);
  const auto p1 = packet(1), p2 = packet(2);
  const EnqueueResult r = q.enqueue(p1, time_from_ns(1000));
  EXPECT_EQ(r.status, EnqueueStatus::kQueued);
  EXPECT_TRUE(r.accepted());
  EXPECT_EQ(to_ns(r.release), 4000);
  EXPECT_EQ(r.duplicate_release, kNever);
  q.enqueue(p2, time_from_ns(1000));
  EXPECT_EQ(q.held(), 2u);
  EXPECT_EQ(to_ns(q.next_release()), 4000);
  // Nothing is due before its time.
  EXPECT_EQ(q.release(time_from_ns(3999), [](std::span<std::uint8_t>) { FAIL(); }), 0u);
  std::vector<Seq> seqs;
  EXPECT_EQ(q.release(time_from_ns(4000), [&](std::span<std::uint8_t> p) { seqs.push_back(header_of(p).seq); }), 2u);
  EXPECT_EQ(seqs, (std::vector<Seq>{1, 2}));
  EXPECT_EQ(q.counters().packets, 2u);
  EXPECT_EQ(q.counters().bytes, 2 * packet_size(kDefaultValuesPerPacket));
  EXPECT_EQ(q.counters().depth, 0u);  // no rate: no queue
}

TEST(EgressQueue, RateSerializesIncludingEncapsulation) {
  EgressConfig c;
  c.rate_gbps = 100;  // 330 B * 8 / 100 Gbit/s = 26.4 ns per packet
  EgressQueue q(c);
  const auto p = packet(1);
  std::vector<std::int64_t> release;
  for (int i = 0; i < 3; ++i) release.push_back(to_ns(q.enqueue(p, time_from_ns(0)).release));
  // 26.4, 52.8, 79.2 ns: rounded up to the ns, without accumulating the rounding.
  EXPECT_EQ(release, (std::vector<std::int64_t>{27, 53, 80}));
  EXPECT_EQ(q.counters().depth, 3u);
  // An idle transmitter starts at `now`, not at its last finish time.
  EXPECT_EQ(to_ns(q.enqueue(p, time_from_ns(1000)).release), 1027);
  EXPECT_EQ(q.counters().depth, 1u);  // the first three were sent by then
}

TEST(EgressQueue, EthernetFramingCountsTheFrameAsItsWireSize) {
  EgressConfig c;
  c.rate_gbps = 100;
  EgressQueue q(c, 0, Framing::kEthernet);
  EXPECT_EQ(q.framing(), Framing::kEthernet);
  std::vector<std::uint8_t> frame;
  build_atp_frame(kBroadcastMac, kBroadcastMac, packet(1), frame);  // 330 B: the same wire size as above
  ASSERT_EQ(frame.size(), 330u);
  std::vector<std::int64_t> release;
  for (int i = 0; i < 3; ++i) release.push_back(to_ns(q.enqueue(frame, time_from_ns(0)).release));
  EXPECT_EQ(release, (std::vector<std::int64_t>{27, 53, 80}));  // no encapsulation added twice
}

TEST(EgressQueue, DropTailCountsAgainstPacketsNotYetSent) {
  EgressConfig c;
  c.rate_gbps = 100;
  c.buffer_packets = 2;
  EgressQueue q(c);
  const auto p = packet(1);
  EXPECT_EQ(q.enqueue(p, time_from_ns(0)).status, EnqueueStatus::kQueued);
  EXPECT_EQ(q.enqueue(p, time_from_ns(0)).status, EnqueueStatus::kQueued);
  const EnqueueResult full = q.enqueue(p, time_from_ns(0));
  EXPECT_EQ(full.status, EnqueueStatus::kQueueFull);
  EXPECT_FALSE(full.accepted());
  EXPECT_EQ(full.release, kNever);
  EXPECT_EQ(q.counters().queue_drops, 1u);
  EXPECT_EQ(q.counters().packets, 2u);
  EXPECT_EQ(q.enqueue(p, time_from_ns(27)).status, EnqueueStatus::kQueued);  // the first one is out
  EXPECT_EQ(q.held(), 3u);
}

// A queue with nothing to do (no rate, delay or fault) passes packets through while it holds
// none; what it passes counts as sent.
TEST(EgressQueue, PassesThroughOnlyWithNothingToDoAndNothingHeld) {
  EgressQueue q;
  EXPECT_TRUE(q.passes_through());
  q.passed(100);
  EXPECT_EQ(q.counters().packets, 1u);
  EXPECT_EQ(q.counters().bytes, 100u);
  for (auto set : std::vector<void (*)(EgressConfig&)>{
           [](EgressConfig& c) { c.rate_gbps = 1; }, [](EgressConfig& c) { c.delay = microseconds(1); },
           [](EgressConfig& c) { c.loss = 0.1; }, [](EgressConfig& c) { c.duplicate = 0.1; },
           [](EgressConfig& c) { c.reorder = 0.1; }}) {
    EgressConfig c;
    set(c);
    EXPECT_FALSE(EgressQueue(c).passes_through());
  }
  q.enqueue(packet(1), time_from_ns(0));  // held until released, even at once
  EXPECT_FALSE(q.passes_through());
  EXPECT_EQ(drain(q).size(), 1u);
  EXPECT_TRUE(q.passes_through());
}

// Two queues of one link (two dataplane threads' queues of a port): one rate, one buffer, one
// ECN threshold over both, each queue with its own packets and counters.
TEST(EgressQueue, QueuesSharingATransmitterShareTheRateBufferAndThreshold) {
  EgressConfig c;
  c.rate_gbps = 100;  // 26.4 ns per packet
  c.buffer_packets = 3;
  c.ecn_threshold_packets = 2;
  auto link = std::make_shared<SharedTransmitter>();
  EgressQueue a(c), b(c);
  a.share_transmitter(link);
  b.share_transmitter(link);
  const auto p = packet(1);
  EXPECT_EQ(to_ns(a.enqueue(p, time_from_ns(0)).release), 27);
  EXPECT_EQ(to_ns(b.enqueue(p, time_from_ns(0)).release), 53);  // after a's packet, not beside it
  EXPECT_EQ(to_ns(a.enqueue(p, time_from_ns(0)).release), 80);
  EXPECT_EQ(b.enqueue(p, time_from_ns(0)).status, EnqueueStatus::kQueueFull);  // 3 held by the two
  EXPECT_EQ(a.counters().packets, 2u);
  EXPECT_EQ(b.counters().packets, 1u);
  EXPECT_EQ(b.counters().queue_drops, 1u);
  EXPECT_EQ(a.counters().ecn_marked, 1u);  // the third packet found two queued
  EXPECT_EQ(drain(b).size(), 1u);          // each releases only its own
  EXPECT_EQ(drain(a).size(), 2u);
  // A queue with its own transmitter is not held up by the link's.
  EgressQueue own(c);
  EXPECT_EQ(to_ns(own.enqueue(p, time_from_ns(0)).release), 27);
}

// Four threads feeding one link at once: every packet is serialised once, none at the same time
// as another (ThreadSanitizer checks the sharing in CI).
TEST(EgressQueue, ThreadsSharingATransmitterSerialiseEveryPacketOnce) {
  EgressConfig c;
  c.rate_gbps = 100;
  auto link = std::make_shared<SharedTransmitter>();
  constexpr int kThreads = 4;
  constexpr int kPackets = 2000;
  std::vector<std::vector<std::int64_t>> finish(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      EgressQueue q(c);
      q.share_transmitter(link);
      const auto p = packet(static_cast<Seq>(t));
      for (int i = 0; i < kPackets; ++i) finish[t].push_back(to_ns(q.enqueue(p, time_from_ns(0)).release));
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<std::int64_t> all;
  for (const auto& f : finish) all.insert(all.end(), f.begin(), f.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), std::size_t{kThreads * kPackets});
  // Packet n (of all) leaves at ceil(26.4 ns * (n + 1)): one transmitter, no two at once.
  for (std::size_t n = 0; n < all.size(); ++n) {
    const std::int64_t ps = 26400 * static_cast<std::int64_t>(n + 1);
    ASSERT_EQ(all[n], (ps + 999) / 1000) << "packet " << n;
  }
}

TEST(EgressQueue, MarksEcnWhenTheQueueHoldsTheThreshold) {
  EgressConfig c;
  c.rate_gbps = 100;
  c.ecn_threshold_packets = 2;
  EgressQueue q(c);
  const auto p = packet(7);
  for (Seq s = 1; s <= 4; ++s) q.enqueue(packet(s), time_from_ns(0));
  EXPECT_FALSE(header_of(p).ecn);  // the caller's bytes are never marked
  const auto out = drain(q);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FALSE(out[0].ecn);  // depth 0 at enqueue
  EXPECT_FALSE(out[1].ecn);  // depth 1
  EXPECT_TRUE(out[2].ecn);   // depth 2
  EXPECT_TRUE(out[3].ecn);
  EXPECT_EQ(q.counters().ecn_marked, 2u);

  // Without a rate there is no queue, so no marks even with a threshold of 1.
  EgressConfig no_rate;
  no_rate.ecn_threshold_packets = 1;
  EgressQueue fast(no_rate);
  for (Seq s = 1; s <= 3; ++s) fast.enqueue(packet(s), time_from_ns(0));
  for (const Released& r : drain(fast)) EXPECT_FALSE(r.ecn);
  EXPECT_EQ(fast.counters().ecn_marked, 0u);
}

// A queue also marks once it holds a third of its buffer in bytes, however few packets that is: a
// threshold in packets must not lie past a buffer of large packets (drops would come first).
TEST(EgressQueue, MarksFromAThirdOfTheBufferInBytes) {
  EgressConfig c;
  c.rate_gbps = 100;
  c.ecn_threshold_packets = 100;
  c.buffer_bytes = 6 * 330;  // six 62-value packets with encapsulation
  EgressQueue q(c);
  for (Seq s = 1; s <= 4; ++s) ASSERT_TRUE(q.enqueue(packet(s), time_from_ns(0)).accepted());
  const auto out = drain(q);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FALSE(out[0].ecn);  // 0 bytes queued
  EXPECT_FALSE(out[1].ecn);  // 330: below a third
  EXPECT_TRUE(out[2].ecn);   // 660: a third
  EXPECT_TRUE(out[3].ecn);
}

// A switch port's default threshold is DCTCP's K sized for the port's rate: 20 packets at
// 1 Gbit/s and below (and with no rate), 20 x sqrt(Gbit/s) above (DCTCP's 65 at 10 Gbit/s).
TEST(EgressQueue, ASwitchPortsThresholdGrowsWithTheSquareRootOfItsRate) {
  EXPECT_EQ(switch_port_ecn_threshold(0), 20u);
  EXPECT_EQ(switch_port_ecn_threshold(0.2), 20u);
  EXPECT_EQ(switch_port_ecn_threshold(1), 20u);
  EXPECT_EQ(switch_port_ecn_threshold(10), 63u);
  EXPECT_EQ(switch_port_ecn_threshold(100), 200u);
  EXPECT_EQ(switch_port_egress(100).ecn_threshold_packets, 200u);
  EXPECT_EQ(switch_port_egress(100).buffer_bytes, kSwitchPortBufferBytes);
}

// Past the threshold the queue drops the first packet that cannot carry a mark and then every
// other one (UnmarkableDrops), so that a loss-based sender gets its signal without losing whole
// windows; the count starts afresh once the queue is below the threshold.
TEST(EgressQueue, DropsEveryOtherUnmarkablePacketPastTheThreshold) {
  EgressConfig c;
  c.rate_gbps = 100;
  c.ecn_threshold_packets = 1;
  EgressQueue q(c);
  const std::vector<std::uint8_t> unmarkable(300, 0xff);  // no ATP packet (kAtp framing): no mark possible
  Header h;
  ASSERT_NE(decode_header(unmarkable, h), DecodeError::kOk);
  const auto burst = [&](Time at) {
    std::vector<EnqueueStatus> fates;
    q.enqueue(packet(1), at);  // the queue was empty: below the threshold, so the count starts afresh
    for (int i = 0; i < 5; ++i) fates.push_back(q.enqueue(unmarkable, at).status);
    return fates;
  };
  const std::vector<EnqueueStatus> every_other = {EnqueueStatus::kQueueFull, EnqueueStatus::kQueued,
                                                  EnqueueStatus::kQueueFull, EnqueueStatus::kQueued,
                                                  EnqueueStatus::kQueueFull};
  EXPECT_EQ(burst(time_from_ns(0)), every_other);
  EXPECT_EQ(q.counters().queue_drops, 3u);
  EXPECT_EQ(q.counters().ecn_marked, 0u);  // what passes goes unmarked
  std::size_t released = 0;
  while (q.next_release() != kNever) released += q.release(q.next_release(), [](std::span<std::uint8_t>) {});
  ASSERT_EQ(released, 3u);
  EXPECT_EQ(burst(time_from_ns(1000000)), every_other);  // drained: the first is dropped again
  EXPECT_EQ(q.counters().queue_drops, 6u);
}

// With Ethernet framing the queue marks the ATP header inside an ATP frame, and CE in the IPv4
// header of an ECN-capable (ECT) frame, fixing its checksum; past the threshold, not-ECT IPv4 is
// dropped (RFC 3168 §7), below it it passes; ARP and small not-ECT IPv4 (ACKs, SYNs) always pass.
TEST(EgressQueue, MarksEthernetFramesByWhatTheyCarry) {
  EgressConfig c;
  c.rate_gbps = 100;
  c.ecn_threshold_packets = 1;
  EgressQueue q(c, 0, Framing::kEthernet);
  std::vector<std::uint8_t> atp;
  build_atp_frame(kBroadcastMac, kBroadcastMac, packet(1), atp);
  // IPv4/TCP frames: the same frame with protocol TCP and a TOS (ECN field), checksum refreshed.
  const auto tcp_with_tos = [&](std::uint8_t tos, const std::vector<std::uint8_t>& base) {
    std::vector<std::uint8_t> f = base;
    f[kEthernetHeaderBytes + 1] = tos;
    f[kEthernetHeaderBytes + 9] = 6;
    f[kEthernetHeaderBytes + 10] = f[kEthernetHeaderBytes + 11] = 0;
    const std::uint16_t sum = internet_checksum(std::span(f).subspan(kEthernetHeaderBytes, kIpv4HeaderBytes));
    f[kEthernetHeaderBytes + 10] = static_cast<std::uint8_t>(sum >> 8);
    f[kEthernetHeaderBytes + 11] = static_cast<std::uint8_t>(sum);
    return f;
  };
  const std::vector<std::uint8_t> ect = tcp_with_tos(0x02, atp);
  const std::vector<std::uint8_t> not_ect = tcp_with_tos(0, atp);
  const std::vector<std::uint8_t> ce = tcp_with_tos(0x03, atp);  // marked upstream: kept, not counted again
  // A not-ECT segment below kEcnDropMinBytes, as TCP's pure ACKs and SYNs are: it passes.
  Header tiny;
  tiny.job = 1;
  std::vector<std::uint8_t> small;
  build_atp_frame(kBroadcastMac, kBroadcastMac, build_packet(tiny, std::vector<std::int32_t>(1, 0)), small);
  const std::vector<std::uint8_t> ack = tcp_with_tos(0, small);
  ASSERT_LT(ack.size(), kEcnDropMinBytes);

  EXPECT_EQ(q.enqueue(not_ect, time_from_ns(0)).status, EnqueueStatus::kQueued);  // depth 0: passes
  q.enqueue(atp, time_from_ns(0));
  q.enqueue(ect, time_from_ns(0));
  EXPECT_EQ(q.enqueue(not_ect, time_from_ns(0)).status, EnqueueStatus::kQueueFull);
  q.enqueue(ce, time_from_ns(0));
  std::vector<std::uint8_t> arp(kEthernetHeaderBytes + 28, 0);  // not IP: neither marked nor dropped
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(q.enqueue(arp, time_from_ns(0)).status, EnqueueStatus::kQueued);
  EXPECT_EQ(q.enqueue(ack, time_from_ns(0)).status, EnqueueStatus::kQueued);
  EXPECT_EQ(q.counters().ecn_marked, 2u);
  EXPECT_EQ(q.counters().queue_drops, 1u);
  std::vector<std::vector<std::uint8_t>> out;
  while (q.next_release() != kNever) {
    q.release(q.next_release(), [&](std::span<std::uint8_t> f) { out.emplace_back(f.begin(), f.end()); });
  }
  ASSERT_EQ(out.size(), 6u);
  const auto atp_ecn = [](const std::vector<std::uint8_t>& f) {
    return header_of(std::span(f).subspan(kEncapsulationBytes)).ecn;
  };
  EXPECT_EQ(out[0], not_ect);
  EXPECT_TRUE(atp_ecn(out[1]));
  EXPECT_EQ(out[2][kEthernetHeaderBytes + 1], 0x03);  // CE
  EXPECT_EQ(internet_checksum(std::span(out[2]).subspan(kEthernetHeaderBytes, kIpv4HeaderBytes)), 0);
  EXPECT_EQ(out[3], ce);
  EXPECT_EQ(out[4], arp);
  EXPECT_EQ(out[5], ack);

  // The default (ATP) framing does not know frames: none is an ATP packet it could mark, so past
  // the threshold it drops them.
  EgressQueue atp_framed(c);
  atp_framed.enqueue(atp, time_from_ns(0));
  atp_framed.enqueue(atp, time_from_ns(0));
  EXPECT_EQ(atp_framed.counters().ecn_marked, 0u);
  EXPECT_EQ(atp_framed.counters().queue_drops, 1u);
}

TEST(EgressQueue, CertainFaults) {
  const auto p = packet(1);
  EgressConfig lossy;
  lossy.loss = 1;
  EgressQueue l(lossy);
  const EnqueueResult lost = l.enqueue(p, time_from_ns(0));
  EXPECT_EQ(lost.status, EnqueueStatus::kLost);
  EXPECT_TRUE(lost.accepted());  // it used the link
  EXPECT_EQ(l.held(), 0u);
  EXPECT_EQ(l.counters().lost, 1u);
  EXPECT_EQ(l.counters().packets, 1u);

  EgressConfig dup;
  dup.delay = microseconds(1);
  dup.duplicate = 1;
  EgressQueue d(dup);
  const EnqueueResult twice = d.enqueue(p, time_from_ns(0));
  EXPECT_EQ(to_ns(twice.release), 1000);
  EXPECT_EQ(to_ns(twice.duplicate_release), 1100);
  const auto out = drain(d);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ns, 1000);
  EXPECT_EQ(out[1].ns, 1100);
  EXPECT_EQ(out[1].seq, 1u);
  EXPECT_EQ(d.counters().duplicated, 1u);
  EXPECT_EQ(d.counters().packets, 1u);  // a duplicate is not a second send

  EgressConfig reorder;  // zero delay: held back at least 1 us
  reorder.reorder = 1;
  EgressQueue r(reorder);
  const EnqueueResult held = r.enqueue(p, time_from_ns(0));
  EXPECT_GE(to_ns(held.release), 1000);
  EXPECT_EQ(r.counters().reordered, 1u);
}

TEST(EgressQueue, ReorderedPacketsAreOvertaken) {
  EgressConfig c;
  c.delay = microseconds(10);
  EgressQueue q(c);
  q.enqueue(packet(1), time_from_ns(0));
  q.config().reorder = 1;  // config changes apply to later packets only
  q.enqueue(packet(2), time_from_ns(0));
  q.config().reorder = 0;
  q.enqueue(packet(3), time_from_ns(0));
  const auto out = drain(q);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].seq, 1u);
  EXPECT_EQ(out[1].seq, 3u);
  EXPECT_EQ(out[2].seq, 2u);
  EXPECT_GE(out[2].ns, 20000);  // 1-3 extra delays
  EXPECT_LE(out[2].ns, 40000);
}

// The RNG scheme is part of the trace: an mt19937_64 per queue seeded with stream_seed(), and
// one draw (top 53 bits) per enabled fault, in the order loss, duplicate, reorder.
TEST(EgressQueue, FatesFollowTheDocumentedDrawOrder) {
  const std::uint64_t seed = EgressQueue::stream_seed(42, 3);
  EgressConfig c;
  c.loss = 0.3;
  c.duplicate = 0.3;
  EgressQueue q(c, seed);
  std::mt19937_64 rng(seed);
  const auto draw = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  const auto p = packet(1);
  for (int i = 0; i < 1000; ++i) {
    const EnqueueResult r = q.enqueue(p, time_from_ns(i));
    if (draw() < c.loss) {
      ASSERT_EQ(r.status, EnqueueStatus::kLost) << i;
      continue;
    }
    ASSERT_EQ(r.status, EnqueueStatus::kQueued) << i;
    ASSERT_EQ(r.duplicate_release != kNever, draw() < c.duplicate) << i;
  }
  EXPECT_GT(q.counters().lost, 200u);
  EXPECT_LT(q.counters().lost, 400u);
}

std::vector<Released> faulty_trace(std::uint64_t seed) {
  EgressConfig c;
  c.delay = microseconds(3);
  c.rate_gbps = 10;
  c.loss = 0.05;
  c.duplicate = 0.05;
  c.reorder = 0.05;
  EgressQueue q(c, EgressQueue::stream_seed(seed, 0));
  for (Seq s = 0; s < 2000; ++s) q.enqueue(packet(s), time_from_ns(100 * s));
  return drain(q);
}

TEST(EgressQueue, SameSeedSameTraceOtherSeedOtherTrace) {
  const auto same = [](const std::vector<Released>& a, const std::vector<Released>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].ns != b[i].ns || a[i].seq != b[i].seq) return false;
    }
    return true;
  };
  const auto first = faulty_trace(42);
  EXPECT_TRUE(same(first, faulty_trace(42)));
  EXPECT_FALSE(same(first, faulty_trace(43)));
  EXPECT_NE(EgressQueue::stream_seed(42, 0), EgressQueue::stream_seed(42, 1));
}

TEST(EgressQueue, DeliverMayRewriteItsCopyAndEnqueueAgain) {
  EgressConfig c;
  c.delay = microseconds(1);
  c.duplicate = 1;
  EgressQueue q(c);
  q.enqueue(packet(5), time_from_ns(0));
  std::vector<Seq> seen;
  int bounced = 0;
  const auto deliver = [&](std::span<std::uint8_t> p) {
    seen.push_back(header_of(p).seq);
    std::fill(p.begin(), p.end(), 0);  // rewriting the copy must not affect the duplicate
    if (bounced++ == 0) q.enqueue(packet(6), time_from_ns(1000));
  };
  EXPECT_EQ(q.release(time_from_ns(1000), deliver), 1u);
  EXPECT_EQ(q.release(time_from_ns(1100), deliver), 1u);
  EXPECT_EQ(q.release(time_from_ns(5000), deliver, 1), 1u);  // at most one
  EXPECT_EQ(q.release(time_from_ns(5000), deliver), 1u);
  EXPECT_EQ(seen, (std::vector<Seq>{5, 5, 6, 6}));
  EXPECT_EQ(q.held(), 0u);
}

TEST(EgressQueue, PopDueSwapsBuffers) {
  EgressQueue q;
  const auto p = packet(9);
  q.enqueue(p, time_from_ns(0));
  std::vector<std::uint8_t> out;
  ASSERT_TRUE(q.pop_due(time_from_ns(0), out));
  EXPECT_EQ(out, p);
  EXPECT_FALSE(q.pop_due(time_from_ns(0), out));
}

}  // namespace
}  // namespace atp
