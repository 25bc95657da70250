// Unit tests of the switch dataplane: every box of the paper's Fig. 7 and Fig. 17, admission,
// forwarding, reclaim, counters and bad input. Time is advanced by hand; nothing sleeps.
#include "atp/switch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/wire.h"

// Counts heap allocations, so that a test can check that the packet path makes none.
namespace {
std::atomic<std::uint64_t> g_allocations{0};
}  // namespace

// GCC sees free() of memory from operator new once these are inlined; here that is the point.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace atp {
namespace {

using namespace std::chrono_literals;
using Values = std::vector<std::int32_t>;

Time us(std::int64_t microseconds) { return time_from_ns(microseconds * 1000); }

// Records every send. Each packet a switch sends must itself decode.
class RecordingPortSink final : public PortSink {
 public:
  struct Sent {
    PortId port;
    std::vector<std::uint8_t> bytes;
    Header header() const {
      Header h;
      EXPECT_EQ(decode_header(bytes, h), DecodeError::kOk);
      return h;
    }
    Values values() const {
      Values v(header().value_count);
      load_values(bytes, v);
      return v;
    }
  };
  void send(PortId port, std::span<const std::uint8_t> packet) override {
    Header h;
    EXPECT_EQ(decode_header(packet, h), DecodeError::kOk) << "the switch sent a packet that does not decode";
    sent.push_back({port, std::vector<std::uint8_t>(packet.begin(), packet.end())});
  }
  std::vector<Sent> sent;
};

// The ports a packet was sent to, in order.
std::vector<PortId> ports_of(const std::vector<RecordingPortSink::Sent>& sent) {
  std::vector<PortId> ports;
  for (const auto& s : sent) ports.push_back(s.port);
  return ports;
}

// One switch with a PS uplink on port 0 and three workers on ports 1-3. Job kJob is installed,
// admitted on every port, and aggregated here for kPs: the switch is node kNode of its tree, the
// workers its children, nodes kNode + 1 + k.
class SwitchTest : public ::testing::Test {
 protected:
  static constexpr JobId kJob = 7;
  static constexpr JobId kOtherJob = 9;
  static constexpr Address kPs = 0x0A000009;       // 10.0.0.9
  static constexpr Address kOtherPs = 0x0A00000A;  // 10.0.0.10: no aggregation role here
  static constexpr Address kWorkers[3] = {0x0A000001, 0x0A000002, 0x0A000003};
  static constexpr PortId kPsPort = 0;  // worker k is on port k + 1
  static constexpr std::uint32_t kTableSize = 8;
  static constexpr std::uint16_t kWidth = 8;
  static constexpr Duration kTimeout = 1ms;

  static SwitchConfig config() {
    SwitchConfig c;
    c.num_aggregators = kTableSize;
    c.aggregator_width = kWidth;
    c.reclaim_timeout = kTimeout;
    return c;
  }
  static void install_network(SwitchPipeline& s) {
    s.add_route(kPs, kPsPort);
    s.add_route(kOtherPs, kPsPort);
    for (PortId k = 0; k < 3; ++k) s.add_route(kWorkers[k], static_cast<PortId>(k + 1));
    s.add_multicast_group(multicast_group_address(kJob), {1, 2, 3});
    s.add_multicast_group(multicast_group_address(kOtherJob), {1, 2, 3});
  }
  static constexpr std::uint16_t kNode = 1;
  static SwitchJobEntry job_entry(JobId job) {
    return SwitchJobEntry{job, {0, 1, 2, 3}, {AggregationRole{kPs, kNode, {{2, 1}, {3, 1}, {4, 1}}}}, {}};
  }
  // A switch above one like this: node kUpper, whose children are a switch like this one (node
  // kNode, three children) and a worker (node 5).
  static constexpr std::uint16_t kUpper = 10;
  static SwitchJobEntry upper_entry(JobId job = kJob) {
    return SwitchJobEntry{job, {0, 1, 2, 3}, {AggregationRole{kPs, kUpper, {{kNode, 3}, {5, 1}}}}, {}};
  }

  // A gradient from worker k (0-2), a child of this switch's node.
  static Header gradient(int worker, Seq seq, std::uint32_t index, JobId job = kJob) {
    Header h;
    h.job = job;
    h.seq = seq;
    h.node = static_cast<std::uint16_t>(kNode + 1 + worker);
    h.bitmap = 1;
    h.fan_in = 1;
    h.aggregator_index = index;
    h.src = kWorkers[worker];
    h.dst = kPs;
    return h;
  }
  static Header resend(int worker, Seq seq, std::uint32_t index) {
    Header h = gradient(worker, seq, index);
    h.resend = true;
    return h;
  }
  // `h` made the sum of node kNode's children `bitmap`, as this switch sends it on.
  static Header sum_of(Header h, std::uint32_t bitmap) {
    h.node = kNode;
    h.bitmap = bitmap;
    h.fan_in = 3;
    return h;
  }
  // The upper switch's child `node` (kNode or 5): its whole sum.
  static Header from_child(std::uint16_t node, Seq seq, std::uint32_t index) {
    Header h = gradient(0, seq, index);
    h.node = node;
    h.fan_in = node == kNode ? 3 : 1;
    h.bitmap = whole_bitmap(h.fan_in);
    return h;
  }
  // A parameter packet from the PS, multicast to the job's workers.
  static Header parameter(Seq seq, std::uint32_t index, JobId job = kJob) {
    Header h;
    h.is_ack = true;
    h.job = job;
    h.seq = seq;
    h.aggregator_index = index;
    h.src = kPs;
    h.dst = multicast_group_address(job);
    return h;
  }

  void feed(SwitchPipeline& s, PortId ingress, const Header& h, const Values& values, Time now) {
    std::vector<std::uint8_t> packet = build_packet(h, values);
    s.process(ingress, packet, now, sink);
  }
  void feed(PortId ingress, const Header& h, const Values& values, Time now) { feed(sw, ingress, h, values, now); }
  // Worker k's packets arrive on port k + 1.
  void from_worker(int worker, const Header& h, const Values& values, Time now) {
    feed(static_cast<PortId>(worker + 1), h, values, now);
  }
  Values row(const SwitchPipeline& s, std::uint32_t i) const {
    const auto v = s.table().values(i).first(s.table().at(i).value_count);
    return Values(v.begin(), v.end());
  }
  Values row(std::uint32_t i) const { return row(sw, i); }

  // A reclaimed aggregator that still waits for children sends what it holds on to the PS, as a
  // resend flushes it: the node's partial sum, flagged resend so that nothing above claims for it.
  static void expect_reclaimed_partial(const RecordingPortSink::Sent& sent, Seq seq, std::uint32_t bitmap,
                                       const Values& values) {
    EXPECT_EQ(sent.port, kPsPort);
    const Header h = sent.header();
    EXPECT_EQ(h.seq, seq);
    EXPECT_TRUE(h.resend);
    EXPECT_FALSE(h.collision);
    EXPECT_EQ(h.node, kNode);
    EXPECT_EQ(h.fan_in, 3);
    EXPECT_EQ(h.bitmap, bitmap);
    EXPECT_EQ(h.dst, kPs);
    EXPECT_EQ(sent.values(), values);
  }

  SwitchTest() : sw(config()) {
    install_network(sw);
    sw.install_job(job_entry(kJob));
  }

  SwitchPipeline sw;
  RecordingPortSink sink;
};

// ---------------------------------------------------------------------------------------------
// Fig. 7: the switch logic in the ideal case.

class SwitchFig7 : public SwitchTest {};

TEST_F(SwitchFig7, Box1_FreeAggregatorIsClaimedForJobAndSeq) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(10));

  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.table().in_use(), 1u);
  const Aggregator& a = sw.table().at(3);
  EXPECT_TRUE(a.in_use);
  EXPECT_EQ(a.job, kJob);
  EXPECT_EQ(a.seq, 100u);
  EXPECT_EQ(a.bitmap, 0b1u);
  EXPECT_EQ(a.counter, 1);
  EXPECT_FALSE(a.ecn);
  EXPECT_EQ(a.value_count, 4);
  EXPECT_EQ(a.timestamp, us(10));
  EXPECT_EQ(row(3), (Values{1, 2, 3, 4}));
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 1u);
}

TEST_F(SwitchFig7, Box1_SameJobAndSeqJoinsTheHeldAggregator) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(10));
  from_worker(1, gradient(1, 100, 3), {10, 20, 30, 40}, us(11));

  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.table().in_use(), 1u);
  EXPECT_EQ(sw.table().at(3).counter, 2);
  EXPECT_EQ(row(3), (Values{11, 22, 33, 44}));
  EXPECT_EQ(sw.job_counters(kJob).collisions, 0u);
}

TEST_F(SwitchFig7, Box2_CollisionForwardsWithResendAndCollision) {
  sw.install_job(job_entry(kOtherJob));
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(10));
  // Another fragment of the same job, and a fragment of another job (index 11 % 8 = 3).
  from_worker(1, gradient(1, 101, 3), {5, 6, 7, 8}, us(11));
  from_worker(2, gradient(2, 500, 11, kOtherJob), {9, 9, 9, 9}, us(12));

  ASSERT_EQ(sink.sent.size(), 2u);
  Header expected = gradient(1, 101, 3);
  expected.resend = true;
  expected.collision = true;
  expected.offered_aggregator = 0 + 1;  // free the longest: never held, lowest first
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{5, 6, 7, 8}));
  Header expected_other = gradient(2, 500, 11, kOtherJob);
  expected_other.resend = true;
  expected_other.collision = true;
  expected_other.offered_aggregator = 1 + 1;  // the next: one offer counts as freed now
  EXPECT_EQ(sink.sent[1].port, kPsPort);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(expected_other, Values{9, 9, 9, 9}));

  // The aggregator still serves its first fragment, untouched.
  const Aggregator& a = sw.table().at(3);
  EXPECT_EQ(a.seq, 100u);
  EXPECT_EQ(a.job, kJob);
  EXPECT_EQ(a.bitmap, 0b1u);
  EXPECT_EQ(a.counter, 1);
  EXPECT_EQ(a.timestamp, us(10));
  EXPECT_EQ(row(3), (Values{1, 2, 3, 4}));
  EXPECT_EQ(sw.job_counters(kJob).collisions, 1u);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 1u);
  EXPECT_EQ(sw.job_counters(kOtherJob).collisions, 1u);
  EXPECT_EQ(sw.job_counters(kOtherJob).aggregations, 0u);
}

TEST_F(SwitchFig7, Box2_CollisionAtAnUpperSwitchForwardsTheChildsSum) {
  SwitchPipeline upper(config());
  install_network(upper);
  upper.install_job(upper_entry());
  feed(upper, 1, from_child(kNode, 100, 3), {1, 1, 1, 1}, us(1));
  const Header other = from_child(5, 101, 3);
  feed(upper, 2, other, {2, 2, 2, 2}, us(2));

  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = other;
  expected.resend = true;
  expected.collision = true;
  expected.offered_aggregator = 0 + 1;
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{2, 2, 2, 2}));
}

// What a collision offers: the aggregator free the longest, never held ones first and lowest
// first; each offer then counts as freed now, so that a burst of collisions gets different ones.
TEST(AggregatorTable, OffersTheAggregatorFreeTheLongest) {
  AggregatorTable t(4, 2);
  EXPECT_EQ(t.offer(), 0u);
  EXPECT_EQ(t.offer(), 1u);
  t.claim(2, 1, 7, 2, 0, Time{});
  EXPECT_EQ(t.offer(), 3u);
  EXPECT_EQ(t.offer(), 0u);
  t.release(2);  // freed just now: offered last
  EXPECT_EQ(t.offer(), 1u);
  EXPECT_EQ(t.offer(), 3u);
  EXPECT_EQ(t.offer(), 0u);
  EXPECT_EQ(t.offer(), 2u);
  for (std::uint32_t i = 0; i < 4; ++i) t.claim(i, 1, i, 2, 0, Time{});
  EXPECT_EQ(t.offer(), AggregatorTable::kNone);
  t.claim(1, 2, 9, 2, 0, Time{});  // taken over by another fragment: still held
  EXPECT_EQ(t.offer(), AggregatorTable::kNone);
  t.release(3);
  EXPECT_EQ(t.offer(), 3u);
  EXPECT_EQ(t.offer(), 3u);
}

