// Tests of the in-process network: event order, link delay, serialization, drop-tail, ECN,
// seeded loss / duplication / reordering (statistics and determinism), timers and scripts; and
// ATP jobs run end to end on it (PS shards, NaN and infinities, workers' tensors that differ).
#include "atp/sim/inproc_network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "atp/backends/simulated.h"
#include "atp/fixed_point.h"
#include "atp/plan/plan.h"
#include "atp/ps.h"
#include "atp/scenario/scenario.h"
#include "atp/switch.h"
#include "atp/worker.h"
#include "support/inproc_hosts.h"
#include "support/reference_sum.h"

namespace atp::inproc {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

std::int64_t ns_of(Time t) { return to_ns(t); }

// A 62-value ATP gradient packet (288 B; 330 B with encapsulation) of `job` tagged with `seq`.
std::vector<std::uint8_t> packet(Seq seq, std::uint16_t values = kDefaultValuesPerPacket, JobId job = 1) {
  Header h;
  h.job = job;
  h.seq = seq;
  const std::vector<std::int32_t> v(values, 0);
  return build_packet(h, v);
}
Seq seq_of(std::span<const std::uint8_t> p) {
  Header h;
  EXPECT_EQ(decode_header(p, h), DecodeError::kOk);
  return h.seq;
}
bool ecn_of(std::span<const std::uint8_t> p) {
  Header h;
  EXPECT_EQ(decode_header(p, h), DecodeError::kOk);
  return h.ecn;
}

struct Delivery {
  std::int64_t ns;
  PortId port;
  std::vector<std::uint8_t> bytes;
};

// Records every packet; `react` (optional) runs inside the callback.
class Recorder final : public Node {
 public:
  void on_packet(PortId port, std::span<std::uint8_t> p, Time now, PortSink& out) override {
    if (keep) got.push_back({ns_of(now), port, {p.begin(), p.end()}});
    if (react) react(port, p, now, out);
  }
  void on_timeout(Time, PortSink&) override {}
  Time next_deadline() const override { return kNever; }
  void on_egress_full(Time now) override { egress_full.push_back(ns_of(now)); }

  bool keep = true;  // record deliveries in `got`
  std::vector<Delivery> got;
  std::vector<std::int64_t> egress_full;  // when it was told its egress refused a packet
  std::function<void(PortId, std::span<std::uint8_t>, Time, PortSink&)> react;
};

// A node whose deadline a packet sets: the packet's seq is the deadline in ns (0: none).
// Each timeout records the time and clears the deadline (or re-arms `period` later).
class TimerNode final : public Node {
 public:
  void on_packet(PortId, std::span<std::uint8_t> p, Time, PortSink&) override {
    const Seq s = seq_of(p);
    deadline = s == 0 ? kNever : time_from_ns(s);
  }
  void on_timeout(Time now, PortSink&) override {
    fired.push_back(ns_of(now));
    if (period.count() < 0) return;  // a buggy node: stays due
    deadline = period.count() > 0 && fired.size() < max_fires ? now + period : kNever;
  }
  Time next_deadline() const override { return deadline; }

  Time deadline = kNever;
  Duration period{0};
  std::size_t max_fires = 1;
  std::vector<std::int64_t> fired;
};

ChannelConfig link_of(Duration delay) {
  ChannelConfig c;
  c.delay = delay;
  return c;
}

// Two recorders joined by one link, a on port 0, b on port 3.
struct Pair {
  explicit Pair(std::uint64_t seed, const ChannelConfig& ab, const ChannelConfig& ba = link_of(microseconds(2)))
      : net(seed) {
    auto ua = std::make_unique<Recorder>();
    auto ub = std::make_unique<Recorder>();
    a = ua.get();
    b = ub.get();
    ia = net.add_node("a", std::move(ua));
    ib = net.add_node("b", std::move(ub));
    std::tie(a_to_b, b_to_a) = net.connect(ia, 0, ib, 3, ab, ba);
  }
  void send_from_a(std::span<const std::uint8_t> p) { net.sink_for(ia).send(0, p); }