// A pipeline holding slice 1 of 2 (aggregators 1, 3, 5, 7) offers by the table's own index.
TEST_F(SwitchTest, ASliceOffersAnAggregatorOfItsOwnByItsIndexInTheWholeTable) {
  SwitchPipeline slice(config(), TableSlice{1, 2});
  install_network(slice);
  slice.install_job(job_entry(kJob));
  feed(slice, 1, gradient(0, 100, 3), {1, 1, 1, 1}, us(1));
  feed(slice, 2, gradient(1, 101, 3), {2, 2, 2, 2}, us(2));
  ASSERT_EQ(sink.sent.size(), 1u);
  Header forwarded;
  ASSERT_EQ(decode_header(sink.sent[0].bytes, forwarded), DecodeError::kOk);
  EXPECT_TRUE(forwarded.collision);
  EXPECT_EQ(forwarded.offered_aggregator, 1 + 1);  // row 0 of slice 1: aggregator 1
}

TEST_F(SwitchFig7, Box3_AddsTheWholeSumOfAChildAtItsBit) {
  // A worker's packet: its node's bit among this switch's children.
  from_worker(2, gradient(2, 100, 1), {1, 1, 1, 1}, us(1));
  EXPECT_EQ(sw.table().at(1).bitmap, 0b100u);

  // Above: the whole sum of a switch below (three children) and a worker.
  SwitchPipeline upper(config());
  install_network(upper);
  upper.install_job(upper_entry());
  feed(upper, 1, from_child(kNode, 200, 2), {10, 20, 30, 40}, us(2));
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(upper.table().at(2).bitmap, 0b01u);
  EXPECT_EQ(upper.table().at(2).counter, 1);

  const Header worker = from_child(5, 200, 2);
  feed(upper, 3, worker, {1, 2, 3, 4}, us(3));
  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = worker;  // the node, bitmap and fan-in are the upper switch's now
  expected.node = kUpper;
  expected.bitmap = 0b11;
  expected.fan_in = 2;
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{11, 22, 33, 44}));
  EXPECT_EQ(upper.job_counters(kJob).completions, 1u);

  // A partial sum of a child, or a sum of a node that is not a child, is not added: it goes on.
  Header partial = from_child(kNode, 300, 4);
  partial.bitmap = 0b011;
  feed(upper, 1, partial, {5, 5, 5, 5}, us(4));
  Header grandchild = gradient(0, 300, 4);  // worker 0 is kNode's child, not kUpper's
  feed(upper, 1, grandchild, {6, 6, 6, 6}, us(5));
  ASSERT_EQ(sink.sent.size(), 3u);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(partial, Values{5, 5, 5, 5}));
  EXPECT_EQ(sink.sent[2].bytes, build_packet(grandchild, Values{6, 6, 6, 6}));
  EXPECT_FALSE(upper.table().at(4).in_use);
}

TEST_F(SwitchFig7, Box4_BitmapTestSeparatesNewChildrenFromAggregatedOnes) {
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(1));
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(2));  // already in
  from_worker(1, gradient(1, 100, 3), {2, 2, 2, 2}, us(3));  // new

  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.table().at(3).bitmap, 0b11u);
  EXPECT_EQ(sw.table().at(3).counter, 2);
  EXPECT_EQ(row(3), (Values{3, 3, 3, 3}));
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 2u);
  EXPECT_EQ(sw.job_counters(kJob).duplicates, 1u);
}

TEST_F(SwitchFig7, Box5_AddsValuesOrsBitmapIncrementsCounterAndStampsTime) {
  from_worker(0, gradient(0, 100, 3), {1, -2, 3, -4}, us(10));
  Header marked = gradient(2, 100, 3);
  marked.ecn = true;
  from_worker(2, marked, {10, 20, -30, 40}, us(25));

  EXPECT_TRUE(sink.sent.empty());
  const Aggregator& a = sw.table().at(3);
  EXPECT_EQ(row(3), (Values{11, 18, -27, 36}));
  EXPECT_EQ(a.bitmap, 0b101u);
  EXPECT_EQ(a.counter, 2);
  EXPECT_TRUE(a.ecn);
  EXPECT_EQ(a.timestamp, us(25));
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 2u);
  EXPECT_EQ(sw.job_counters(kJob).ecn_merged, 1u);
}

TEST_F(SwitchFig7, Box6_BelowFanInDropsAndAtFanInSendsTheAggregate) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  from_worker(1, gradient(1, 100, 3), {10, 20, 30, 40}, us(2));
  EXPECT_TRUE(sink.sent.empty());  // counter 2 < fan-in 3

  from_worker(2, gradient(2, 100, 3), {100, 200, 300, 400}, us(3));
  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = sum_of(gradient(2, 100, 3), 0b111);  // the last packet carries the aggregate
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{111, 222, 333, 444}));

  // Still held, so that duplicates and resends find it, until the parameter packet.
  EXPECT_TRUE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.table().at(3).counter, 3);
  EXPECT_EQ(sw.job_counters(kJob).completions, 1u);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 3u);
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 0u);
}

TEST_F(SwitchFig7, Box7_DuplicateIsDroppedAndItsEcnMerged) {
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(1));
  Header duplicate = gradient(0, 100, 3);
  duplicate.ecn = true;
  from_worker(0, duplicate, {100, 100, 100, 100}, us(2));

  EXPECT_TRUE(sink.sent.empty());
  const Aggregator& a = sw.table().at(3);
  EXPECT_EQ(row(3), (Values{1, 1, 1, 1}));
  EXPECT_EQ(a.counter, 1);
  EXPECT_TRUE(a.ecn);
  EXPECT_EQ(a.timestamp, us(1));  // a duplicate is not an aggregation
  EXPECT_EQ(sw.job_counters(kJob).duplicates, 1u);
  EXPECT_EQ(sw.job_counters(kJob).ecn_merged, 1u);

  from_worker(1, gradient(1, 100, 3), {2, 2, 2, 2}, us(3));
  from_worker(2, gradient(2, 100, 3), {3, 3, 3, 3}, us(4));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_TRUE(sink.sent[0].header().ecn);  // the duplicate's mark was not lost
  EXPECT_EQ(sink.sent[0].values(), (Values{6, 6, 6, 6}));
}

TEST_F(SwitchFig7, Box8_ParameterPacketFreesItsAggregatorAndIsMulticast) {
  for (int k = 0; k < 3; ++k) from_worker(k, gradient(k, 100, 3), {1, 2, 3, 4}, us(1));
  ASSERT_EQ(sink.sent.size(), 1u);
  sink.sent.clear();

  const std::vector<std::uint8_t> ack = build_packet(parameter(100, 3), Values{3, 6, 9, 12});
  feed(kPsPort, parameter(100, 3), {3, 6, 9, 12}, us(5));

  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
  for (const auto& s : sink.sent) EXPECT_EQ(s.bytes, ack);
  EXPECT_FALSE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 1u);
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 1u);
  EXPECT_EQ(sw.next_deadline(), kNever);
}

TEST_F(SwitchFig7, Box8_ParameterPacketOfAnotherFragmentLeavesTheAggregator) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  feed(kPsPort, parameter(101, 3), {0, 0, 0, 0}, us(2));  // same index, other seq
  sw.install_job(job_entry(kOtherJob));
  feed(kPsPort, parameter(100, 3, kOtherJob), {0, 0, 0, 0}, us(3));  // same seq, other job

  EXPECT_EQ(sink.sent.size(), 6u);  // both multicast
  EXPECT_TRUE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.table().at(3).counter, 1);
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 0u);
  EXPECT_EQ(sw.job_counters(kOtherJob).deallocations, 0u);
}

// ---------------------------------------------------------------------------------------------
// Fig. 17: the switch logic for retransmitted gradients (packet loss).

class SwitchFig17 : public SwitchTest {};

TEST_F(SwitchFig17, Box1_ResendWithoutItsAggregatorIsForwardedUnchangedAndClaimsNothing) {
  // Free aggregator: a resend never claims one.
  from_worker(0, resend(0, 100, 3), {1, 2, 3, 4}, us(1));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(resend(0, 100, 3), Values{1, 2, 3, 4}));
  EXPECT_EQ(sw.table().in_use(), 0u);

  // Held by another fragment: forwarded as it is (no collision flag), the holder untouched.
  from_worker(1, gradient(1, 200, 3), {5, 5, 5, 5}, us(2));
  from_worker(0, resend(0, 100, 3), {1, 2, 3, 4}, us(3));
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(resend(0, 100, 3), Values{1, 2, 3, 4}));
  EXPECT_EQ(sw.table().at(3).seq, 200u);
  EXPECT_EQ(sw.table().at(3).counter, 1);

  EXPECT_EQ(sw.job_counters(kJob).forwarded, 2u);
  EXPECT_EQ(sw.job_counters(kJob).collisions, 0u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 0u);
}

TEST_F(SwitchFig17, Box1_ParameterPacketWithResendFlagIsNotAResend) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  Header ack = parameter(100, 3);
  ack.resend = true;
  feed(kPsPort, ack, {1, 2, 3, 4}, us(2));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 1u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 0u);
}

TEST_F(SwitchFig17, Box2_ThePacketsPsChoosesTheNode) {
  // One switch: node kNode towards kPs, node kUpper towards kOtherPs.
  SwitchJobEntry entry = job_entry(kJob);
  entry.roles.push_back(upper_entry().roles[0]);
  entry.roles[1].ps = kOtherPs;
  sw.install_job(entry);
  from_worker(0, gradient(0, 100, 1), {1, 1, 1, 1}, us(1));
  Header upper = from_child(kNode, 200, 2);
  upper.dst = kOtherPs;
  from_worker(0, upper, {5, 5, 5, 5}, us(2));
  ASSERT_EQ(sw.table().in_use(), 2u);

  // Towards kPs: worker 1's resend flushes kNode's partial sum, and goes on beside it.
  from_worker(1, resend(1, 100, 1), {2, 2, 2, 2}, us(3));
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[0].header().node, kNode);
  EXPECT_EQ(sink.sent[0].header().bitmap, 0b01u);
  EXPECT_EQ(sink.sent[0].values(), (Values{1, 1, 1, 1}));
  EXPECT_EQ(sink.sent[1].values(), (Values{2, 2, 2, 2}));

  // Towards kOtherPs: worker 5's resend flushes kUpper's partial sum.
  Header worker5 = from_child(5, 200, 2);
  worker5.dst = kOtherPs;
  worker5.resend = true;
  from_worker(1, worker5, {7, 7, 7, 7}, us(4));
  ASSERT_EQ(sink.sent.size(), 4u);
  EXPECT_EQ(sink.sent[2].header().node, kUpper);
  EXPECT_EQ(sink.sent[2].header().bitmap, 0b01u);
  EXPECT_TRUE(sink.sent[2].header().resend);
  EXPECT_EQ(sink.sent[2].values(), (Values{5, 5, 5, 5}));
  EXPECT_EQ(sink.sent[3].bytes, build_packet(worker5, Values{7, 7, 7, 7}));

  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 2u);
}

TEST_F(SwitchFig17, Box3_AResendThisNodeCannotAddFlushesItsSumFirst) {
  SwitchPipeline upper(config());
  install_network(upper);
  upper.install_job(upper_entry());
  Header child = from_child(kNode, 100, 3);
  child.ecn = true;
  feed(upper, 1, child, {5, 5, 5, 5}, us(1));
  ASSERT_TRUE(upper.table().at(3).in_use);

  // kNode's partial sum (a resend flushed it there): not a whole child, so not added here.
  Header partial = from_child(kNode, 100, 3);
  partial.bitmap = 0b101;
  partial.resend = true;
  feed(upper, 1, partial, {7, 7, 7, 7}, us(2));

  ASSERT_EQ(sink.sent.size(), 2u);
  // First the upper node's own partial sum (kNode whole), as a resend: nothing above adds it.
  Header flushed = from_child(kNode, 100, 3);
  flushed.node = kUpper;
  flushed.bitmap = 0b01;
  flushed.fan_in = 2;
  flushed.resend = true;
  flushed.ecn = true;
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(flushed, Values{5, 5, 5, 5}));
  EXPECT_EQ(sink.sent[1].bytes, build_packet(partial, Values{7, 7, 7, 7}));
  EXPECT_FALSE(upper.table().at(3).in_use);
  EXPECT_EQ(upper.job_counters(kJob).resend_flushes, 1u);
  EXPECT_EQ(upper.job_counters(kJob).aggregations, 1u);  // the resend was not added

  // Later resends of the fragment find no aggregator and pass through.
  feed(upper, 1, partial, {7, 7, 7, 7}, us(3));
  ASSERT_EQ(sink.sent.size(), 3u);
  EXPECT_EQ(sink.sent[2].bytes, build_packet(partial, Values{7, 7, 7, 7}));
  EXPECT_EQ(upper.table().in_use(), 0u);
}