  Network net;
  Recorder* a = nullptr;
  Recorder* b = nullptr;
  NodeId ia = 0, ib = 0;
  std::size_t a_to_b = 0, b_to_a = 0;
};

TEST(InprocNetwork, DelaysAndEqualTimesKeepInsertionOrder) {
  Network net(1);
  auto r = std::make_unique<Recorder>();
  Recorder* rec = r.get();
  const NodeId dst = net.add_node("dst", std::move(r));
  const NodeId slow = net.add_node("slow", std::make_unique<Recorder>());
  const NodeId fast = net.add_node("fast", std::make_unique<Recorder>());
  net.connect(slow, 0, dst, 0, link_of(microseconds(5)), link_of(microseconds(5)));
  net.connect(fast, 0, dst, 1, link_of(microseconds(2)), link_of(microseconds(2)));
  EXPECT_EQ(net.node_name(fast), "fast");
  EXPECT_EQ(net.channel_count(), 4u);
  EXPECT_EQ(net.channel_from(0), slow);
  EXPECT_EQ(net.channel_to(0), dst);

  const auto p1 = packet(1), p2 = packet(2), p3 = packet(3), p4 = packet(4);
  net.sink_for(slow).send(0, p1);
  net.sink_for(fast).send(0, p2);
  net.sink_for(slow).send(0, p3);
  net.schedule(time_from_ns(3000), [&](Time) { net.sink_for(fast).send(0, p4); });  // arrives at 5 us too
  EXPECT_EQ(net.run_until_idle(), 5u);                                              // 4 deliveries + 1 scripted action
  ASSERT_EQ(rec->got.size(), 4u);
  EXPECT_EQ(seq_of(rec->got[0].bytes), 2u);
  EXPECT_EQ(rec->got[0].ns, 2000);
  EXPECT_EQ(rec->got[0].port, 1);
  // Three packets at 5 us: in the order their events were created.
  EXPECT_EQ(seq_of(rec->got[1].bytes), 1u);
  EXPECT_EQ(seq_of(rec->got[2].bytes), 3u);
  EXPECT_EQ(seq_of(rec->got[3].bytes), 4u);
  EXPECT_EQ(rec->got[3].ns, 5000);
  EXPECT_EQ(rec->got[1].port, 0);
  EXPECT_EQ(ns_of(net.now()), 5000);
  EXPECT_EQ(net.events_processed(), 5u);
  EXPECT_EQ(net.channel_counters(0).packets, 2u);
  EXPECT_EQ(net.channel_counters(0).bytes, 2 * packet_size(kDefaultValuesPerPacket));
}

TEST(InprocNetwork, NodesSendFromCallbacksAndMayRewriteTheirCopy) {
  Pair pair(1, link_of(microseconds(1)), link_of(microseconds(1)));
  // b bounces every packet back after rewriting its seq in place; a's copy is unaffected.
  pair.b->react = [](PortId port, std::span<std::uint8_t> p, Time, PortSink& out) {
    Header h;
    ASSERT_EQ(decode_header(p, h), DecodeError::kOk);
    h.seq += 100;
    encode_header(h, p);
    out.send(port, p);
  };
  const auto p = packet(5);
  pair.send_from_a(p);
  pair.net.run_until_idle();
  ASSERT_EQ(pair.a->got.size(), 1u);
  EXPECT_EQ(seq_of(pair.a->got[0].bytes), 105u);
  EXPECT_EQ(pair.a->got[0].ns, 2000);
  EXPECT_EQ(pair.a->got[0].port, 0);
  EXPECT_EQ(seq_of(p), 5u);
}

// The delivery trace of 3000 packets over a link with every fault on.
std::vector<std::pair<std::int64_t, Seq>> faulty_trace(std::uint64_t seed) {
  ChannelConfig c = link_of(microseconds(3));
  c.rate_gbps = 10;
  c.loss = 0.05;
  c.duplicate = 0.05;
  c.reorder = 0.05;
  Pair pair(seed, c);
  for (Seq s = 0; s < 3000; ++s) {
    pair.net.schedule(time_from_ns(200 * s), [&pair, s](Time) { pair.send_from_a(packet(s)); });
  }
  pair.net.run_until_idle();
  std::vector<std::pair<std::int64_t, Seq>> trace;
  for (const Delivery& d : pair.b->got) trace.push_back({d.ns, seq_of(d.bytes)});
  return trace;
}

TEST(InprocNetwork, SameSeedSameTraceOtherSeedOtherTrace) {
  const auto first = faulty_trace(42);
  EXPECT_EQ(first, faulty_trace(42));
  EXPECT_NE(first, faulty_trace(43));
  EXPECT_GT(first.size(), 2500u);
}

TEST(InprocNetwork, LossRateIsCloseToTheConfiguredProbability) {
  ChannelConfig c = link_of(microseconds(1));
  c.loss = 0.1;
  Pair pair(7, c);
  constexpr int kPackets = 100000;
  const auto p = packet(0, 1);
  for (int i = 0; i < kPackets; ++i) pair.send_from_a(p);
  pair.net.run_until_idle();
  const ChannelCounters k = pair.net.channel_counters(pair.a_to_b);
  EXPECT_EQ(k.packets, std::uint64_t{kPackets});
  EXPECT_EQ(pair.b->got.size() + k.lost, std::uint64_t{kPackets});
  // 5 standard deviations of a binomial(100000, 0.1): about 474 packets.
  const double sigma = std::sqrt(kPackets * 0.1 * 0.9);
  EXPECT_NEAR(static_cast<double>(k.lost), kPackets * 0.1, 5 * sigma);
  EXPECT_EQ(pair.net.channel_counters(pair.b_to_a).packets, 0u);
}

TEST(InprocNetwork, DuplicatesArriveSlightlyAfterTheOriginal) {
  ChannelConfig c = link_of(microseconds(1));
  c.duplicate = 1;
  Pair pair(7, c);
  // b rewrites its copy; the duplicate must still arrive as sent.
  pair.b->react = [](PortId, std::span<std::uint8_t> p, Time, PortSink&) { p[8] ^= 0xFF; };
  const auto p = packet(9);
  pair.send_from_a(p);
  pair.net.run_until_idle();
  ASSERT_EQ(pair.b->got.size(), 2u);
  EXPECT_EQ(pair.b->got[0].ns, 1000);
  EXPECT_GT(pair.b->got[1].ns, 1000);
  EXPECT_LT(pair.b->got[1].ns, 2000);
  EXPECT_EQ(pair.b->got[1].bytes, p);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).duplicated, 1u);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).packets, 1u);  // a duplicate is not a second send

  ChannelConfig some = link_of(microseconds(1));
  some.duplicate = 0.2;
  Pair stats(8, some);
  for (int i = 0; i < 20000; ++i) stats.send_from_a(p);
  stats.net.run_until_idle();
  const auto dups = stats.net.channel_counters(stats.a_to_b).duplicated;
  EXPECT_EQ(stats.b->got.size(), 20000u + dups);
  EXPECT_NEAR(static_cast<double>(dups), 4000, 5 * std::sqrt(20000 * 0.2 * 0.8));
}

TEST(InprocNetwork, ReorderingHoldsPacketsBackOneToThreeDelays) {
  ChannelConfig c = link_of(microseconds(10));
  c.reorder = 0.3;
  Pair pair(3, c);
  constexpr Seq kPackets = 2000;
  for (Seq s = 0; s < kPackets; ++s) {
    pair.net.schedule(time_from_ns(1000 * s), [&pair, s](Time) { pair.send_from_a(packet(s)); });
  }
  pair.net.run_until_idle();
  ASSERT_EQ(pair.b->got.size(), kPackets);
  std::size_t out_of_order = 0, held = 0;
  for (std::size_t i = 0; i < pair.b->got.size(); ++i) {
    const Seq s = seq_of(pair.b->got[i].bytes);
    const std::int64_t latency = pair.b->got[i].ns - 1000 * std::int64_t{s};
    EXPECT_TRUE(latency == 10000 || (latency >= 20000 && latency <= 40000)) << latency;
    if (latency > 10000) ++held;
    if (i > 0 && s < seq_of(pair.b->got[i - 1].bytes)) ++out_of_order;
  }
  EXPECT_EQ(held, pair.net.channel_counters(pair.a_to_b).reordered);
  EXPECT_NEAR(static_cast<double>(held), 600, 5 * std::sqrt(2000 * 0.3 * 0.7));
  EXPECT_GT(out_of_order, 100u);

  // A zero-delay link still reorders: the hold-back is at least 1 us.
  ChannelConfig zero = link_of(Duration{0});
  zero.reorder = 1;
  Pair z(3, zero);
  z.send_from_a(packet(1));
  z.net.run_until_idle();
  ASSERT_EQ(z.b->got.size(), 1u);
  EXPECT_EQ(z.b->got[0].ns, 1000);
}