// Fig. 17 adds a child's resend that is not in yet (box 5) and sends the node's sum on. Here it
// goes on beside the node's partial sum, unadded: the PS may have its contribution already (a
// spurious timeout, a first copy that went another way), and would drop an overlapping sum whole.
TEST_F(SwitchFig17, Box4_AChildsResendGoesOnBesideTheNodesPartialSum) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  const Header h = resend(1, 100, 3);
  from_worker(1, h, {10, 20, 30, 40}, us(2));

  ASSERT_EQ(sink.sent.size(), 2u);
  Header partial = sum_of(h, 0b01);  // as a resend: no switch above claims for it
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(partial, Values{1, 2, 3, 4}));
  EXPECT_EQ(sink.sent[1].port, kPsPort);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(h, Values{10, 20, 30, 40}));
  EXPECT_FALSE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 1u);
}

TEST_F(SwitchFig17, Box5_ResendAlreadyAggregatedIsNotAddedAgain) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  from_worker(1, gradient(1, 100, 3), {10, 20, 30, 40}, us(2));
  from_worker(0, resend(0, 100, 3), {1, 2, 3, 4}, us(3));

  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = sum_of(resend(0, 100, 3), 0b11);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{11, 22, 33, 44}));
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 2u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 1u);
}

TEST_F(SwitchFig17, Box6_AResendNotYetAggregatedKeepsItsOwnMark) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  Header h = resend(2, 100, 3);
  h.ecn = true;
  from_worker(2, h, {100, 200, 300, 400}, us(2));

  ASSERT_EQ(sink.sent.size(), 2u);
  Header partial = sum_of(h, 0b001);
  partial.ecn = false;  // the aggregator's mark, not the resend's
  EXPECT_EQ(sink.sent[0].bytes, build_packet(partial, Values{1, 2, 3, 4}));
  EXPECT_EQ(sink.sent[1].bytes, build_packet(h, Values{100, 200, 300, 400}));
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 1u);
  EXPECT_EQ(sw.job_counters(kJob).ecn_merged, 0u);
}

TEST_F(SwitchFig17, Box7_FlushWritesTheAggregateFreesAndLaterResendsPassThrough) {
  Header marked = gradient(0, 100, 3);
  marked.ecn = true;
  from_worker(0, marked, {1, 2, 3, 4}, us(1));
  from_worker(1, resend(1, 100, 3), {10, 20, 30, 40}, us(2));

  ASSERT_EQ(sink.sent.size(), 2u);
  Header expected = sum_of(resend(1, 100, 3), 0b01);
  expected.ecn = true;  // the aggregator's mark goes with its values
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{1, 2, 3, 4}));
  EXPECT_EQ(sink.sent[1].bytes, build_packet(resend(1, 100, 3), Values{10, 20, 30, 40}));
  EXPECT_FALSE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.next_deadline(), kNever);

  // Worker 2's resend finds no aggregator: forwarded unchanged, nothing claimed.
  from_worker(2, resend(2, 100, 3), {100, 200, 300, 400}, us(3));
  ASSERT_EQ(sink.sent.size(), 3u);
  EXPECT_EQ(sink.sent[2].bytes, build_packet(resend(2, 100, 3), Values{100, 200, 300, 400}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 1u);
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 1u);
}

TEST_F(SwitchFig17, Box7_ResendAfterCompletionSendsTheWholeAggregateAgain) {
  for (int k = 0; k < 3; ++k) from_worker(k, gradient(k, 100, 3), {k + 1, 0, 0, 0}, us(1));
  ASSERT_EQ(sink.sent.size(), 1u);
  from_worker(1, resend(1, 100, 3), {2, 0, 0, 0}, us(2));  // the parameter packet was lost
  ASSERT_EQ(sink.sent.size(), 2u);
  Header expected = sum_of(resend(1, 100, 3), 0b111);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(expected, Values{6, 0, 0, 0}));
  EXPECT_EQ(sw.table().in_use(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Admission and unknown jobs.

// Scale per fragment: the aggregate carries the exponent of its values and the largest magnitude
// of its members; a member at another exponent saturates it (sticky), so the PS takes the
// float32 path for that fragment.
TEST_F(SwitchTest, AggregatesCarryTheExponentAndLargestMagnitudeAndMixedExponentsSaturate) {
  sw.install_job(SwitchJobEntry{kJob, {0, 1, 2, 3}, job_entry(kJob).roles, {}});
  auto at = [](Header h, std::int16_t exponent, std::int16_t magnitude) {
    h.scale_exponent = exponent;
    h.magnitude_or_next = magnitude;
    return h;
  };
  from_worker(0, at(gradient(0, 100, 3), 24, -2), {1, 2, 3, 4}, us(1));
  from_worker(1, at(gradient(1, 100, 3), 24, 5), {1, 2, 3, 4}, us(2));
  from_worker(2, at(gradient(2, 100, 3), 24, kNoMagnitude), {1, 2, 3, 4}, us(3));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].header().scale_exponent, 24);
  EXPECT_EQ(sink.sent[0].header().magnitude_or_next, 5);
  EXPECT_EQ(sink.sent[0].values(), (Values{3, 6, 9, 12}));

  from_worker(0, at(gradient(0, 101, 5), 24, 0), {1, 2, 3, 4}, us(4));
  from_worker(1, at(gradient(1, 101, 5), 23, 0), {1, 2, 3, 4}, us(5));
  from_worker(2, at(gradient(2, 101, 5), 24, 0), {1, 2, 3, 4}, us(6));
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[1].values()[0], kSaturatedMax) << "values at another scale cannot be added";
}

TEST_F(SwitchTest, PacketOnPortNotAdmittedIsCountedAndDropped) {
  sw.install_job(SwitchJobEntry{kJob, {0, 1}, job_entry(kJob).roles, {}});
  from_worker(1, gradient(1, 100, 3), {1, 2, 3, 4}, us(1));  // port 2
  feed(3, parameter(100, 3), {0, 0, 0, 0}, us(2));           // port 3
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.counters().not_admitted, 2u);

  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(3));  // port 1: admitted
  EXPECT_EQ(sw.table().in_use(), 1u);
  EXPECT_EQ(sw.counters().not_admitted, 2u);
  EXPECT_EQ(sw.counters().packets, 3u);
}

TEST_F(SwitchTest, InstallJobReplacesTheEntry) {
  sw.install_job(SwitchJobEntry{kJob, {0}, {}, {}});
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  EXPECT_EQ(sw.counters().not_admitted, 1u);
  feed(kPsPort, gradient(0, 100, 3), {1, 2, 3, 4}, us(2));  // admitted, but no role any more
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sw.table().in_use(), 0u);
}

TEST_F(SwitchTest, UnknownJobIsCountedAndDropped) {
  from_worker(0, gradient(0, 100, 3, 42), {1, 2, 3, 4}, us(1));
  feed(kPsPort, parameter(100, 3, 42), {1, 2, 3, 4}, us(2));
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.counters().unknown_job, 2u);
  EXPECT_EQ(sw.job_counters(42).forwarded, 0u);
  EXPECT_EQ(sw.all_job_counters().count(42), 0u);  // spoofed ids leave no per-job state
}

// ---------------------------------------------------------------------------------------------
// Forwarding.

TEST_F(SwitchTest, NonAtpSwitchOnlyForwardsByDst) {
  SwitchConfig plain = config();
  plain.atp_capable = false;
  SwitchPipeline s(plain);
  install_network(s);
  s.install_job(SwitchJobEntry{kJob, {1}, job_entry(kJob).roles, {}});  // ignored: no admission, no role
  EXPECT_EQ(s.table().size(), 0u);

  feed(s, 2, gradient(1, 100, 3), {1, 2, 3, 4}, us(1));
  feed(s, 3, gradient(2, 100, 3), {5, 6, 7, 8}, us(2));
  feed(s, 1, gradient(0, 100, 3, 42), {9, 9, 9, 9}, us(3));  // a job it never heard of
  feed(s, 0, parameter(100, 3), {6, 8, 10, 12}, us(4));      // multicast group

  ASSERT_EQ(sink.sent.size(), 6u);
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{0, 0, 0, 1, 2, 3}));
  EXPECT_EQ(sink.sent[0].bytes, build_packet(gradient(1, 100, 3), Values{1, 2, 3, 4}));
  EXPECT_EQ(sink.sent[1].bytes, build_packet(gradient(2, 100, 3), Values{5, 6, 7, 8}));
  EXPECT_EQ(sink.sent[2].bytes, build_packet(gradient(0, 100, 3, 42), Values{9, 9, 9, 9}));
  for (std::size_t k = 3; k < 6; ++k) {
    EXPECT_EQ(sink.sent[k].bytes, build_packet(parameter(100, 3), Values{6, 8, 10, 12}));
  }
  EXPECT_EQ(s.job_counters(kJob).forwarded, 3u);
  EXPECT_EQ(s.job_counters(kJob).aggregations, 0u);
  EXPECT_EQ(s.all_job_counters().count(42), 0u);
  EXPECT_EQ(s.counters().unknown_job, 0u);
  EXPECT_EQ(s.counters().not_admitted, 0u);
  EXPECT_EQ(s.next_deadline(), kNever);

  // It still never sends a multicast back out of its ingress port.
  sink.sent.clear();
  feed(s, 2, parameter(100, 3), {6, 8, 10, 12}, us(5));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 3}));
}

TEST_F(SwitchTest, MulticastExcludesTheIngressPort) {
  sw.add_multicast_group(multicast_group_address(kJob), {0, 1, 2, 3});
  feed(kPsPort, parameter(100, 3), {1, 2, 3, 4}, us(1));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
  sink.sent.clear();
  feed(2, parameter(101, 4), {1, 2, 3, 4}, us(2));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{0, 1, 3}));
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 2u);
}

TEST_F(SwitchTest, RemovedMulticastGroupIsNoRoute) {
  SwitchConfig plain = config();
  plain.atp_capable = false;  // forwards by dst alone: only the group decides where a result goes
  SwitchPipeline s(plain);
  install_network(s);
  feed(s, kPsPort, parameter(100, 3), {1, 2, 3, 4}, us(1));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));

  EXPECT_TRUE(s.remove_multicast_group(multicast_group_address(kJob)));
  EXPECT_FALSE(s.remove_multicast_group(multicast_group_address(kJob)));
  sink.sent.clear();
  feed(s, kPsPort, parameter(101, 4), {1, 2, 3, 4}, us(2));
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(s.counters().no_route, 1u);

  // The other job's group is untouched.
  feed(s, kPsPort, parameter(100, 3, kOtherJob), {1, 2, 3, 4}, us(3));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
}

TEST_F(SwitchTest, RemovedRouteIsNoRoute) {
  Header ack = parameter(100, 3);
  ack.dst = kWorkers[1];  // unicast, so only the route decides where it goes
  feed(kPsPort, ack, {1, 2, 3, 4}, us(1));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{2}));

  EXPECT_TRUE(sw.remove_route(kWorkers[1]));
  EXPECT_FALSE(sw.remove_route(kWorkers[1]));
  sink.sent.clear();
  feed(kPsPort, ack, {1, 2, 3, 4}, us(2));
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.counters().no_route, 1u);

  // The other hosts' routes are untouched, and the route can be installed again.
  ack.dst = kWorkers[2];
  feed(kPsPort, ack, {1, 2, 3, 4}, us(3));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{3}));
  sw.add_route(kWorkers[1], 2);
  sink.sent.clear();
  ack.dst = kWorkers[1];
  feed(kPsPort, ack, {1, 2, 3, 4}, us(4));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{2}));
}

TEST_F(SwitchTest, UnicastParameterPacketIsForwardedAndDeallocates) {
  for (int k = 0; k < 3; ++k) from_worker(k, gradient(k, 100, 3), {1, 2, 3, 4}, us(1));
  sink.sent.clear();
  Header ack = parameter(100, 3);
  ack.dst = kWorkers[1];  // a result re-sent to one worker
  feed(kPsPort, ack, {3, 6, 9, 12}, us(2));

  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].port, 2);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(ack, Values{3, 6, 9, 12}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 1u);
}

TEST_F(SwitchTest, NoRouteIsCountedAndDropped) {
  Header to_nowhere = gradient(0, 100, 3);
  to_nowhere.dst = 0x0A0000FF;  // no route and no role
  from_worker(0, to_nowhere, {1, 2, 3, 4}, us(1));
  sw.install_job(job_entry(11));  // no multicast group installed for job 11
  feed(kPsPort, parameter(100, 3, 11), {1, 2, 3, 4}, us(2));

  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.counters().no_route, 2u);
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 0u);
  EXPECT_EQ(sw.job_counters(11).forwarded, 0u);
}

TEST_F(SwitchTest, GradientWithoutARoleHereIsForwardedUntouched) {
  Header other_ps = gradient(0, 100, 3);
  other_ps.dst = kOtherPs;
  from_worker(0, other_ps, {1, 2, 3, 4}, us(1));
  Header other_level = gradient(1, 100, 3);
  other_level.node = 30;  // a node this switch's node is not the parent of
  from_worker(1, other_level, {5, 6, 7, 8}, us(2));

  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(other_ps, Values{1, 2, 3, 4}));
  EXPECT_EQ(sink.sent[1].bytes, build_packet(other_level, Values{5, 6, 7, 8}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 2u);
}

TEST_F(SwitchTest, FloatPayloadIsForwardedUntouched) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  Header as_float = gradient(1, 100, 3);
  as_float.float_payload = true;
  as_float.resend = true;
  from_worker(1, as_float, {0x3F800000, 0, 0, 0}, us(2));  // 1.0f
  as_float.resend = false;
  as_float.seq = 101;  // would claim a free aggregator if it were aggregated
  as_float.aggregator_index = 4;
  from_worker(1, as_float, {0x40000000, 0, 0, 0}, us(3));  // 2.0f

  ASSERT_EQ(sink.sent.size(), 2u);
  Header first = as_float;
  first.resend = true;
  first.seq = 100;
  first.aggregator_index = 3;
  EXPECT_EQ(sink.sent[0].bytes, build_packet(first, Values{0x3F800000, 0, 0, 0}));
  EXPECT_EQ(sink.sent[1].bytes, build_packet(as_float, Values{0x40000000, 0, 0, 0}));
  EXPECT_EQ(sw.table().in_use(), 1u);
  EXPECT_EQ(sw.table().at(3).counter, 1);
  EXPECT_EQ(sw.table().at(3).bitmap, 0b1u);
  EXPECT_EQ(row(3), (Values{1, 2, 3, 4}));
  EXPECT_EQ(sw.job_counters(kJob).forwarded, 2u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 0u);
}

// ---------------------------------------------------------------------------------------------
// Aggregation details.

TEST_F(SwitchTest, AggregatorIndexIsTakenModuloTableSize) {
  from_worker(0, gradient(0, 100, 0xFFFFFFFFu), {1, 1, 1, 1}, us(1));  // % 8 = 7
  from_worker(0, gradient(0, 101, 8 + 3), {2, 2, 2, 2}, us(2));        // % 8 = 3
  EXPECT_EQ(sw.table().at(7).seq, 100u);
  EXPECT_EQ(sw.table().at(3).seq, 101u);
  feed(kPsPort, parameter(101, 3), {0, 0, 0, 0}, us(3));  // index 3 is the same aggregator as 11
  EXPECT_FALSE(sw.table().at(3).in_use);
  EXPECT_TRUE(sw.table().at(7).in_use);
}

// A table in 4 slices (4 dataplane threads): slice k holds aggregators k, k + 4, ... at rows 0,
// 1, ...; each slice aggregates its fragments as the whole table would, and sends the same.
TEST_F(SwitchTest, ASliceHoldsEveryFourthAggregatorInItsOwnRows) {
  constexpr std::uint32_t kSlices = 4;
  EXPECT_EQ(slice_of(13, kTableSize, kSlices), 1u);  // 13 % 8 = 5, 5 % 4 = 1
  std::vector<SwitchPipeline> slices;
  for (std::uint32_t k = 0; k < kSlices; ++k) {
    slices.emplace_back(config(), TableSlice{k, kSlices});
    install_network(slices.back());
    slices.back().install_job(job_entry(kJob));
    EXPECT_EQ(slices.back().table().size(), kTableSize / kSlices);
  }
  RecordingPortSink whole_sink;
  for (Seq seq = 0; seq < 2 * kTableSize; ++seq) {
    const std::uint32_t index = seq * 5 + 1;  // every aggregator, twice, in a scrambled order
    for (int w = 0; w < 3; ++w) {
      const Values values{static_cast<std::int32_t>(seq), w, -w, 1};
      std::vector<std::uint8_t> packet = build_packet(gradient(w, seq, index), values);
      std::vector<std::uint8_t> copy = packet;
      sw.process(static_cast<PortId>(w + 1), packet, us(seq), whole_sink);
      slices[slice_of(index, kTableSize, kSlices)].process(static_cast<PortId>(w + 1), copy, us(seq), sink);
    }
    const std::uint32_t row = index % kTableSize / kSlices;
    EXPECT_EQ(slices[slice_of(index, kTableSize, kSlices)].table().at(row).seq, seq);
    std::vector<std::uint8_t> result = build_packet(parameter(seq, index), Values{1, 2, 3, 4});
    std::vector<std::uint8_t> copy = result;
    sw.process(kPsPort, result, us(seq), whole_sink);
    slices[slice_of(index, kTableSize, kSlices)].process(kPsPort, copy, us(seq), sink);
  }
  ASSERT_EQ(sink.sent.size(), whole_sink.sent.size());
  for (std::size_t i = 0; i < sink.sent.size(); ++i) {
    EXPECT_EQ(sink.sent[i].port, whole_sink.sent[i].port) << "send " << i;
    EXPECT_EQ(sink.sent[i].bytes, whole_sink.sent[i].bytes) << "send " << i;
  }
  std::uint64_t completions = 0;
  for (const SwitchPipeline& slice : slices) completions += slice.job_counters(kJob).completions;
  EXPECT_EQ(completions, 2 * kTableSize);
  EXPECT_EQ(sw.job_counters(kJob).completions, 2 * kTableSize);
}

TEST_F(SwitchTest, SaturatingAddsStickAtBothBounds) {
  const Values w0{kSaturatedMax - 1, kSaturatedMin + 1, 7, -7, 100, -100};
  const Values w1{1, -1, kSaturatedMax, kSaturatedMin, 1, 1};
  const Values w2{-10, 10, -1, 1, 1, 1};
  from_worker(0, gradient(0, 100, 3), w0, us(1));
  from_worker(1, gradient(1, 100, 3), w1, us(2));
  // Exactly at the bounds, and a saturated contribution saturates the sum.
  EXPECT_EQ(row(3), (Values{kSaturatedMax, kSaturatedMin, kSaturatedMax, kSaturatedMin, 101, -99}));
  from_worker(2, gradient(2, 100, 3), w2, us(3));

  // Adding the other sign does not bring a saturated sum back: the PS must see the overflow.
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].values(), (Values{kSaturatedMax, kSaturatedMin, kSaturatedMax, kSaturatedMin, 102, -98}));
}

TEST_F(SwitchTest, SaturatingAddsClampPastBothBounds) {
  from_worker(0, gradient(0, 100, 3), {kSaturatedMax - 5, kSaturatedMin + 5}, us(1));
  from_worker(1, gradient(1, 100, 3), {1000, -1000}, us(2));
  from_worker(2, gradient(2, 100, 3), {1, -1}, us(3));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].values(), (Values{kSaturatedMax, kSaturatedMin}));
}

TEST_F(SwitchTest, EcnIsMergedAndCarriedIntoTheCompletedPacket) {
  Header marked = gradient(0, 100, 3);
  marked.ecn = true;
  from_worker(0, marked, {1, 1, 1, 1}, us(1));
  from_worker(1, gradient(1, 100, 3), {1, 1, 1, 1}, us(2));
  from_worker(2, gradient(2, 100, 3), {1, 1, 1, 1}, us(3));  // the completing packet is unmarked

  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = sum_of(gradient(2, 100, 3), 0b111);
  expected.ecn = true;
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{3, 3, 3, 3}));
  EXPECT_EQ(sw.job_counters(kJob).ecn_merged, 1u);

  // A fragment no packet of which was marked completes unmarked.
  for (int k = 0; k < 3; ++k) from_worker(k, gradient(k, 101, 4), {1, 1, 1, 1}, us(4));
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_FALSE(sink.sent[1].header().ecn);
}

TEST_F(SwitchTest, ValueCountDifferentFromTheAggregatorIsMalformed) {
  from_worker(0, gradient(0, 100, 3), {1, 2, 3, 4}, us(1));
  from_worker(1, gradient(1, 100, 3), {1, 2, 3}, us(2));
  from_worker(1, resend(1, 100, 3), {1, 2, 3, 4, 5}, us(3));
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.counters().malformed, 2u);
  EXPECT_EQ(sw.table().at(3).counter, 1);
  EXPECT_EQ(row(3), (Values{1, 2, 3, 4}));
}

TEST_F(SwitchTest, TooWideGradientIsCountedAndDropped) {
  const Values nine(kWidth + 1, 1);
  from_worker(0, gradient(0, 100, 3), nine, us(1));
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.counters().too_wide, 1u);
  EXPECT_EQ(sw.table().in_use(), 0u);

  // A gradient this switch only forwards is not limited by its aggregator width.
  Header other_ps = gradient(0, 100, 3);
  other_ps.dst = kOtherPs;
  from_worker(0, other_ps, nine, us(2));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(other_ps, nine));
  EXPECT_EQ(sw.counters().too_wide, 1u);
}

// Every fan-in from 1 to 32 completes exactly at its last child, whatever the arrival order.
class SwitchFanIn : public SwitchTest, public ::testing::WithParamInterface<int> {};

TEST_P(SwitchFanIn, CompletesExactlyAtFanIn) {
  const int fan_in = GetParam();
  AggregationRole role{kPs, kNode, {}};  // workers at nodes 100, 101, ...
  for (int k = 0; k < fan_in; ++k) role.children.push_back({static_cast<std::uint16_t>(100 + k), 1});
  sw.install_job({kJob, {0, 1, 2, 3}, {role}, {}});
  std::int64_t expected_sum = 0;
  std::uint32_t expected_bitmap = 0;
  for (int n = 0; n < fan_in; ++n) {
    const int position = fan_in - 1 - n;  // highest bit first
    Header h = gradient(0, 100, 5);
    h.node = static_cast<std::uint16_t>(100 + position);
    feed(1, h, {position + 1, -(position + 1)}, us(n));
    expected_sum += position + 1;
    expected_bitmap |= 1u << position;
    ASSERT_EQ(sink.sent.size(), n + 1 == fan_in ? 1u : 0u) << "after " << n + 1 << " of " << fan_in;
  }
  const Header out = sink.sent[0].header();
  EXPECT_EQ(out.node, kNode);
  EXPECT_EQ(out.bitmap, expected_bitmap);
  EXPECT_EQ(out.fan_in, fan_in);
  EXPECT_EQ(sink.sent[0].values(),
            (Values{static_cast<std::int32_t>(expected_sum), static_cast<std::int32_t>(-expected_sum)}));
  EXPECT_EQ(sw.job_counters(kJob).completions, 1u);
}

INSTANTIATE_TEST_SUITE_P(FanIns, SwitchFanIn, ::testing::Values(1, 2, 3, 8, 31, 32));

// ---------------------------------------------------------------------------------------------
// Reclaim by timestamp timeout (§3.7) and the deadline.

TEST_F(SwitchTest, SweepReclaimsOnlyStaleAggregators) {
  from_worker(0, gradient(0, 100, 1), {1, 1, 1, 1}, us(0));
  from_worker(0, gradient(0, 101, 2), {1, 1, 1, 1}, us(600));

  sw.on_timeout(us(999), sink);
  EXPECT_EQ(sw.table().in_use(), 2u);
  EXPECT_TRUE(sink.sent.empty());
  sw.on_timeout(us(1000), sink);  // exactly one timeout after its last aggregation
  EXPECT_FALSE(sw.table().at(1).in_use);
  EXPECT_TRUE(sw.table().at(2).in_use);
  EXPECT_EQ(sw.counters().reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 1u);
  ASSERT_EQ(sink.sent.size(), 1u);
  expect_reclaimed_partial(sink.sent[0], 100, 0b1, {1, 1, 1, 1});

  sw.on_timeout(us(1600), sink);
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.counters().reclaimed, 2u);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 2u);
  EXPECT_EQ(sw.next_deadline(), kNever);
  ASSERT_EQ(sink.sent.size(), 2u);
  expect_reclaimed_partial(sink.sent[1], 101, 0b1, {1, 1, 1, 1});
}