TEST(InprocNetwork, SerializationTimeIsExact) {
  // 1 Gbit/s: a 288 B packet + 42 B encapsulation = 2640 bits = 2640 ns on the wire.
  ChannelConfig c = link_of(microseconds(1));
  c.rate_gbps = 1;
  Pair pair(1, c);
  const auto p = packet(0);
  for (int i = 0; i < 3; ++i) pair.send_from_a(p);
  pair.net.run_until(time_from_ns(4000));
  pair.send_from_a(p);  // the link is busy until 7920 ns: this one queues behind
  pair.net.run_until(time_from_ns(20000));
  pair.send_from_a(p);  // idle link: starts at once
  pair.net.run_until_idle();
  ASSERT_EQ(pair.b->got.size(), 5u);
  const std::int64_t want[] = {3640, 6280, 8920, 11560, 20000 + 2640 + 1000};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(pair.b->got[i].ns, want[i]) << i;

  // 100 Gbit/s: 26.4 ns per packet; fractions accumulate without drift (rounded up per arrival).
  ChannelConfig fast = link_of(Duration{0});
  fast.rate_gbps = 100;
  Pair f(1, fast);
  for (int i = 0; i < 100; ++i) f.send_from_a(p);
  f.net.run_until_idle();
  ASSERT_EQ(f.b->got.size(), 100u);
  EXPECT_EQ(f.b->got[0].ns, 27);     // 26.4
  EXPECT_EQ(f.b->got[4].ns, 132);    // 132.0
  EXPECT_EQ(f.b->got[99].ns, 2640);  // 2640.0
}

// A 1 Gbit/s link (a 330-byte packet takes 2,640 ns) with room for 4 packets.
ChannelConfig four_packet_link() {
  ChannelConfig c = link_of(microseconds(1));
  c.rate_gbps = 1;
  c.buffer_packets = 4;
  return c;
}

TEST(InprocNetwork, DropTailAtTheBufferLimit) {
  Pair pair(1, four_packet_link());
  const auto p = packet(0);
  for (int i = 0; i < 10; ++i) pair.send_from_a(p);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).packets, 4u);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).queue_drops, 6u);
  // After the first packet left (2640 ns) there is room for exactly one more.
  pair.net.run_until(time_from_ns(2640));
  pair.send_from_a(p);
  pair.send_from_a(p);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).packets, 5u);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).queue_drops, 7u);
  pair.net.run_until_idle();
  EXPECT_EQ(pair.b->got.size(), 5u);
}

TEST(InprocNetwork, ASenderIsToldOnceWhenItsEgressRefusesPackets) {
  Pair pair(1, four_packet_link());
  const auto p = packet(0);
  for (int i = 0; i < 4; ++i) pair.send_from_a(p);
  pair.net.run_until(time_from_ns(1));
  EXPECT_TRUE(pair.a->egress_full.empty()) << "4 packets fit a 4-packet buffer";
  for (int i = 0; i < 6; ++i) pair.send_from_a(p);  // 6 refused at once: told once, after the sends
  EXPECT_TRUE(pair.a->egress_full.empty()) << "told in an event of its own, not inside the send";
  pair.net.run_until(time_from_ns(2));
  EXPECT_EQ(pair.a->egress_full, std::vector<std::int64_t>({1}));
  // The next refusal, later, is told again at its own time.
  pair.net.run_until(time_from_ns(2640));
  pair.send_from_a(p);
  pair.send_from_a(p);
  pair.net.run_until_idle();
  EXPECT_EQ(pair.a->egress_full, std::vector<std::int64_t>({1, 2640}));
  EXPECT_TRUE(pair.b->egress_full.empty());
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).queue_drops, 7u);
}

TEST(InprocNetwork, AHostsNicServesItsJobsInTurn) {
  // Job 1 queues 20 packets at a 1 Gbit/s NIC (2,640 ns each), then job 2 sends one. In one FIFO
  // job 2's packet leaves last; with fair queueing it waits for the packet being sent and one
  // quantum of job 1's (1,514 bytes: 4 packets), and job 1's go on in order after it.
  for (const bool fair : {false, true}) {
    ChannelConfig c = link_of(microseconds(1));
    c.rate_gbps = 1;
    c.fair_queueing = fair;
    Pair pair(1, c);
    for (Seq s = 0; s < 20; ++s) pair.send_from_a(packet(s));
    pair.send_from_a(packet(100, kDefaultValuesPerPacket, 2));
    pair.net.run_until_idle();
    ASSERT_EQ(pair.b->got.size(), 21u);
    std::vector<Seq> order;
    for (const Delivery& d : pair.b->got) order.push_back(seq_of(d.bytes));
    const std::size_t at = fair ? 5 : 20;
    EXPECT_EQ(order[at], 100u) << (fair ? "fair" : "fifo");
    order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
    for (Seq s = 0; s < 20; ++s) EXPECT_EQ(order[s], s);
    // Back to back either way: the link never idles while packets wait (21 x 2,640 ns + 1 us).
    EXPECT_EQ(pair.b->got.back().ns, 21 * 2640 + 1000);
    EXPECT_EQ(pair.b->got[at].ns, static_cast<std::int64_t>(at + 1) * 2640 + 1000);
  }
}