// A complete sum went on when its last child came; reclaimed (its parameter packet was lost),
// it sends nothing more.
TEST_F(SwitchTest, ACompleteAggregatorIsReclaimedSilently) {
  for (int k = 0; k < 3; ++k) from_worker(k, gradient(k, 100, 1), {1, 2, 3, 4}, us(10 * k));
  ASSERT_EQ(sink.sent.size(), 1u);
  sw.on_timeout(us(2000), sink);
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.counters().reclaimed, 1u);
  EXPECT_EQ(sink.sent.size(), 1u);
}

// A child later than the reclaim timeout (a rank still computing): the others' partial sum went
// on to the PS, and the late packet follows it there as a resend instead of waiting alone in a
// fresh aggregator for packets gone ahead. Once the parameter packet passed, the fragment is
// forgotten.
TEST_F(SwitchTest, ALateChildOfAReclaimedFragmentFollowsItsPartialSum) {
  auto allocated = [](Header h) {
    h.allocate = true;
    return h;
  };
  from_worker(0, allocated(gradient(0, 100, 5)), {1, 1, 1, 1}, us(0));
  from_worker(1, allocated(gradient(1, 100, 5)), {2, 2, 2, 2}, us(10));
  sw.on_timeout(us(1010), sink);
  ASSERT_EQ(sink.sent.size(), 1u);
  expect_reclaimed_partial(sink.sent[0], 100, 0b11, {3, 3, 3, 3});

  from_worker(2, allocated(gradient(2, 100, 5)), {4, 4, 4, 4}, us(1500));
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[1].port, kPsPort);
  Header late = allocated(gradient(2, 100, 5));
  late.resend = true;
  EXPECT_EQ(sink.sent[1].bytes, build_packet(late, Values{4, 4, 4, 4}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 2u);

  Header result = allocated(parameter(100, 5));
  feed(kPsPort, result, {7, 7, 7, 7}, us(1600));
  from_worker(0, allocated(gradient(0, 100, 5)), {1, 1, 1, 1}, us(1700));  // the same seq again: aggregated
  EXPECT_EQ(sw.table().in_use(), 1u);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 3u);
}

TEST_F(SwitchTest, GradientTouchingAStaleAggregatorReclaimsItLazily) {
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(0));
  from_worker(1, gradient(1, 101, 3), {2, 2, 2, 2}, us(999));  // still fresh: a collision
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_TRUE(sink.sent[0].header().collision);

  from_worker(1, gradient(1, 101, 3), {2, 2, 2, 2}, us(1000));  // stale: free, claimed
  ASSERT_EQ(sink.sent.size(), 2u);
  expect_reclaimed_partial(sink.sent[1], 100, 0b1, {1, 1, 1, 1});
  const Aggregator& a = sw.table().at(3);
  EXPECT_EQ(a.seq, 101u);
  EXPECT_EQ(a.bitmap, 0b10u);
  EXPECT_EQ(a.counter, 1);
  EXPECT_EQ(a.timestamp, us(1000));
  EXPECT_EQ(row(3), (Values{2, 2, 2, 2}));
  EXPECT_EQ(sw.counters().reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 1u);
}

TEST_F(SwitchTest, StaleResendOfItsOwnFragmentFollowsTheReclaimedPartialSum) {
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(0));
  from_worker(1, resend(1, 100, 3), {2, 2, 2, 2}, us(1000));
  ASSERT_EQ(sink.sent.size(), 2u);
  expect_reclaimed_partial(sink.sent[0], 100, 0b1, {1, 1, 1, 1});
  EXPECT_EQ(sink.sent[1].bytes, build_packet(resend(1, 100, 3), Values{2, 2, 2, 2}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 0u);
}

TEST_F(SwitchTest, StaleReclaimIsCountedForTheJobThatHeldIt) {
  sw.install_job(job_entry(kOtherJob));
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(0));                 // job 7 at index 3
  from_worker(1, gradient(1, 500, 11, kOtherJob), {2, 2, 2, 2}, us(1500));  // job 9, 11 % 8 = 3

  EXPECT_EQ(sw.table().at(3).job, kOtherJob);
  EXPECT_EQ(sw.table().at(3).seq, 500u);
  EXPECT_EQ(sw.counters().reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kOtherJob).reclaimed, 0u);
  EXPECT_EQ(sw.job_counters(kOtherJob).aggregations, 1u);
  EXPECT_EQ(sw.job_counters(kOtherJob).collisions, 0u);
}

TEST_F(SwitchTest, ParameterPacketReclaimsAStaleAggregatorOfAnotherFragment) {
  from_worker(0, gradient(0, 100, 3), {1, 1, 1, 1}, us(0));
  feed(kPsPort, parameter(99, 3), {0, 0, 0, 0}, us(500));  // fresh: left alone
  EXPECT_TRUE(sw.table().at(3).in_use);
  feed(kPsPort, parameter(99, 3), {0, 0, 0, 0}, us(1200));  // stale: reclaimed (§3.7)
  EXPECT_FALSE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.counters().reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 1u);
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 0u);
  ASSERT_EQ(sink.sent.size(), 7u);  // both parameter packets multicast, and seq 100's partial sum
  expect_reclaimed_partial(sink.sent[3], 100, 0b1, {1, 1, 1, 1});
}

TEST_F(SwitchTest, NextDeadlineIsTheOldestAggregationPlusTheTimeout) {
  EXPECT_EQ(sw.next_deadline(), kNever);
  from_worker(0, gradient(0, 100, 1), {1, 1, 1, 1}, us(100));
  EXPECT_EQ(sw.next_deadline(), us(1100));
  from_worker(0, gradient(0, 101, 2), {1, 1, 1, 1}, us(300));
  EXPECT_EQ(sw.next_deadline(), us(1100));
  from_worker(1, gradient(1, 100, 1), {1, 1, 1, 1}, us(500));  // refreshes index 1
  EXPECT_EQ(sw.next_deadline(), us(1300));                     // index 2 is now the oldest
  from_worker(1, gradient(1, 100, 1), {1, 1, 1, 1}, us(700));  // a duplicate refreshes nothing
  EXPECT_EQ(sw.next_deadline(), us(1300));

  sw.on_timeout(us(1300), sink);  // the runtime calls at the deadline: index 2 goes
  EXPECT_FALSE(sw.table().at(2).in_use);
  EXPECT_EQ(sw.next_deadline(), us(1500));
  feed(kPsPort, parameter(100, 1), {0, 0, 0, 0}, us(1400));
  EXPECT_EQ(sw.next_deadline(), kNever);
}

TEST_F(SwitchTest, ZeroReclaimTimeoutNeverReclaims) {
  SwitchConfig c = config();
  c.reclaim_timeout = Duration::zero();
  SwitchPipeline s(c);
  install_network(s);
  s.install_job(job_entry(kJob));
  feed(s, 1, gradient(0, 100, 3), {1, 1, 1, 1}, us(0));
  EXPECT_EQ(s.next_deadline(), kNever);
  s.on_timeout(time_from_ns(std::int64_t{1} << 62), sink);
  feed(s, 2, gradient(1, 100, 3), {1, 1, 1, 1}, time_from_ns(std::int64_t{1} << 62));
  EXPECT_EQ(s.table().at(3).counter, 2);
  EXPECT_EQ(s.counters().reclaimed, 0u);
}

// ---------------------------------------------------------------------------------------------
// Jobs, bad input, two switches, allocation.

TEST_F(SwitchTest, RemoveJobFreesItsAggregatorsAndKeepsItsCounters) {
  sw.install_job(job_entry(kOtherJob));
  from_worker(0, gradient(0, 100, 1), {1, 1, 1, 1}, us(1));
  from_worker(0, gradient(0, 101, 2), {1, 1, 1, 1}, us(2));
  from_worker(0, gradient(0, 500, 3, kOtherJob), {1, 1, 1, 1}, us(3));
  ASSERT_EQ(sw.table().in_use(), 3u);

  EXPECT_TRUE(sw.remove_job(kJob));
  EXPECT_EQ(sw.table().in_use(), 1u);
  EXPECT_EQ(sw.table().at(3).job, kOtherJob);
  EXPECT_EQ(sw.next_deadline(), us(3) + kTimeout);
  EXPECT_FALSE(sw.remove_job(kJob));
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 2u);

  from_worker(1, gradient(1, 100, 1), {1, 1, 1, 1}, us(4));
  EXPECT_EQ(sw.counters().unknown_job, 1u);
  EXPECT_EQ(sw.table().in_use(), 1u);
}

TEST_F(SwitchTest, MalformedAndTruncatedPacketsAreCounted) {
  std::vector<std::uint8_t> valid = build_packet(gradient(0, 100, 3), Values{1, 2, 3, 4});
  std::vector<std::uint8_t> empty;
  std::vector<std::uint8_t> short_header(valid.begin(), valid.begin() + 20);
  std::vector<std::uint8_t> truncated_values(valid.begin(), valid.end() - 2);
  std::vector<std::uint8_t> bad_magic = valid;
  bad_magic[0] = 0;
  std::vector<std::uint8_t> bad_version = valid;
  bad_version[2] = 1;
  std::vector<std::uint8_t> unknown_rina_kind = valid;
  unknown_rina_kind[3] |= 0x80;
  unknown_rina_kind[21] = kRinaKinds;
  for (auto* p : {&empty, &short_header, &truncated_values, &bad_magic, &bad_version, &unknown_rina_kind}) {
    sw.process(1, *p, us(1), sink);
  }
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.counters().malformed, 6u);
  EXPECT_EQ(sw.counters().packets, 6u);
  EXPECT_EQ(sw.table().in_use(), 0u);

  SwitchConfig plain = config();
  plain.atp_capable = false;
  SwitchPipeline s(plain);
  install_network(s);
  s.process(1, truncated_values, us(1), sink);
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(s.counters().malformed, 1u);
}

TEST_F(SwitchTest, GradientWithBadBitmapOrFanInIsMalformedAndClaimsNothing) {
  // A worker's packet: bitmap 1, fan-in 1, as the role says of that child.
  Header no_bit = gradient(0, 100, 3);
  no_bit.bitmap = 0;
  Header two_bits = gradient(0, 100, 3);
  two_bits.bitmap = 0b11;
  Header zero_fan_in = gradient(0, 100, 3);
  zero_fan_in.fan_in = 0;
  Header fan_in_33 = gradient(0, 100, 3);
  fan_in_33.fan_in = 33;
  Header bad_resend = resend(0, 100, 3);
  bad_resend.bitmap = 0;
  for (const Header& h : {no_bit, two_bits, zero_fan_in, fan_in_33, bad_resend}) {
    from_worker(0, h, {1, 2, 3, 4}, us(1));
  }
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.counters().malformed, 5u);
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 0u);
}

// Rack A (node 2) aggregates workers 0 and 1 (nodes 3, 4); rack B, the PS's (node 1), aggregates
// A's sum and worker 2 (node 5). Then the PS's parameter packet frees both.
class SwitchTwoLevel : public SwitchTest {
 protected:
  SwitchTwoLevel() : rack_a(config()), rack_b(config()) {
    // Rack A: port 0 up to B, ports 1-2 workers 0-1.
    rack_a.add_route(kPs, 0);
    rack_a.add_route(kWorkers[0], 1);
    rack_a.add_route(kWorkers[1], 2);
    rack_a.add_route(kWorkers[2], 0);
    rack_a.add_multicast_group(multicast_group_address(kJob), {1, 2});
    rack_a.install_job(SwitchJobEntry{kJob, {0, 1, 2}, {AggregationRole{kPs, 2, {{3, 1}, {4, 1}}}}, {}});
    // Rack B: port 0 the PS, port 1 down to A, port 2 worker 2.
    rack_b.add_route(kPs, 0);
    rack_b.add_route(kWorkers[0], 1);
    rack_b.add_route(kWorkers[1], 1);
    rack_b.add_route(kWorkers[2], 2);
    rack_b.add_multicast_group(multicast_group_address(kJob), {1, 2});
    rack_b.install_job(SwitchJobEntry{kJob, {0, 1, 2}, {AggregationRole{kPs, 1, {{2, 2}, {5, 1}}}}, {}});
  }
  static Header member(int worker, Seq seq, std::uint32_t index) {
    Header h = gradient(worker, seq, index);
    h.node = static_cast<std::uint16_t>(3 + worker);
    return h;
  }
  static Header singleton(Seq seq, std::uint32_t index) {
    Header h = gradient(2, seq, index);
    h.node = 5;
    return h;
  }
  // `h` as node `node` (fan-in 2) sends it on with its children `bitmap`.
  static Header sum_at(Header h, std::uint16_t node, std::uint32_t bitmap) {
    h.node = node;
    h.bitmap = bitmap;
    h.fan_in = 2;
    return h;
  }
  // Moves what rack A sent on its uplink into rack B (and clears the sink).
  void a_to_b(Time now) {
    std::vector<RecordingPortSink::Sent> sent = std::move(sink.sent);
    sink.sent.clear();
    for (auto& s : sent) {
      ASSERT_EQ(s.port, 0);
      rack_b.process(1, s.bytes, now, sink);
    }
  }

  SwitchPipeline rack_a, rack_b;
};

TEST_F(SwitchTwoLevel, FirstLevelCompletionThenSecondLevelCompletion) {
  feed(rack_a, 1, member(0, 100, 3), {1, 2, 3, 4}, us(1));
  feed(rack_a, 2, member(1, 100, 3), {10, 20, 30, 40}, us(2));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(sum_at(member(1, 100, 3), 2, 0b11), Values{11, 22, 33, 44}));
  a_to_b(us(3));
  EXPECT_TRUE(sink.sent.empty());  // B waits for worker 2
  EXPECT_EQ(rack_b.table().at(3).bitmap, 0b01u);

  feed(rack_b, 2, singleton(100, 3), {100, 200, 300, 400}, us(4));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].port, 0);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(sum_at(singleton(100, 3), 1, 0b11), Values{111, 222, 333, 444}));
  EXPECT_EQ(rack_a.job_counters(kJob).completions, 1u);
  EXPECT_EQ(rack_b.job_counters(kJob).completions, 1u);
  sink.sent.clear();

  // The PS's result travels B -> A -> workers and frees both aggregators.
  const std::vector<std::uint8_t> ack = build_packet(parameter(100, 3), Values{111, 222, 333, 444});
  feed(rack_b, 0, parameter(100, 3), {111, 222, 333, 444}, us(10));
  ASSERT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2}));
  std::vector<std::uint8_t> to_a = sink.sent[0].bytes;
  sink.sent.clear();
  rack_a.process(0, to_a, us(11), sink);
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2}));
  for (const auto& s : sink.sent) EXPECT_EQ(s.bytes, ack);
  EXPECT_EQ(rack_a.table().in_use(), 0u);
  EXPECT_EQ(rack_b.table().in_use(), 0u);
  EXPECT_EQ(rack_a.job_counters(kJob).deallocations, 1u);
  EXPECT_EQ(rack_b.job_counters(kJob).deallocations, 1u);
}

TEST_F(SwitchTwoLevel, AResendGoesOnBesideThePartialsItFlushesAtEveryLevel) {
  feed(rack_a, 1, member(0, 100, 3), {1, 1, 1, 1}, us(1));
  feed(rack_b, 2, singleton(100, 3), {100, 100, 100, 100}, us(2));
  ASSERT_TRUE(sink.sent.empty());

  Header lost = member(1, 100, 3);
  lost.resend = true;
  feed(rack_a, 2, lost, {10, 10, 10, 10}, us(3));  // A: its partial sum, then the resend
  ASSERT_EQ(sink.sent.size(), 2u);
  const std::vector<std::uint8_t> a_partial = build_packet(sum_at(lost, 2, 0b01), Values{1, 1, 1, 1});
  EXPECT_EQ(sink.sent[0].bytes, a_partial);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(lost, Values{10, 10, 10, 10}));
  a_to_b(us(4));  // B: A's partial flushes B's; the resend finds nothing held and passes
  ASSERT_EQ(sink.sent.size(), 3u);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(sum_at(lost, 1, 0b10), Values{100, 100, 100, 100}));
  EXPECT_EQ(sink.sent[1].bytes, a_partial);
  EXPECT_EQ(sink.sent[2].bytes, build_packet(lost, Values{10, 10, 10, 10}));
  EXPECT_EQ(rack_a.table().in_use(), 0u);
  EXPECT_EQ(rack_b.table().in_use(), 0u);
  EXPECT_EQ(rack_b.job_counters(kJob).resend_flushes, 1u);
}

TEST_F(SwitchTwoLevel, APartialFlushGoesOnAndFlushesTheNodeAbove) {
  feed(rack_a, 1, member(0, 100, 3), {1, 1, 1, 1}, us(1));
  feed(rack_b, 2, singleton(100, 3), {100, 100, 100, 100}, us(2));
  Header again = member(0, 100, 3);  // worker 0's resend: in already; worker 1's packet was lost
  again.resend = true;
  feed(rack_a, 1, again, {1, 1, 1, 1}, us(3));
  ASSERT_EQ(sink.sent.size(), 1u);
  const std::vector<std::uint8_t> partial = build_packet(sum_at(again, 2, 0b01), Values{1, 1, 1, 1});
  EXPECT_EQ(sink.sent[0].bytes, partial);
  a_to_b(us(4));  // B cannot add a partial: its own partial sum first, then A's, both to the PS
  ASSERT_EQ(sink.sent.size(), 2u);
  const Header b_partial = sum_at(again, 1, 0b10);  // worker 2's values, in the header of the packet in hand
  EXPECT_EQ(sink.sent[0].bytes, build_packet(b_partial, Values{100, 100, 100, 100}));
  EXPECT_EQ(sink.sent[1].bytes, partial);
  EXPECT_EQ(rack_a.table().in_use(), 0u);
  EXPECT_EQ(rack_b.table().in_use(), 0u);
}

// The packet path of an installed switch never touches the heap.
class NullPortSink final : public PortSink {
 public:
  void send(PortId, std::span<const std::uint8_t> packet) override {
    ++sent;
    bytes += packet.size();
  }
  std::uint64_t sent = 0;
  std::uint64_t bytes = 0;
};

TEST_F(SwitchTest, PacketPathDoesNotAllocate) {
  sw.install_job(job_entry(kOtherJob));
  std::vector<std::vector<std::uint8_t>> packets;  // built before counting
  for (Seq seq = 0; seq < 64; ++seq) {
    const std::uint32_t index = seq;
    for (int k = 0; k < 3; ++k) packets.push_back(build_packet(gradient(k, seq, index), Values{1, 2, 3, 4}));
    packets.push_back(build_packet(gradient(0, seq, index), Values{1, 2, 3, 4}));           // duplicate
    packets.push_back(build_packet(gradient(0, seq + 1000, index), Values{1, 2, 3, 4}));    // collision
    packets.push_back(build_packet(resend(1, seq, index), Values{1, 2, 3, 4}));             // flush
    packets.push_back(build_packet(parameter(seq, index), Values{3, 6, 9, 12}));            // multicast
    packets.push_back(build_packet(gradient(0, seq + 2000, index, kOtherJob), Values{1}));  // claims
    packets.push_back(build_packet(gradient(0, seq, index, 42), Values{1}));                // unknown job
    for (int k = 0; k < 3; ++k) {  // allocated: claimed from the free list, found by <job, seq>
      Header h = gradient(k, seq + 4000, index + static_cast<std::uint32_t>(k));
      h.allocate = true;
      packets.push_back(build_packet(h, Values{1, 2, 3, 4}));
    }
    Header freeing = parameter(seq + 4000, 0);
    freeing.allocate = true;
    packets.push_back(build_packet(freeing, Values{3, 6, 9, 12}));
    packets.push_back(std::vector<std::uint8_t>(10, 0xFF));  // malformed
  }
  NullPortSink null_sink;
  const std::uint64_t before = g_allocations.load();
  Time now = us(0);
  for (auto& p : packets) {
    sw.process(p.front() == 0xFF ? PortId{1} : PortId{0}, p, now, null_sink);
    now += 10us;
    if (sw.next_deadline() <= now) sw.on_timeout(now, null_sink);  // reclaims job 9's aggregators
  }
  EXPECT_EQ(g_allocations.load(), before);
  const std::vector<std::uint8_t> probe = build_packet(gradient(0, 0, 0), Values{1});
  EXPECT_GT(g_allocations.load(), before) << "the allocation counter does not count";
  EXPECT_GT(null_sink.sent, 0u);
  EXPECT_EQ(sw.counters().malformed, 64u);
  EXPECT_EQ(sw.counters().unknown_job, 64u);
  EXPECT_GT(sw.counters().reclaimed, 0u);
}

// ---------------------------------------------------------------------------------------------
// Allocated fragments (Header::allocate, the default index): the switch gives a fragment's first
// packet the aggregator free the longest and finds it again by <job, seq>, whatever the index.

class SwitchAllocate : public SwitchTest {
 protected:
  static Header allocated(Header h) {
    h.allocate = true;
    return h;
  }
};

TEST_F(SwitchAllocate, TheFirstPacketTakesTheAggregatorFreeTheLongestAndTheOthersFindIt) {
  from_worker(0, allocated(gradient(0, 100, 3)), {1, 1, 1, 1}, us(1));  // never held, lowest first: 0
  from_worker(1, allocated(gradient(1, 100, 5)), {2, 2, 2, 2}, us(2));  // the index does not matter
  ASSERT_TRUE(sw.table().at(0).in_use);
  EXPECT_EQ(sw.table().at(0).counter, 2);
  EXPECT_EQ(sw.table().in_use(), 1u);
  EXPECT_EQ(sw.table().find(kJob, 100), 0u);
  from_worker(2, allocated(gradient(2, 100, 7)), {4, 4, 4, 4}, us(3));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].values(), (Values{7, 7, 7, 7}));
  EXPECT_EQ(sink.sent[0].header().bitmap, 0b111u);

  from_worker(0, allocated(gradient(0, 101, 3)), {1, 1, 1, 1}, us(4));  // the next free the longest: 1
  EXPECT_EQ(sw.table().find(kJob, 101), 1u);
  feed(kPsPort, allocated(parameter(100, 6)), {7, 7, 7, 7}, us(5));  // found by <job, seq>: freed
  EXPECT_FALSE(sw.table().at(0).in_use);
  EXPECT_EQ(sw.table().find(kJob, 100), AggregatorTable::kNone);
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 1u);
  EXPECT_EQ(sw.job_counters(kJob).collisions, 0u);
}

TEST_F(SwitchAllocate, OnlyAFullTableCollidesAndThenNothingIsOffered) {
  for (Seq seq = 0; seq < kTableSize; ++seq) from_worker(0, allocated(gradient(0, seq, 3)), {1, 1, 1, 1}, us(1));
  EXPECT_EQ(sw.table().in_use(), kTableSize);
  EXPECT_TRUE(sink.sent.empty());
  const Header extra = allocated(gradient(1, 50, 3));
  from_worker(1, extra, {2, 2, 2, 2}, us(2));
  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = extra;
  expected.resend = true;
  expected.collision = true;  // offered_aggregator stays 0: an allocated fragment's index never moves
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{2, 2, 2, 2}));
  EXPECT_EQ(sw.job_counters(kJob).collisions, 1u);

  feed(kPsPort, allocated(parameter(4, 0)), {}, us(3));  // frees the aggregator of seq 4
  from_worker(1, allocated(gradient(1, 51, 3)), {2, 2, 2, 2}, us(4));
  EXPECT_EQ(sw.table().find(kJob, 51), 4u);
  EXPECT_EQ(sink.sent.size(), 1u + 3u);  // and the parameter packet's multicast to the workers
}

TEST_F(SwitchAllocate, AFullTableGivesItsOldestAggregatorOnceItIsStale) {
  for (Seq seq = 0; seq < kTableSize; ++seq) {
    from_worker(0, allocated(gradient(0, seq, 0)), {1, 1, 1, 1}, us(10 * (seq + 1)));
  }
  from_worker(1, allocated(gradient(1, 50, 0)), {2, 2, 2, 2}, us(1009));  // none stale yet: a collision
  EXPECT_EQ(sw.job_counters(kJob).collisions, 1u);
  from_worker(1, allocated(gradient(1, 51, 0)), {2, 2, 2, 2}, us(1010));  // seq 0's, last touched at 10 us
  EXPECT_EQ(sw.table().find(kJob, 51), 0u);
  EXPECT_EQ(sw.table().find(kJob, 0), AggregatorTable::kNone);
  EXPECT_EQ(sw.job_counters(kJob).reclaimed, 1u);
}