TEST(InprocNetwork, AFullFairQueueDropsFromTheJobThatFillsIt) {
  // Room for 4 packets (the one being sent included). Job 1 sends 10: 4 fit, 6 are refused, as in
  // a FIFO. Then job 2 sends 2: each takes the place of one of job 1's waiting packets (the job
  // with the most waiting loses, fq_codel's rule), where a FIFO would refuse both. Told once.
  ChannelConfig c = four_packet_link();
  c.fair_queueing = true;
  Pair pair(1, c);
  for (Seq s = 0; s < 10; ++s) pair.send_from_a(packet(s));
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).queue_drops, 6u);
  for (Seq s = 100; s < 102; ++s) pair.send_from_a(packet(s, kDefaultValuesPerPacket, 2));
  pair.net.run_until_idle();
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).queue_drops, 8u);
  std::vector<Seq> got;
  for (const Delivery& d : pair.b->got) got.push_back(seq_of(d.bytes));
  EXPECT_EQ(got, (std::vector<Seq>{0, 3, 100, 101}));  // 0 was being sent; 1 and 2 made room
  EXPECT_EQ(pair.a->egress_full, std::vector<std::int64_t>({0}));
}

TEST(InprocNetwork, EcnMarksAtTheThreshold) {
  ChannelConfig c = link_of(microseconds(1));
  c.rate_gbps = 1;
  c.ecn_threshold_packets = 2;
  Pair pair(1, c);
  const auto p = packet(0);
  for (int i = 0; i < 5; ++i) pair.send_from_a(p);
  const std::vector<std::uint8_t> not_atp(50, 0x55);  // cannot be marked: dropped past the threshold
  pair.send_from_a(not_atp);
  pair.net.run_until_idle();
  ASSERT_EQ(pair.b->got.size(), 5u);
  // Queue lengths at enqueue: 0, 1, 2, 3, 4 -> the last three are marked.
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(ecn_of(pair.b->got[i].bytes), i >= 2) << i;
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).ecn_marked, 3u);
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).queue_drops, 1u);
  EXPECT_FALSE(ecn_of(p));  // the sender's bytes are untouched

  // Without a rate no queue builds up: nothing is marked or dropped.
  ChannelConfig no_rate = link_of(microseconds(1));
  no_rate.ecn_threshold_packets = 1;
  no_rate.buffer_packets = 1;
  Pair q(1, no_rate);
  for (int i = 0; i < 5; ++i) q.send_from_a(p);
  q.net.run_until_idle();
  EXPECT_EQ(q.b->got.size(), 5u);
  EXPECT_EQ(q.net.channel_counters(q.a_to_b).ecn_marked, 0u);
  EXPECT_EQ(q.net.channel_counters(q.a_to_b).queue_drops, 0u);
}

TEST(InprocNetwork, TimersFollowTheEarliestDeadline) {
  Network net(1);
  auto t = std::make_unique<TimerNode>();
  TimerNode* timer = t.get();
  timer->deadline = time_from_ns(50000);  // read when the node is added
  const NodeId it = net.add_node("timer", std::move(t));
  const NodeId src = net.add_node("src", std::make_unique<Recorder>());
  net.connect(src, 0, it, 0, link_of(microseconds(1)), link_of(microseconds(1)));

  // At 1 us a packet moves the deadline earlier, to 10 us: the timer fires then; the event
  // armed for 50 us becomes stale and must not call on_timeout.
  net.sink_for(src).send(0, packet(10000));
  net.run_until_idle();
  EXPECT_EQ(timer->fired, std::vector<std::int64_t>{10000});
  EXPECT_EQ(ns_of(net.now()), 50000);  // the stale event still ran, harmlessly

  // Moving a deadline later: the armed (earlier) event fires, finds nothing due, re-arms.
  net.sink_for(src).send(0, packet(60000));  // arrives at 51 us: deadline 60 us
  net.schedule(time_from_ns(55000), [&](Time) {
    timer->deadline = time_from_ns(70000);
    net.wake(it);
  });
  net.run_until_idle();
  EXPECT_EQ(timer->fired, (std::vector<std::int64_t>{10000, 70000}));

  // A periodic timer touched from outside: wake() arms it.
  timer->period = microseconds(5);
  timer->max_fires = 5;
  timer->deadline = time_from_ns(80000);
  net.wake(it);
  net.run_until_idle();
  EXPECT_EQ(timer->fired, (std::vector<std::int64_t>{10000, 70000, 80000, 85000, 90000}));

  // A deadline in the past fires at the current time.
  timer->period = Duration{0};
  timer->deadline = time_from_ns(1);
  net.wake(it);
  net.run_until_idle();
  EXPECT_EQ(timer->fired.back(), 90000);
  EXPECT_EQ(timer->fired.size(), 6u);
}

// A node that stays due after on_timeout (a bug in the node) is retried every nanosecond
// instead of freezing the clock, so run_until() still returns.
TEST(InprocNetwork, AStuckDeadlineDoesNotFreezeTheClock) {
  Network net(1);
  auto t = std::make_unique<TimerNode>();
  TimerNode* timer = t.get();
  const NodeId it = net.add_node("timer", std::move(t));
  timer->deadline = time_from_ns(1000);
  timer->period = Duration{-1};  // on_timeout leaves the deadline alone
  net.wake(it);
  net.run_until(time_from_ns(1010));
  EXPECT_EQ(timer->fired.size(), 11u);
  EXPECT_EQ(timer->fired.back(), 1010);
}

TEST(InprocNetwork, ScheduleAndRunUntil) {
  Network net(1);
  std::vector<std::pair<int, std::int64_t>> calls;
  net.schedule(time_from_ns(300), [&](Time now) { calls.push_back({3, ns_of(now)}); });
  net.schedule(time_from_ns(100), [&](Time now) {
    calls.push_back({1, ns_of(now)});
    net.schedule(time_from_ns(50), [&](Time later) { calls.push_back({2, ns_of(later)}); });  // past: runs now
  });
  EXPECT_EQ(net.run_until(time_from_ns(200)), 2u);
  EXPECT_EQ(ns_of(net.now()), 200);  // the clock stops at the limit
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::make_pair(1, std::int64_t{100}));
  EXPECT_EQ(calls[1], std::make_pair(2, std::int64_t{100}));
  EXPECT_EQ(net.run_until(time_from_ns(300)), 1u);  // an event exactly at the limit runs
  EXPECT_EQ(calls.back(), std::make_pair(3, std::int64_t{300}));
  EXPECT_EQ(net.run_until_idle(), 0u);
  EXPECT_EQ(net.events_processed(), 3u);
}