TEST_F(SwitchAllocate, AResendFlushesTheAggregatorItFindsAndClaimsNone) {
  from_worker(0, allocated(gradient(0, 100, 3)), {1, 1, 1, 1}, us(1));
  from_worker(1, allocated(resend(1, 100, 6)), {2, 2, 2, 2}, us(2));  // the node's sum, then the resend
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[0].values(), (Values{1, 1, 1, 1}));
  EXPECT_EQ(sink.sent[0].header().bitmap, 0b01u);
  EXPECT_EQ(sink.sent[1].values(), (Values{2, 2, 2, 2}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  from_worker(2, allocated(resend(2, 101, 6)), {4, 4, 4, 4}, us(3));  // nothing held: on, unclaimed
  EXPECT_EQ(sink.sent.size(), 3u);
  EXPECT_EQ(sw.table().in_use(), 0u);
}

// The table brake: a job over an even share of the table (among the jobs holding any, and the one
// whose fragment last found none free) does not get the table's last eighth, nor any aggregator
// while another job's fragment has just found none free; its fragment goes to the PS marked ECN,
// which halves its workers' windows, and the other packets of that fragment follow it there.
TEST_F(SwitchAllocate, TheBrakeKeepsAJobOverItsShareOffTheTablesLastEighth) {
  SwitchConfig c = config();
  c.num_aggregators = 64;  // its last eighth: 8
  SwitchPipeline s(c);
  install_network(s);
  s.install_job(job_entry(kJob));
  s.install_job(job_entry(kOtherJob));
  Seq seq = 0;
  for (; seq < 60; ++seq) feed(s, 1, allocated(gradient(0, seq, 0)), {1, 1, 1, 1}, us(1));
  EXPECT_EQ(s.table().in_use(), 60u);  // alone: the whole table is its share
  feed(s, 1, allocated(gradient(0, 1000, 0, kOtherJob)), {1, 1, 1, 1}, us(2));
  EXPECT_EQ(s.table().holding_jobs(), 2u);
  EXPECT_EQ(s.job_counters(kOtherJob).table_marks, 0u);  // under its share

  const Header over = allocated(gradient(0, seq, 0));
  feed(s, 1, over, {1, 1, 1, 1}, us(3));  // 60 of 64 held by one of two jobs, 3 free
  EXPECT_EQ(s.job_counters(kJob).table_marks, 1u);
  EXPECT_EQ(s.table().find(kJob, seq), AggregatorTable::kNone);
  ASSERT_EQ(sink.sent.size(), 1u);
  Header expected = over;
  expected.resend = true;
  expected.collision = true;
  expected.ecn = true;
  EXPECT_EQ(sink.sent[0].bytes, build_packet(expected, Values{1, 1, 1, 1}));
  feed(s, 2, allocated(gradient(1, seq, 0)), {1, 1, 1, 1}, us(4));  // follows its first packet
  EXPECT_EQ(s.table().find(kJob, seq), AggregatorTable::kNone);
  EXPECT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(s.job_counters(kJob).table_marks, 1u);                              // one mark per fragment
  feed(s, 1, allocated(gradient(0, 1001, 0, kOtherJob)), {1, 1, 1, 1}, us(5));  // the other job still gets one
  EXPECT_NE(s.table().find(kOtherJob, 1001), AggregatorTable::kNone);

  // Room again (more than an eighth free) and no other job wanting: the job claims what it wants.
  for (Seq freed = 0; freed < 10; ++freed) feed(s, kPsPort, allocated(parameter(freed, 0)), {}, us(6));
  sink.sent.clear();
  feed(s, 1, allocated(gradient(0, seq + 1, 0)), {1, 1, 1, 1}, us(7));
  EXPECT_NE(s.table().find(kJob, seq + 1), AggregatorTable::kNone);
  EXPECT_TRUE(sink.sent.empty());
}

// A fragment of another job that finds the table full makes it contended: a job over its share
// gets no aggregator then, even with room, until the wanting job has had its turn.
TEST_F(SwitchAllocate, AnotherJobFindingTheTableFullBrakesAJobOverItsShare) {
  SwitchPipeline s(config());  // 8 aggregators
  install_network(s);
  s.install_job(job_entry(kJob));
  s.install_job(job_entry(kOtherJob));
  for (Seq seq = 0; seq < kTableSize; ++seq) feed(s, 1, allocated(gradient(0, seq, 0)), {1, 1, 1, 1}, us(1));
  feed(s, 1, allocated(gradient(0, 500, 0, kOtherJob)), {1, 1, 1, 1}, us(2));  // the table is full
  EXPECT_EQ(s.job_counters(kOtherJob).collisions, 1u);
  for (Seq freed = 0; freed < 3; ++freed) feed(s, kPsPort, allocated(parameter(freed, 0)), {}, us(3));
  feed(s, 1, allocated(gradient(0, 100, 0)), {1, 1, 1, 1}, us(4));  // 3 of 8 free, but it holds 5 of 2 jobs' 8
  EXPECT_EQ(s.table().find(kJob, 100), AggregatorTable::kNone);
  EXPECT_EQ(s.job_counters(kJob).table_marks, 1u);
  feed(s, 1, allocated(gradient(0, 501, 0, kOtherJob)), {1, 1, 1, 1}, us(5));
  EXPECT_NE(s.table().find(kOtherJob, 501), AggregatorTable::kNone);
  EXPECT_EQ(s.job_counters(kOtherJob).table_marks, 0u);
}

// The hash index of allocated aggregators against a plain map, through claims, take-overs,
// releases and the slots' reuse, in a table small enough that probes run into each other.
TEST(AggregatorTable, FindsEveryAllocatedFragmentAndNothingElse) {
  AggregatorTable t(16, 1);
  std::vector<std::pair<JobId, Seq>> held(16, {0, 0});
  std::vector<bool> mapped(16, false);
  std::uint64_t rng = 12345;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(rng >> 33);
  };
  for (int step = 0; step < 20000; ++step) {
    const std::uint32_t i = next() % 16;
    if (next() % 3 == 0) {
      t.release(i);
      mapped[i] = false;
    } else {
      const JobId job = static_cast<JobId>(1 + next() % 3);
      const Seq seq = next() % 40;
      if (t.find(job, seq) != AggregatorTable::kNone) continue;  // a switch claims a fragment once
      const bool allocated = next() % 4 != 0;
      t.claim(i, job, seq, 1, 0, Time{}, allocated);
      held[i] = {job, seq};
      mapped[i] = allocated;
    }
    for (std::uint32_t j = 0; j < 16; ++j) {
      if (mapped[j]) {
        ASSERT_EQ(t.find(held[j].first, held[j].second), j) << "step " << step;
      }
    }
  }
  for (JobId job = 1; job <= 3; ++job) {
    for (Seq seq = 0; seq < 40; ++seq) {
      const std::uint32_t i = t.find(job, seq);
      if (i != AggregatorTable::kNone) {
        EXPECT_TRUE(mapped[i] && held[i] == std::make_pair(job, seq));
      }
    }
  }
  std::uint32_t holding = 0;
  for (JobId job = 1; job <= 3; ++job) holding += t.held_by(job) > 0 ? 1 : 0;
  EXPECT_EQ(t.holding_jobs(), holding);
}

// ---------------------------------------------------------------------------------------------
// Round shape (docs/protocol.md): packets whose round_shape differs from the aggregator's are
// never added to it; the partial aggregate and the packet both go on to the PS at once.

TEST_F(SwitchTest, CompletedAggregateCarriesItsRoundShape) {
  for (int k = 0; k < 3; ++k) {
    Header h = gradient(k, 100, 3);
    h.round_shape = 2;  // the last fragment of the round, 2 real values
    from_worker(k, h, {k + 1, 1, 0, 0}, us(1));
  }
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].header().round_shape, 2);
  EXPECT_EQ(sink.sent[0].values(), (Values{6, 3, 0, 0}));
  EXPECT_EQ(sw.table().at(3).round_shape, 2);
  EXPECT_EQ(sw.job_counters(kJob).round_shape_mismatches, 0u);
}

TEST_F(SwitchTest, PacketOfAnotherRoundShapeIsKeptApartAndFlushesThePartialAggregate) {
  Header last0 = gradient(0, 100, 3);
  last0.round_shape = 3;
  last0.ecn = true;
  from_worker(0, last0, {1, 2, 3, 0}, us(1));
  Header last1 = gradient(1, 100, 3);
  last1.round_shape = 3;
  from_worker(1, last1, {10, 20, 30, 0}, us(2));
  ASSERT_TRUE(sink.sent.empty());

  // Worker 2's round is longer: seq 100 is not its last fragment.
  from_worker(2, gradient(2, 100, 3), {100, 200, 300, 400}, us(3));
  ASSERT_EQ(sink.sent.size(), 2u);
  // First the partial aggregate of workers 0 and 1, with their shape, as a flushed resend.
  Header partial = sum_of(gradient(2, 100, 3), 0b11);
  partial.round_shape = 3;
  partial.ecn = true;
  partial.resend = true;
  EXPECT_EQ(sink.sent[0].port, kPsPort);
  EXPECT_EQ(sink.sent[0].bytes, build_packet(partial, Values{11, 22, 33, 0}));
  // Then worker 2's packet, not added to anything: its own values and shape.
  Header apart = gradient(2, 100, 3);
  apart.resend = true;
  EXPECT_EQ(sink.sent[1].port, kPsPort);
  EXPECT_EQ(sink.sent[1].bytes, build_packet(apart, Values{100, 200, 300, 400}));
  EXPECT_FALSE(sw.table().at(3).in_use);
  EXPECT_EQ(sw.job_counters(kJob).round_shape_mismatches, 1u);
  EXPECT_EQ(sw.job_counters(kJob).aggregations, 2u);
  EXPECT_EQ(sw.job_counters(kJob).completions, 0u);
}

TEST_F(SwitchTest, ResendOfAnotherRoundShapeIsNotMergedIntoTheFlush) {
  Header first = gradient(0, 100, 3);
  first.round_shape = 4;
  from_worker(0, first, {1, 1, 1, 1}, us(1));
  from_worker(1, resend(1, 100, 3), {5, 5, 5, 5}, us(2));  // shape 0: not added, not a box-5 merge
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[0].header().node, kNode);  // the partial sum: worker 0
  EXPECT_EQ(sink.sent[0].header().bitmap, 0b1u);
  EXPECT_EQ(sink.sent[0].header().round_shape, 4);
  EXPECT_EQ(sink.sent[0].values(), (Values{1, 1, 1, 1}));
  EXPECT_EQ(sink.sent[1].header().node, kNode + 2);  // worker 1's own
  EXPECT_EQ(sink.sent[1].header().bitmap, 1u);
  EXPECT_EQ(sink.sent[1].header().round_shape, 0);
  EXPECT_EQ(sink.sent[1].values(), (Values{5, 5, 5, 5}));
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 0u);
  EXPECT_EQ(sw.job_counters(kJob).round_shape_mismatches, 1u);
}

TEST_F(SwitchTest, AfterCompletionAPacketOfAnotherShapeOnlyPassesThrough) {
  for (int k = 0; k < 3; ++k) from_worker(k, gradient(k, 100, 3), {1, 1, 1, 1}, us(1));
  ASSERT_EQ(sink.sent.size(), 1u);
  Header other = resend(1, 100, 3);
  other.round_shape = 2;
  from_worker(1, other, {7, 7, 0, 0}, us(2));
  ASSERT_EQ(sink.sent.size(), 2u);  // the complete aggregate already went: not sent again
  EXPECT_EQ(sink.sent[1].values(), (Values{7, 7, 0, 0}));
  EXPECT_EQ(sink.sent[1].header().round_shape, 2);
  EXPECT_TRUE(sw.table().at(3).in_use);  // held until the PS's parameter packet
  EXPECT_EQ(sw.job_counters(kJob).round_shape_mismatches, 1u);
}

TEST_F(SwitchTwoLevel, SecondLevelKeepsGroupsOfAnotherShapeApart) {
  // Group 0 (workers 0-1) completes at A with shape 3; the singleton's round is longer (shape 0).
  for (int k = 0; k < 2; ++k) {
    Header h = member(k, 100, 3);
    h.round_shape = 3;
    feed(rack_a, static_cast<PortId>(k + 1), h, {1, 1, 1, 1}, us(1));
  }
  ASSERT_EQ(sink.sent.size(), 1u);
  a_to_b(us(2));
  ASSERT_TRUE(sink.sent.empty());
  feed(rack_b, 2, singleton(100, 3), {100, 100, 100, 100}, us(3));
  ASSERT_EQ(sink.sent.size(), 2u);
  // B's partial sum: A's whole one.
  const Header flushed = sink.sent[0].header();
  EXPECT_EQ(flushed.node, 1);
  EXPECT_EQ(flushed.bitmap, 0b01u);
  EXPECT_EQ(flushed.round_shape, 3);
  EXPECT_TRUE(flushed.resend);
  EXPECT_EQ(sink.sent[0].values(), (Values{2, 2, 2, 2}));
  const Header apart = sink.sent[1].header();
  EXPECT_EQ(apart.node, 5);
  EXPECT_EQ(apart.round_shape, 0);
  EXPECT_EQ(sink.sent[1].values(), (Values{100, 100, 100, 100}));
  EXPECT_EQ(rack_b.table().in_use(), 0u);
  EXPECT_EQ(rack_b.job_counters(kJob).round_shape_mismatches, 1u);
}

TEST_F(SwitchTest, RoundShapeMismatchPathDoesNotAllocate) {
  std::vector<std::vector<std::uint8_t>> packets;
  for (Seq seq = 0; seq < 64; ++seq) {
    Header last = gradient(0, seq, seq);
    last.round_shape = 1;
    packets.push_back(build_packet(last, Values{1, 0, 0, 0}));
    packets.push_back(build_packet(gradient(1, seq, seq), Values{1, 2, 3, 4}));
  }
  NullPortSink null_sink;
  const std::uint64_t before = g_allocations.load();
  for (auto& p : packets) sw.process(1, p, us(1), null_sink);
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_EQ(sw.job_counters(kJob).round_shape_mismatches, 64u);
  EXPECT_EQ(null_sink.sent, 128u);
}

// ---------------------------------------------------------------------------------------------
// Rina's mode (docs/rina.md "The switch's Rina mode"): the ToR of a rack of three workers (ports
// 1-3, bits 0-2) that is one member of a job's ring; the next member's receiver is kNext, behind
// the uplink (port 0).

class RinaSwitchTest : public ::testing::Test {
 protected:
  static constexpr JobId kJob = 5;
  static constexpr Address kWorkers[3] = {0x0A000001, 0x0A000002, 0x0A000003};
  static constexpr Address kNext = 0x0A000010;  // the next member's receiver, behind port 0
  static constexpr Address kPrev = 0x0A000020;  // the previous member's worker, behind port 0
  static constexpr std::uint32_t kFragments = 12;

  RinaSwitchTest() : sw(config()) {
    sw.add_route(kNext, 0);
    sw.add_route(kPrev, 0);
    for (PortId k = 0; k < 3; ++k) sw.add_route(kWorkers[k], static_cast<PortId>(k + 1));
    sw.install_job(SwitchJobEntry{kJob, {0, 1, 2, 3}, {}, {1, 2, 3}});
  }
  static SwitchConfig config() {
    SwitchConfig c;
    c.num_aggregators = 8;
    c.aggregator_width = 8;
    c.reclaim_timeout = 1ms;
    return c;
  }
  // Worker k's contribution (or final) for `seq` towards kNext.
  static std::vector<std::uint8_t> contribution(int k, Seq seq, std::int32_t value,
                                                RinaKind kind = RinaKind::kContribution, bool resend = false) {
    Header h;
    h.rina = kind;
    h.job = kJob;
    h.seq = seq;
    h.bitmap = 1u << k;
    h.fan_in = 3;
    h.round_fragments = kFragments;
    h.aggregator_index = seq;
    h.src = kWorkers[k];
    h.dst = kNext;
    h.resend = resend;
    h.magnitude_or_next = static_cast<std::int16_t>(k);
    return build_packet(h, Values(4, value));
  }
  static std::vector<std::uint8_t> no_values(RinaKind kind, Seq seq, Address src, Address dst) {
    Header h;
    h.rina = kind;
    h.job = kJob;
    h.seq = seq;
    h.aggregator_index = seq;
    h.src = src;
    h.dst = dst;
    return build_packet(h, Values{});
  }
  void process(PortId port, std::vector<std::uint8_t> packet, Time now = us(1)) { sw.process(port, packet, now, sink); }

  SwitchPipeline sw;
  RecordingPortSink sink;
};

TEST_F(RinaSwitchTest, TheRacksContributionsGoOnAsOneSumWhoseAggregatorWaitsForTheAck) {
  process(1, contribution(0, 4, 1));
  process(2, contribution(1, 4, 10));
  EXPECT_TRUE(sink.sent.empty());
  process(3, contribution(2, 4, 100));
  ASSERT_EQ(sink.sent.size(), 1u);  // a contribution: to the next member's receiver only
  EXPECT_EQ(sink.sent[0].port, 0);
  const Header sum = sink.sent[0].header();
  EXPECT_EQ(sum.rina, RinaKind::kContribution);
  EXPECT_EQ(sum.bitmap, 0b111u);
  EXPECT_EQ(sum.fan_in, 3);
  EXPECT_EQ(sum.round_fragments, kFragments);
  EXPECT_EQ(sum.magnitude_or_next, 2);  // the largest of the members'
  EXPECT_EQ(sink.sent[0].values(), (Values{111, 111, 111, 111}));
  EXPECT_EQ(sw.table().in_use(), 1u);
  // The receiver's ack frees the aggregator and reaches every worker of the rack.
  sink.sent.clear();
  process(0, no_values(RinaKind::kAck, 4, kNext, kWorkers[0]));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
  EXPECT_EQ(sw.job_counters(kJob).completions, 1u);
  EXPECT_EQ(sw.job_counters(kJob).deallocations, 1u);
}

// The rack's copies come from the final's next receiver: from the worker whose contribution
// completed it (its source on the way on, which that receiver checks), that worker's kernel
// dropped its own copy as a martian source, and each worker of the netns testbed missed a quarter
// of its rack's finals until it asked for them.
TEST_F(RinaSwitchTest, ACompleteFinalAlsoGoesToEveryWorkerOfTheCompletingRack) {
  process(1, contribution(0, 4, 1, RinaKind::kFinal));
  process(2, contribution(1, 4, 2, RinaKind::kFinal));
  process(3, contribution(2, 4, 3, RinaKind::kFinal));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{0, 1, 2, 3}));
  for (const auto& s : sink.sent) EXPECT_EQ(s.values(), (Values{6, 6, 6, 6}));
  const Header on = sink.sent[0].header();
  EXPECT_EQ(on.src, kWorkers[2]);
  EXPECT_EQ(on.dst, kNext);
  for (std::size_t k = 1; k < sink.sent.size(); ++k) {
    const Header copy = sink.sent[k].header();
    EXPECT_EQ(copy.src, kNext) << "port " << sink.sent[k].port;
    EXPECT_EQ(copy.dst, multicast_group_address(kJob));
  }
}

// From outside: a complete final and a gather reach the whole rack, a partial final and a
// request's answer only their receiver.
TEST_F(RinaSwitchTest, AllgatherPacketsFromOutsideReachTheWholeRack) {
  Header h;
  h.rina = RinaKind::kFinal;
  h.job = kJob;
  h.seq = 2;
  h.bitmap = 0b11;
  h.fan_in = 2;  // the previous rack had two workers, both in
  h.src = kPrev;
  h.dst = kWorkers[1];
  process(0, build_packet(h, Values(4, 9)));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
  // Addressed to the job's group, which every worker's host takes (not to w1, which the others
  // would drop).
  for (const auto& s : sink.sent) EXPECT_EQ(s.header().dst, multicast_group_address(kJob));
  sink.sent.clear();
  h.bitmap = 0b01;  // a partial one (a resend flushed it): for the receiver to merge
  process(0, build_packet(h, Values(4, 9)));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{2}));
  sink.sent.clear();
  h.rina = RinaKind::kGather;
  h.bitmap = 0;
  h.fan_in = 0;
  process(0, build_packet(h, Values(4, 9)));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{1, 2, 3}));
  sink.sent.clear();
  h.resend = true;  // a request's answer
  process(0, build_packet(h, Values(4, 9)));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{2}));
  sink.sent.clear();
  process(0, no_values(RinaKind::kGatherAck, 2, kPrev, kWorkers[2]));
  process(2, no_values(RinaKind::kRequest, 2, kWorkers[1], kPrev));
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{3, 0}));
}

// A resend is never added to a sum (every first copy is in one sum at most): one whose worker is
// not in the aggregator goes on alone and the aggregator keeps collecting; one whose worker is in
// it sends the waiting sum on as it is (the receiver merges it) and frees it, and is dropped (its
// value went with the sum).
TEST_F(RinaSwitchTest, AResendGoesAloneOrFlushesTheSumItIsIn) {
  process(1, contribution(0, 4, 1));
  process(2, contribution(1, 4, 10, RinaKind::kContribution, true));
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].header().bitmap, 0b010u);  // alone
  EXPECT_EQ(sink.sent[0].values(), (Values{10, 10, 10, 10}));
  EXPECT_EQ(sw.table().in_use(), 1u);
  process(1, contribution(0, 4, 1, RinaKind::kContribution, true));
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[1].header().bitmap, 0b001u);  // the sum that waited: worker 0's first copy
  EXPECT_EQ(sink.sent[1].values(), (Values{1, 1, 1, 1}));
  EXPECT_EQ(sw.table().in_use(), 0u);
  EXPECT_EQ(sw.job_counters(kJob).resend_flushes, 1u);
}

TEST_F(RinaSwitchTest, DuplicatesCollisionsAndOtherShapesAreNeverAdded) {
  process(1, contribution(0, 4, 1));
  process(1, contribution(0, 4, 1));  // the network's duplicate
  EXPECT_EQ(sw.job_counters(kJob).duplicates, 1u);
  process(2, contribution(1, 12, 5));  // slot 12 mod 8 = 4, held by seq 4: on alone
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].header().seq, 12u);
  EXPECT_EQ(sw.job_counters(kJob).collisions, 1u);
  // Another round size (fragment count): the partial sum goes on apart, and so does the packet.
  auto other = contribution(1, 4, 7);
  Header h;
  ASSERT_EQ(decode_header(other, h), DecodeError::kOk);
  h.round_fragments = kFragments + 1;
  encode_header(h, other);
  process(2, other);
  ASSERT_EQ(sink.sent.size(), 3u);
  EXPECT_EQ(sink.sent[1].header().round_fragments, kFragments);
  EXPECT_EQ(sink.sent[1].values(), (Values{1, 1, 1, 1}));
  EXPECT_EQ(sink.sent[2].header().round_fragments, kFragments + 1);
  EXPECT_EQ(sw.job_counters(kJob).round_shape_mismatches, 1u);
}

// A worker speaks for itself only: its own port's bit and the rack's fan-in.
TEST_F(RinaSwitchTest, AContributionForAnotherWorkerOrRackSizeIsMalformed) {
  process(2, contribution(0, 4, 1));  // worker 0's bit on worker 1's port
  auto wrong_fan_in = contribution(1, 4, 1);
  Header h;
  ASSERT_EQ(decode_header(wrong_fan_in, h), DecodeError::kOk);
  h.fan_in = 2;
  encode_header(h, wrong_fan_in);
  process(2, wrong_fan_in);
  EXPECT_EQ(sw.counters().malformed, 2u);
  EXPECT_TRUE(sink.sent.empty());
  EXPECT_EQ(sw.table().in_use(), 0u);
}

// At a switch that is no Rina ToR for the job, Rina packets are forwarded by dst like any.
TEST_F(RinaSwitchTest, ASwitchWithoutTheRackOnlyForwards) {
  SwitchPipeline core(config());
  core.add_route(kNext, 0);
  core.install_job(SwitchJobEntry{kJob, {0, 1, 2, 3}, {}, {}});
  for (int k = 0; k < 2; ++k) {
    auto packet = contribution(k, 4, 1);
    core.process(static_cast<PortId>(k + 1), packet, us(1), sink);
  }
  EXPECT_EQ(ports_of(sink.sent), (std::vector<PortId>{0, 0}));
  EXPECT_EQ(core.table().in_use(), 0u);
}

}  // namespace
}  // namespace atp