TEST(InprocNetwork, UnconnectedPortsAndDoubleConnects) {
  Pair pair(1, link_of(microseconds(1)));
  pair.net.sink_for(pair.ia).send(5, packet(1));
  EXPECT_EQ(pair.net.unconnected_drops(), 1u);
  EXPECT_THROW(pair.net.connect(pair.ia, 0, pair.ib, 7, link_of(Duration{0}), link_of(Duration{0})),
               std::invalid_argument);
  // Faults can change between events.
  ChannelConfig lossy = link_of(microseconds(1));
  lossy.loss = 1;
  pair.net.set_channel_config(pair.a_to_b, lossy);
  pair.send_from_a(packet(2));
  pair.net.run_until_idle();
  EXPECT_TRUE(pair.b->got.empty());
  EXPECT_EQ(pair.net.channel_counters(pair.a_to_b).lost, 1u);
}

// Not a timed test (DESIGN.md): a million packets bounced between two nodes must simply finish;
// the run time shows up in the test log.
TEST(InprocNetwork, AMillionPacketsRun) {
  ChannelConfig c = link_of(microseconds(1));
  c.rate_gbps = 100;
  c.ecn_threshold_packets = 100;
  Pair pair(1, c, c);
  std::uint64_t bounces = 0;
  auto bounce = [&bounces](PortId port, std::span<std::uint8_t> p, Time, PortSink& out) {
    if (++bounces < 1000000) out.send(port, p);
  };
  pair.a->react = bounce;
  pair.b->react = bounce;
  for (Seq s = 0; s < 100; ++s) pair.send_from_a(packet(s));  // 100 packets in flight
  pair.a->keep = false;
  pair.b->keep = false;
  pair.net.run_until_idle();
  EXPECT_GE(bounces, 1000000u);
}

// ---------------------------------------------------------------------------------------------
// ATP jobs end to end on the in-process network.

// A job with `shards` PSes and two workers under one ToR (aggregating or not), `fragments`
// fragments per round (the last one padded), windows fixed at `window`.
Scenario sharded_scenario(std::uint32_t shards, std::uint32_t fragments, std::uint32_t window, bool atp_switch) {
  Scenario s;
  s.seed = 7 + shards * 100 + fragments * 10 + window;
  SwitchConfig tor;
  tor.atp_capable = atp_switch;
  s.topology.switches.push_back({"tor", tor});
  ScenarioJob job;
  job.spec.name = "j";
  job.spec.id = 1;
  job.spec.values_per_packet = 7;
  for (const char* w : {"w0", "w1"}) {
    s.topology.hosts.push_back({w, "tor"});
    job.spec.workers.push_back(w);
  }
  for (std::uint32_t k = 0; k < shards; ++k) {
    s.topology.hosts.push_back({"p" + std::to_string(k), "tor"});
    job.spec.ps.push_back("p" + std::to_string(k));
  }
  job.spec.congestion.initial_window = window;
  job.spec.congestion.max_window = window;
  job.elements = std::uint64_t{fragments} * 7 - 3;
  job.rounds = 4;
  s.jobs.push_back(job);
  return s;
}

// Shards 1-4 x fragments per round (multiples of the shard count and not, fewer than the shards
// too) x windows 1-3 x with and without an aggregating switch: every round completes, exact.
class ShardedJob : public ::testing::TestWithParam<std::tuple<std::uint32_t, std::uint32_t, bool>> {};

TEST_P(ShardedJob, EveryRoundCompletesExactly) {
  const auto [shards, window, atp_switch] = GetParam();
  for (const std::uint32_t fragments : {1u, 2u, 3u, 4u, 5u, 7u, 10u}) {
    const ScenarioResult r = run_inproc(sharded_scenario(shards, fragments, window, atp_switch));
    ASSERT_EQ(r.jobs.size(), 1u);
    EXPECT_TRUE(r.jobs[0].correct) << fragments << " fragments per round: " << r.jobs[0].error;
    EXPECT_EQ(r.jobs[0].completed_rounds, 4u) << fragments << " fragments per round";
    EXPECT_FALSE(r.time_limit_reached);
    EXPECT_EQ(r.leaked_aggregators, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(ShardsWindowsSwitch, ShardedJob,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u), ::testing::Values(1u, 2u, 3u),
                                            ::testing::Bool()));

// The reproducer of the deadlock: one worker, two PSes, 3 fragments per round, window 1.
TEST(AtpJobs, OneWorkerTwoShardsThreeFragmentsWindowOne) {
  const Scenario s = parse_scenario_yaml(R"(
topology:
  switches: [{name: tor, atp: true}]
  hosts: [{name: h0, switch: tor}, {name: p0, switch: tor}, {name: p1, switch: tor}]
jobs: [{name: j, workers: [h0], ps: [p0, p1], elements: 21, rounds: 2,
        values_per_packet: 7, window: 1, max_window: 1}]
)");
  const ScenarioResult r = run_inproc(s);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_TRUE(r.jobs[0].correct) << r.jobs[0].error;
  EXPECT_EQ(r.jobs[0].completed_rounds, 2u);
}

using test::SwitchHost;
using test::Uplink;

// An end host with a worker (which runs `inputs`, one allreduce after the other, and keeps each
// result) or a PS.
class EndpointHost final : public Node {
 public:
  void on_packet(PortId, std::span<std::uint8_t> p, Time now, PortSink& out) override {
    Uplink uplink(out);
    if (worker) {
      worker->on_packet(p, now, uplink);
      next_round(now, uplink);
    }
    if (ps) ps->on_packet(p, now, uplink);
  }
  void on_timeout(Time now, PortSink& out) override {
    Uplink uplink(out);
    if (worker) worker->on_timeout(now, uplink);
    if (ps) ps->on_timeout(now, uplink);
  }
  Time next_deadline() const override {
    return std::min(worker ? worker->next_deadline() : kNever, ps ? ps->next_deadline() : kNever);
  }
  // Keeps the result of a completed round and starts the next one, while inputs are left.
  void next_round(Time now, PacketSink& out) {
    while (worker->state() == WorkerState::kIdle && started > results.size()) {
      results.emplace_back(worker->result().begin(), worker->result().end());
      if (started < inputs.size()) {
        ASSERT_TRUE(worker->start(inputs[started++], now, out));
      }
    }
  }

  std::optional<WorkerEndpoint> worker;
  std::optional<PsEndpoint> ps;
  std::vector<std::vector<float>> inputs;   // one per round
  std::size_t started = 0;                  // rounds started
  std::vector<std::vector<float>> results;  // one per completed round
};

struct WorkerOutcome {
  WorkerState state = WorkerState::kIdle;
  std::string error;
  std::vector<std::vector<float>> results;  // of the rounds completed
};

// Runs `spec` on `topology` (default links, no faults), worker w running inputs[w] round after
// round, until every worker is done or failed. Worker w starts its first round at start_at[w]
// (none given: all at 0).
std::vector<WorkerOutcome> run_job(const Topology& topology, const JobSpec& spec,
                                   const std::vector<std::vector<std::vector<float>>>& inputs,
                                   const std::vector<Duration>& start_at = {}) {
  const NetworkPlan network_plan = plan_network(topology);
  const JobPlan plan = plan_job(network_plan, spec);
  Network net(1);
  std::map<std::string, NodeId> ids;
  std::vector<EndpointHost*> workers;
  for (const SwitchSpec& sw : topology.switches) {
    const auto job = plan.switches.find(sw.name);
    const auto routes = network_plan.routes.find(sw.name);
    ids[sw.name] = net.add_node(
        sw.name, std::make_unique<SwitchHost>(sw.config, routes->second,
                                              job == plan.switches.end() ? nullptr : &job->second, spec.id));
  }
  for (const HostSpec& h : topology.hosts) {
    auto host = std::make_unique<EndpointHost>();
    for (std::size_t w = 0; w < spec.workers.size(); ++w) {
      if (spec.workers[w] != h.name) continue;
      host->worker.emplace(plan.workers[w]);
      host->inputs = inputs[w];
      workers.push_back(host.get());
    }
    for (std::size_t k = 0; k < spec.ps.size(); ++k) {
      if (spec.ps[k] == h.name) host->ps.emplace(plan.ps[k]);
    }
    ids[h.name] = net.add_node(h.name, std::move(host));
  }
  for (const PlannedLink& link : network_plan.links) {
    net.connect(ids.at(link.a.node), link.a.port, ids.at(link.b.node), link.b.port, ChannelConfig{}, ChannelConfig{});
  }
  for (std::size_t w = 0; w < workers.size(); ++w) {
    net.schedule(Time{} + (start_at.empty() ? Duration::zero() : start_at.at(w)), [&, w](Time now) {
      Uplink uplink(net.sink_for(ids.at(spec.workers[w])));
      workers[w]->started = 1;
      EXPECT_TRUE(workers[w]->worker->start(workers[w]->inputs.at(0), now, uplink));
      workers[w]->next_round(now, uplink);
    });
  }
  net.run_until(time_from_ns(60'000'000'000));
  std::vector<WorkerOutcome> outcomes;
  for (EndpointHost* w : workers) {
    outcomes.push_back({w->worker->state(), w->worker->error(), w->results});
  }
  return outcomes;
}

// h0..h{n-1} and the PS p0 under one ATP ToR, or (two_level) the workers split over two ATP
// racks under a core switch and the PS in a third rack: aggregation at both levels.
Topology job_topology(std::size_t workers, bool two_level) {
  Topology t;
  SwitchConfig atp;
  atp.aggregator_width = 64;
  if (!two_level) {
    t.switches.push_back({"tor", atp});
    for (std::size_t w = 0; w < workers; ++w) t.hosts.push_back({"h" + std::to_string(w), "tor"});
    t.hosts.push_back({"p0", "tor"});
    return t;
  }
  for (const char* s : {"rack0", "rack1", "rack2"}) t.switches.push_back({s, atp});
  SwitchConfig core = atp;
  core.atp_capable = false;
  t.switches.push_back({"core", core});
  for (const char* s : {"rack0", "rack1", "rack2"}) t.switch_links.push_back({s, "core"});
  for (std::size_t w = 0; w < workers; ++w)
    t.hosts.push_back({"h" + std::to_string(w), w % 2 == 0 ? "rack0" : "rack1"});
  t.hosts.push_back({"p0", "rack2"});
  return t;
}

JobSpec job_spec(std::size_t workers, std::uint16_t values_per_packet) {
  JobSpec spec;
  spec.name = "j";
  spec.id = 1;
  for (std::size_t w = 0; w < workers; ++w) spec.workers.push_back("h" + std::to_string(w));
  spec.ps = {"p0"};
  spec.values_per_packet = values_per_packet;
  return spec;
}

// NaN and infinities are never silently wrong: a NaN anywhere gives NaN at its position, +Inf
// and -Inf give NaN, +Inf alone +Inf, in every worker's result; the rest of that fragment is the
// float32 path's sum and every other fragment is exact. One rack and two levels of aggregation.
class NonFiniteInputs : public ::testing::TestWithParam<bool> {};

TEST_P(NonFiniteInputs, ReachTheResultAsIeeeArithmeticSays) {
  const bool two_level = GetParam();
  constexpr std::size_t kWorkers = 3;
  constexpr std::uint16_t kValues = 8;
  constexpr std::size_t kN = 4 * kValues - 3;  // 4 fragments, the last one padded
  constexpr std::size_t kAt = kValues + 3;     // in fragment 1
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* what;
    std::vector<std::pair<std::size_t, float>> specials;  // (worker, value at kAt)
    bool want_nan;
  };
  const Case cases[] = {
      {"NaN in one worker", {{1, nan}}, true},
      {"+Inf and -Inf", {{0, inf}, {2, -inf}}, true},
      {"+Inf alone", {{2, inf}}, false},
      {"-Inf alone", {{0, -inf}}, false},
  };
  for (const Case& c : cases) {
    std::vector<std::vector<float>> round(kWorkers, std::vector<float>(kN));
    for (std::size_t w = 0; w < kWorkers; ++w) {
      for (std::size_t x = 0; x < kN; ++x) round[w][x] = 0.001f * static_cast<float>((x * 37 + w * 11) % 200) - 0.1f;
    }
    for (const auto& [w, v] : c.specials) round[w][kAt] = v;
    // A second, finite round: the float path of the first leaves nothing behind.
    std::vector<std::vector<float>> finite(kWorkers, std::vector<float>(kN, 0.25f));
    std::vector<std::vector<std::vector<float>>> inputs(kWorkers);
    for (std::size_t w = 0; w < kWorkers; ++w) inputs[w] = {round[w], finite[w]};

    const JobSpec spec = job_spec(kWorkers, kValues);
    const auto outcomes = run_job(job_topology(kWorkers, two_level), spec, inputs);
    ExactModel exact(spec.scale, kValues);  // a fragment with a value that is not finite: the float32 path
    const std::vector<float> want = exact.next(round);
    const std::vector<float> want_finite = exact.next(finite);
    ASSERT_EQ(outcomes.size(), kWorkers);
    for (std::size_t w = 0; w < kWorkers; ++w) {
      const WorkerOutcome& o = outcomes[w];
      ASSERT_EQ(o.state, WorkerState::kIdle) << c.what << ", worker " << w << ": " << o.error;
      ASSERT_EQ(o.results.size(), 2u) << c.what;
      const std::vector<float>& got = o.results[0];
      ASSERT_EQ(got.size(), kN);
      if (c.want_nan) {
        EXPECT_TRUE(std::isnan(got[kAt])) << c.what << ", worker " << w << ": " << got[kAt];
      } else {
        EXPECT_EQ(got[kAt], want[kAt]) << c.what << ", worker " << w;
        EXPECT_TRUE(std::isinf(got[kAt])) << c.what << ", worker " << w;
      }
      for (std::size_t x = 0; x < kN; ++x) {
        if (x != kAt) {
          EXPECT_EQ(got[x], want[x]) << c.what << ", worker " << w << ", value " << x;
        }
      }
      EXPECT_EQ(o.results[1], want_finite) << c.what << ", worker " << w;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneRackAndTwoLevels, NonFiniteInputs, ::testing::Bool());

// A straggler (a rank still computing its gradients): one worker starts its call several reclaim
// timeouts after the others, whose contributions wait in the switches' aggregators meanwhile
// (until their timeouts' resends flush them, or a reclaim sends them on): every round is exact.
// One rack, two levels.
class Straggler : public ::testing::TestWithParam<bool> {};

TEST_P(Straggler, EveryRoundIsExact) {
  const bool two_level = GetParam();
  constexpr std::size_t kWorkers = 4;
  constexpr std::uint16_t kValues = 16;
  constexpr std::size_t kFragments = 200;
  const JobSpec spec = job_spec(kWorkers, kValues);
  const Duration late = 3 * SwitchConfig{}.reclaim_timeout + std::chrono::milliseconds(50);
  ASSERT_LT(late, spec.progress_timeout / 2);
  std::vector<std::vector<std::vector<float>>> inputs(kWorkers);
  std::vector<std::vector<float>> rounds[2] = {std::vector<std::vector<float>>(kWorkers),
                                               std::vector<std::vector<float>>(kWorkers)};
  for (std::size_t w = 0; w < kWorkers; ++w) {
    for (std::size_t r = 0; r < 2; ++r) {
      for (std::size_t x = 0; x < kFragments * kValues; ++x) {
        rounds[r][w].push_back(0.001f * static_cast<float>((x * 13 + w * 7 + r * 3) % 500) - 0.25f);
      }
      inputs[w].push_back(rounds[r][w]);
    }
  }
  std::vector<Duration> start_at(kWorkers, Duration::zero());
  start_at.back() = late;
  const auto outcomes = run_job(job_topology(kWorkers, two_level), spec, inputs, start_at);
  ExactModel exact(spec.scale, kValues);
  const std::vector<float> want_first = exact.next(rounds[0]), want_second = exact.next(rounds[1]);
  ASSERT_EQ(outcomes.size(), kWorkers);
  for (std::size_t w = 0; w < kWorkers; ++w) {
    const WorkerOutcome& o = outcomes[w];
    ASSERT_EQ(o.state, WorkerState::kIdle) << "worker " << w << ": " << o.error;
    ASSERT_EQ(o.results.size(), 2u);
    EXPECT_EQ(o.results[0], want_first) << "worker " << w;
    EXPECT_EQ(o.results[1], want_second) << "worker " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(OneRackAndTwoLevels, Straggler, ::testing::Bool());

// Workers that all-reduce tensors of different sizes all fail their round with one sentence
// (never a "success" with values mixed from both calls), whether their rounds differ in
// fragment count (1000 vs 2000 values) or only in the last fragment's (1000 vs 1001), with one
// worker out of three different, on one rack and with two levels of aggregation.
class DifferentSizes : public ::testing::TestWithParam<bool> {};

TEST_P(DifferentSizes, FailEveryWorkersRoundWithOneSentence) {
  const bool two_level = GetParam();
  const std::vector<std::vector<std::size_t>> cases = {{1000, 2000}, {1000, 1001}, {2000, 1000}, {1000, 1000, 1001}};
  for (const auto& sizes : cases) {
    // The torch reproducer: rank r passes ones(sizes[r]), then full(5000, r + 1).
    std::vector<std::vector<std::vector<float>>> inputs;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      inputs.push_back({std::vector<float>(sizes[r], 1.0f), std::vector<float>(5000, static_cast<float>(r + 1))});
    }
    const auto outcomes = run_job(job_topology(sizes.size(), two_level), job_spec(sizes.size(), 62), inputs);
    ASSERT_EQ(outcomes.size(), sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      EXPECT_EQ(outcomes[r].state, WorkerState::kFailed) << "sizes[0] " << sizes[0] << ", worker " << r;
      EXPECT_EQ(outcomes[r].error,
                "job 1: the workers all-reduce tensors of different sizes (this worker: " + std::to_string(sizes[r]) +
                    " values in this call); every worker must pass the same number of values");
      EXPECT_TRUE(outcomes[r].results.empty()) << "no round may complete";
    }
  }
}

TEST_P(DifferentSizes, EqualSizesStayExact) {
  const bool two_level = GetParam();
  constexpr std::size_t kWorkers = 3;
  std::vector<std::vector<std::vector<float>>> inputs(kWorkers);
  std::vector<std::vector<float>> first(kWorkers), second(kWorkers);
  for (std::size_t r = 0; r < kWorkers; ++r) {
    first[r].assign(1001, 0.5f + static_cast<float>(r));
    for (std::size_t x = 0; x < 5000; ++x) second[r].push_back(0.001f * static_cast<float>((x * 7 + r) % 1000));
    inputs[r] = {first[r], second[r]};
  }
  const JobSpec spec = job_spec(kWorkers, 62);
  const auto outcomes = run_job(job_topology(kWorkers, two_level), spec, inputs);
  ExactModel exact(spec.scale, 62);
  const std::vector<float> want_first = exact.next(first), want_second = exact.next(second);
  for (const WorkerOutcome& o : outcomes) {
    ASSERT_EQ(o.state, WorkerState::kIdle) << o.error;
    ASSERT_EQ(o.results.size(), 2u);
    EXPECT_EQ(o.results[0], want_first);
    EXPECT_EQ(o.results[1], want_second);
  }
}

// Scale per fragment (docs/protocol.md): values of any magnitude from 1e-30 to 1e30, the same on
// every worker or spread over them, come back within float32's rounding of the float64 sum,
// relative to the fragment's largest value, from the second call on (a first call far from the
// job's scale may take the float32 path, which is exact too); integers that fit come back exact.
// At 2, 3, 8 and 17 workers, on one rack and two levels.
class ScalePerFragment : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(ScalePerFragment, AnyMagnitudeKeepsFloat32Precision) {
  const auto [workers, two_level] = GetParam();
  constexpr std::uint16_t kValues = 16;
  constexpr std::size_t kN = 5 * kValues;
  std::mt19937_64 rng(workers * 7 + two_level);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (const double magnitude : {1e-30, 1e-10, 1e-3, 1.0, 1e6, 1e30}) {
    for (const bool spread : {false, true}) {  // spread: worker w's values are magnitude x 1000^-w
      std::vector<std::vector<std::vector<float>>> inputs(workers);
      for (int call = 0; call < 3; ++call) {
        for (std::size_t w = 0; w < workers; ++w) {
          std::vector<float> v(kN);
          const double m = spread ? magnitude * std::pow(1e-3, static_cast<double>(w)) : magnitude;
          for (float& x : v) x = static_cast<float>(m * unit(rng));
          inputs[w].push_back(std::move(v));
        }
      }
      const auto outcomes = run_job(job_topology(workers, two_level), job_spec(workers, kValues), inputs);
      ExactModel exact(JobSpec{}.scale, kValues);
      for (int call = 0; call < 3; ++call) {
        std::vector<std::vector<float>> round;
        for (std::size_t w = 0; w < workers; ++w) round.push_back(inputs[w][static_cast<std::size_t>(call)]);
        const std::vector<float> want = exact.next(round);
        for (const WorkerOutcome& o : outcomes) {
          ASSERT_EQ(o.state, WorkerState::kIdle) << o.error;
          EXPECT_EQ(o.results.at(static_cast<std::size_t>(call)), want)
              << "magnitude " << magnitude << " call " << call;
        }
        if (call == 0) continue;
        // The exponents the first call picked resolve every fragment: the int32 path throughout.
        EXPECT_EQ(exact.float_fragments(), 0u) << "magnitude " << magnitude << " call " << call;
        // Against the float64 sum: within half an ulp of each fragment's largest value per worker
        // (the quantization) and the final rounding to float32.
        for (std::size_t f = 0; f < kN; f += kValues) {
          double largest = 0;
          for (const auto& in : round) {
            for (std::size_t i = f; i < f + kValues; ++i) largest = std::max(largest, std::fabs(double{in[i]}));
          }
          for (std::size_t i = f; i < f + kValues; ++i) {
            double sum = 0;
            for (const auto& in : round) sum += in[i];
            const double bound =
                static_cast<double>(workers) * largest * std::ldexp(1.0, -24) + std::fabs(sum) * 0x1p-24;
            EXPECT_LE(std::fabs(outcomes[0].results[static_cast<std::size_t>(call)][i] - sum), bound)
                << "magnitude " << magnitude << (spread ? " spread" : "") << " call " << call << " value " << i;
          }
        }
      }
    }
  }
  // Integers that fit float32 exactly: exact sums.
  std::vector<std::vector<std::vector<float>>> ints(workers);
  for (std::size_t w = 0; w < workers; ++w) {
    for (int call = 0; call < 2; ++call) {
      std::vector<float> v(kN);
      for (std::size_t i = 0; i < kN; ++i) v[i] = static_cast<float>((i * 7919 + w * 104729 + call) % 2000001) - 1e6f;
      ints[w].push_back(std::move(v));
    }
  }
  const auto outcomes = run_job(job_topology(workers, two_level), job_spec(workers, kValues), ints);
  for (int call = 0; call < 2; ++call) {
    for (std::size_t i = 0; i < kN; ++i) {
      double sum = 0;
      for (std::size_t w = 0; w < workers; ++w) sum += ints[w][static_cast<std::size_t>(call)][i];
      for (const WorkerOutcome& o : outcomes) {
        ASSERT_EQ(o.state, WorkerState::kIdle) << o.error;
        EXPECT_EQ(o.results[static_cast<std::size_t>(call)][i], static_cast<float>(sum))
            << "call " << call << " value " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersAndLevels, ScalePerFragment,
                         ::testing::Combine(::testing::Values(std::size_t{2}, std::size_t{3}, std::size_t{8},
                                                              std::size_t{17}),
                                            ::testing::Bool()));
INSTANTIATE_TEST_SUITE_P(OneRackAndTwoLevels, DifferentSizes, ::testing::Bool());

}  // namespace
}  // namespace atp::inproc
