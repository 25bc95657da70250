// Tests of the PS endpoint: merging individual and partial aggregates without double counting,
// collisions, the float32 overflow path, late resends and the window bound on memory.
#include "atp/ps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "atp/aggregator_index.h"
#include "atp/fixed_point.h"
#include "atp/wire.h"
#include "atp/worker.h"

namespace atp {
namespace {

constexpr JobId kJob = 7;
constexpr Address kPs = 0x0A000064;       // 10.0.0.100
constexpr Address kWorker0 = 0x0A000001;  // worker w is kWorker0 + w
constexpr std::uint32_t kAggregators = 16;

// Remembers every packet the PS sends, decoded.
class RecordingSink final : public PacketSink {
 public:
  struct Packet {
    Header header;
    std::vector<std::int32_t> values;
  };
  void send(std::span<const std::uint8_t> bytes) override {
    Packet p;
    EXPECT_EQ(decode_header(bytes, p.header), DecodeError::kOk) << "the PS sent a malformed packet";
    p.values.resize(p.header.value_count);
    load_values(bytes, p.values);
    packets.push_back(std::move(p));
  }
  std::vector<Packet> packets;
};

// The trees of these tests (PsConfig::tree): the PS (node 0); node 1, a switch above G groups;
// nodes 2 .. G + 1, the groups' switches; then the workers, group by group. gradient() and
// individual() speak of them as a ToR-and-spine header would: members of one group, or whole
// groups. Set by make_config for the test that calls it.
std::vector<std::uint8_t> groups_in_use;

std::vector<std::uint16_t> grouped_tree(const std::vector<std::uint8_t>& group_sizes) {
  std::vector<std::uint16_t> tree = {0, 0};
  for (std::size_t g = 0; g < group_sizes.size(); ++g) tree.push_back(1);
  for (std::size_t g = 0; g < group_sizes.size(); ++g) {
    for (std::uint8_t m = 0; m < group_sizes[g]; ++m) tree.push_back(static_cast<std::uint16_t>(2 + g));
  }
  return tree;
}

PsConfig make_config(std::vector<std::uint8_t> group_sizes, std::uint16_t values_per_packet = 4,
                     std::uint32_t max_window_seqs = 64) {
  PsConfig c;
  c.job = kJob;
  c.self = kPs;
  c.multicast_group = multicast_group_address(kJob);
  c.tree = grouped_tree(group_sizes);
  groups_in_use = std::move(group_sizes);
  c.values_per_packet = values_per_packet;
  c.aggregators = {0, kAggregators};
  c.max_window_seqs = max_window_seqs;
  return c;
}

// A gradient packet header heading to the PS for the members `members` of the one group in
// `groups` (the partial or whole sum of that group's switch), or for the whole groups `groups`
// (the sum of the switch above them). Groups that do not exist give nodes and fan-ins the PS
// must refuse.
Header gradient(Seq seq, std::uint32_t members, std::uint32_t groups, Address src) {
  Header h;
  h.job = kJob;
  h.seq = seq;
  if (std::has_single_bit(groups)) {
    const auto g = static_cast<std::size_t>(std::countr_zero(groups));
    h.node = static_cast<std::uint16_t>(2 + g);
    h.bitmap = members;
    h.fan_in = g < groups_in_use.size() ? groups_in_use[g] : 0;
  } else {
    h.node = 1;
    h.bitmap = groups;
    h.fan_in = static_cast<std::uint8_t>(groups_in_use.size());
  }
  h.aggregator_index = base_aggregator_index(kJob, seq, {0, kAggregators}, IndexPolicy::kHashed);
  h.src = src;
  h.dst = kPs;
  return h;
}

// Worker `member` of group `group`: its own packet (its node, bitmap 1, fan-in 1).
Header own(Seq seq, std::uint32_t group, std::uint32_t member, Address src) {
  Header h = gradient(seq, 1, 1, src);
  std::size_t node = 2 + groups_in_use.size() + member;
  for (std::uint32_t g = 0; g < group; ++g) node += groups_in_use[g];
  h.node = static_cast<std::uint16_t>(node);
  h.fan_in = 1;
  return h;
}

std::vector<std::int32_t> float_bits(std::vector<float> values) {
  std::vector<std::int32_t> bits;
  for (float f : values) bits.push_back(std::bit_cast<std::int32_t>(f));
  return bits;
}

std::int32_t sum_as_float_bits(std::vector<float> addends) {
  double sum = 0;
  for (float f : addends) sum += f;
  return std::bit_cast<std::int32_t>(static_cast<float>(sum));
}

// A PS and the packets it sent.
struct PsUnderTest {
  explicit PsUnderTest(PsConfig config) : ps(std::move(config)) {}

  void deliver(const Header& h, const std::vector<std::int32_t>& values) { deliver_bytes(build_packet(h, values)); }
  void deliver_bytes(std::span<const std::uint8_t> bytes) {
    now += Duration(1000);
    ps.on_packet(bytes, now, sink);
  }
  // Worker `member` of group `group` (one bit in each bitmap), as a switch forwards it.
  void individual(Seq seq, std::uint32_t group, std::uint32_t member, Address src,
                  const std::vector<std::int32_t>& values, bool ecn = false) {
    Header h = own(seq, group, member, src);
    h.ecn = ecn;
    deliver(h, values);
  }

  PsEndpoint ps;
  RecordingSink sink;
  Time now = time_from_ns(0);
};

void expect_multicast_result(const RecordingSink::Packet& p, Seq seq, const std::vector<std::int32_t>& values) {
  EXPECT_TRUE(p.header.is_ack);
  EXPECT_FALSE(p.header.overflow);
  EXPECT_FALSE(p.header.float_payload);
  EXPECT_EQ(p.header.job, kJob);
  EXPECT_EQ(p.header.seq, seq);
  EXPECT_EQ(p.header.src, kPs);
  EXPECT_EQ(p.header.dst, multicast_group_address(kJob));
  EXPECT_EQ(p.values, values);
}

// Scale per fragment: a result carries its exponent and, for the position's next round, the one
// the largest magnitude asks for; contributions at different exponents, or an exponent that does
// not resolve the largest value to float32's 24 bits, make the PS collect the fragment as float32.
TEST(PsEndpoint, ExponentsPickTheNextAndSendUnresolvedOrMixedFragmentsToFloat32) {
  PsUnderTest t(make_config({2}));
  auto send = [&](Seq seq, std::uint32_t w, std::int16_t exponent, std::int16_t magnitude) {
    Header h = gradient(seq, 1u << w, 1u, kWorker0 + w);
    h.scale_exponent = exponent;
    h.magnitude_or_next = magnitude;
    t.deliver(h, {1, 2, 3, 4});
  };
  send(100, 0, 24, 0);  // values in [1, 2) at 2^24: resolved
  send(100, 1, 24, -3);
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 100, {2, 4, 6, 8});
  EXPECT_EQ(t.sink.packets[0].header.scale_exponent, 24);
  EXPECT_EQ(t.sink.packets[0].header.magnitude_or_next, 28);  // 29 - 0 - ceil(log2 2)
  send(101, 0, 24, 0);                                        // another exponent on the other worker: float32
  send(101, 1, 25, 0);
  ASSERT_EQ(t.sink.packets.size(), 2u);
  EXPECT_TRUE(t.sink.packets[1].header.overflow);
  send(102, 0, 20, 0);  // 2^20 leaves a value in [1, 2) 21 bits: float32
  send(102, 1, 20, kNoMagnitude);
  ASSERT_EQ(t.sink.packets.size(), 3u);
  EXPECT_TRUE(t.sink.packets[2].header.overflow);
  send(103, 0, -5, kNoMagnitude);  // zeros are exact at any exponent
  send(103, 1, -5, kNoMagnitude);
  ASSERT_EQ(t.sink.packets.size(), 4u);
  EXPECT_FALSE(t.sink.packets[3].header.overflow);
  EXPECT_EQ(t.sink.packets[3].header.magnitude_or_next, -5);  // no magnitude: the exponent stays
  EXPECT_EQ(t.ps.stats().overflows, 2u);
}

TEST(PsEndpoint, IndividualsFromAllWorkersGiveOneMulticastWithExactSums) {
  PsUnderTest t(make_config({4}));
  const std::vector<std::vector<std::int32_t>> inputs = {
      {1, -5, 1'000'000'000, 0}, {2, -6, 1'000'000'000, 7}, {3, -7, -500, 0}, {4, -8, 147'483'147, -1}};
  for (std::uint32_t w = 0; w < 3; ++w) t.individual(100, 0, w, kWorker0 + w, inputs[w]);
  EXPECT_TRUE(t.sink.packets.empty());
  t.individual(100, 0, 3, kWorker0 + 3, inputs[3]);

  ASSERT_EQ(t.sink.packets.size(), 1u);
  const auto& ack = t.sink.packets[0];
  expect_multicast_result(ack, 100, {10, -26, 2'147'482'647, 6});
  EXPECT_FALSE(ack.header.resend) << "no resend went into it, none came: its timing is a round trip";
  EXPECT_FALSE(ack.header.collision);
  EXPECT_FALSE(ack.header.ecn);
  EXPECT_EQ(ack.header.bitmap, 0u);
  EXPECT_EQ(ack.header.aggregator_index, base_aggregator_index(kJob, 100, {0, kAggregators}, IndexPolicy::kHashed));
  EXPECT_EQ(ack.header.value_count, 4u);
  const PsStats& s = t.ps.stats();
  EXPECT_EQ(s.packets_received, 4u);
  EXPECT_EQ(s.aggregations, 4u);
  EXPECT_EQ(s.completions, 1u);
  EXPECT_EQ(s.parameters_sent, 1u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(t.ps.stored_fragments(), 1u);  // kept for late resends
  EXPECT_EQ(t.ps.next_deadline(), kNever);
}

// A PS that knows its job's workers takes gradients only with one of them as src: a packet with
// another src, however valid otherwise, changes nothing.
// ps_config_error: nullopt for a config a PS takes, else the sentence its constructor throws,
// naming the job and the field.
TEST(PsEndpoint, AConfigItCannotTakeIsNamedInOneSentence) {
  EXPECT_EQ(ps_config_error(make_config({2})), std::nullopt);
  PsConfig c = make_config({2});
  c.tree = {0};
  EXPECT_EQ(ps_config_error(c),
            "job " + std::to_string(kJob) + ": tree has 1 nodes; it needs the PS and 1 to 65535 more");
  c = make_config({2});
  c.max_window_seqs = kMaxWindowSeqs + 1;
  ASSERT_TRUE(ps_config_error(c).has_value());
  EXPECT_NE(ps_config_error(c)->find("is above 1048576, the most a PS takes"), std::string::npos);
  c = make_config({2}, kMaxValuesPerPacket, kMaxWindowSeqs);
  ASSERT_TRUE(ps_config_error(c).has_value());
  EXPECT_NE(ps_config_error(c)->find("a PS job may use"), std::string::npos) << *ps_config_error(c);
}

// A config whose packets are wider than a packet holds is refused in one sentence: its buffer is
// sized by them (it was clamped, so a wider job's packets would have been written past it).
TEST(PsEndpoint, ValuesPerPacketOutsideWhatAPacketHoldsIsRefused) {
  for (const std::uint16_t values : {std::uint16_t{0}, static_cast<std::uint16_t>(kMaxValuesPerPacket + 1)}) {
    PsConfig c = make_config({2});
    c.values_per_packet = values;
    try {
      PsEndpoint ps(c);
      FAIL() << "a PS took " << values << " values per packet";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("values_per_packet must be 1..4096, got " + std::to_string(values)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(PsEndpoint, GradientsFromAnAddressNotAmongTheWorkersAreDropped) {
  PsConfig config = make_config({2});
  config.workers = {kWorker0 + 1, kWorker0};
  PsUnderTest t(config);
  t.individual(7, 0, 0, kWorker0 + 9, {100, 100, 100, 100});  // a stranger posing as worker 0
  t.individual(7, 0, 1, kWorker0 + 1, {1, 2, 3, 4});
  EXPECT_TRUE(t.sink.packets.empty());
  EXPECT_EQ(t.ps.stats().dropped, 1u);
  EXPECT_EQ(t.ps.stats().aggregations, 1u);
  t.individual(7, 0, 0, kWorker0, {10, 20, 30, 40});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 7, {11, 22, 33, 44});
}

TEST(PsEndpoint, PartialAggregateAndIndividualsComplete) {
  PsUnderTest t(make_config({4}));
  // The switch aggregated workers 0 and 2 (1 + 3, 10 + 30, ...) and then had to flush.
  t.deliver(gradient(5, 0b0101, 1, kWorker0 + 2), {4, 40, 400, 4000});
  t.individual(5, 0, 1, kWorker0 + 1, {2, 20, 200, 2000});
  EXPECT_TRUE(t.sink.packets.empty());
  t.individual(5, 0, 3, kWorker0 + 3, {4, 40, 400, 4000});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 5, {10, 100, 1000, 10000});
}

TEST(PsEndpoint, OverlappingPartialIsDiscardedWholeAndCompletionStaysExact) {
  PsUnderTest t(make_config({4}));
  t.individual(9, 0, 0, kWorker0, {1, 1, 1, 1});
  // Workers 0 and 1 aggregated at the switch: worker 0 is already in, so all of it is discarded.
  t.deliver(gradient(9, 0b0011, 1, kWorker0 + 1), {3, 3, 3, 3});
  EXPECT_EQ(t.ps.stats().overlaps_dropped, 1u);
  EXPECT_EQ(t.ps.stats().aggregations, 1u);
  t.deliver(gradient(9, 0b1100, 1, kWorker0 + 3), {12, 12, 12, 12});  // workers 2 and 3
  t.deliver(gradient(9, 0b0110, 1, kWorker0 + 2), {5, 5, 5, 5});      // overlaps 2: discarded
  EXPECT_EQ(t.ps.stats().overlaps_dropped, 2u);
  EXPECT_TRUE(t.sink.packets.empty());
  t.individual(9, 0, 1, kWorker0 + 1, {2, 2, 2, 2});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 9, {15, 15, 15, 15});
}

TEST(PsEndpoint, DuplicateIndividualIsDropped) {
  PsUnderTest t(make_config({2}));
  t.individual(1, 0, 0, kWorker0, {7, 7, 7, 7});
  Header resend = gradient(1, 1, 1, kWorker0);
  resend.resend = true;
  t.deliver(resend, {7, 7, 7, 7});
  EXPECT_EQ(t.ps.stats().overlaps_dropped, 1u);
  EXPECT_TRUE(t.sink.packets.empty()) << "PsConfig::workers empty: no resend requests";
  t.individual(1, 0, 1, kWorker0 + 1, {1, 2, 3, 4});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 1, {8, 9, 10, 11});
  // Worker 0 timed out while the fragment waited for worker 1: its timing is no round trip.
  EXPECT_TRUE(t.sink.packets[0].header.resend);
}

TEST(PsEndpoint, LevelOneAggregateCountsWholeGroups) {
  // Group 0: 2 workers, group 1: 3 workers, group 2: a singleton.
  PsUnderTest t(make_config({2, 3, 1}));
  // A complete sum of the switch above every group.
  t.deliver(gradient(40, 0b1, 0b111, kWorker0), {6, 0, -6, 1});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 40, {6, 0, -6, 1});

  // Groups 0 and 2 whole, group 1 as a partial plus an individual.
  t.deliver(gradient(41, 0b1, 0b101, kWorker0 + 5), {3, 3, 3, 3});
  t.deliver(gradient(41, 0b011, 0b010, kWorker0 + 3), {2, 2, 2, 2});
  // Groups 0 and 1 whole: overlaps both what group 0 and group 1 gave.
  t.deliver(gradient(41, 0b11, 0b011, kWorker0 + 2), {50, 50, 50, 50});
  // Group 0's worker 1 alone: already in through the whole group.
  t.individual(41, 0, 1, kWorker0 + 1, {60, 60, 60, 60});
  EXPECT_EQ(t.ps.stats().overlaps_dropped, 2u);
  ASSERT_EQ(t.sink.packets.size(), 1u);
  t.individual(41, 1, 2, kWorker0 + 4, {1, 1, 1, 1});
  ASSERT_EQ(t.sink.packets.size(), 2u);
  expect_multicast_result(t.sink.packets[1], 41, {6, 6, 6, 6});
}

TEST(PsEndpoint, InvalidBitmapsAreCountedDrops) {
  PsUnderTest t(make_config({2, 3}));
  const std::vector<std::int32_t> v = {1, 1, 1, 1};
  t.deliver(gradient(3, 1, 0, kWorker0), v);            // no group
  t.deliver(gradient(3, 1, 0b100, kWorker0), v);        // group 2 does not exist
  t.deliver(gradient(3, 1, 1u << 31, kWorker0), v);     // nor group 31
  t.deliver(gradient(3, 1, 0b111, kWorker0), v);        // whole groups, one of them unknown
  t.deliver(gradient(3, 0, 0b01, kWorker0), v);         // no worker
  t.deliver(gradient(3, 0b100, 0b01, kWorker0), v);     // group 0 has members 0 and 1 only
  t.deliver(gradient(3, 0b1000, 0b10, kWorker0), v);    // group 1 has members 0..2 only
  t.deliver(gradient(3, 1u << 31, 0b10, kWorker0), v);  // far outside
  EXPECT_EQ(t.ps.stats().dropped, 8u);
  EXPECT_EQ(t.ps.stats().packets_received, 0u);
  EXPECT_EQ(t.ps.stored_fragments(), 0u);
  EXPECT_TRUE(t.sink.packets.empty());
}

TEST(PsEndpoint, BadPacketsAreCountedDrops) {
  PsUnderTest t(make_config({2}));
  const std::vector<std::int32_t> v = {1, 1, 1, 1};
  Header wrong_job = gradient(1, 1, 1, kWorker0);
  wrong_job.job = kJob + 1;
  t.deliver(wrong_job, v);
  Header ack = gradient(1, 1, 1, kWorker0);
  ack.is_ack = true;
  t.deliver(ack, v);
  Header elsewhere = gradient(1, 1, 1, kWorker0);
  elsewhere.dst = kPs + 1;
  t.deliver(elsewhere, v);
  t.deliver(gradient(1, 1, 1, kWorker0), {1, 1, 1});        // value_count != values_per_packet
  t.deliver(gradient(1, 1, 1, kWorker0), {1, 1, 1, 1, 1});  // likewise
  std::vector<std::uint8_t> bytes = build_packet(gradient(1, 1, 1, kWorker0), v);
  t.deliver_bytes(std::span(bytes).first(bytes.size() - 1));  // truncated value
  t.deliver_bytes(std::span(bytes).first(10));                // truncated header
  t.deliver_bytes({});
  bytes[0] ^= 0xFF;  // bad magic
  t.deliver_bytes(bytes);
  EXPECT_EQ(t.ps.stats().dropped, 9u);
  EXPECT_EQ(t.ps.stats().packets_received, 0u);
  EXPECT_EQ(t.ps.stored_fragments(), 0u);
  EXPECT_TRUE(t.sink.packets.empty());
}

TEST(PsEndpoint, CollisionRehashesTheIndexInTheAck) {
  PsConfig c = make_config({3});
  c.index_policy = IndexPolicy::kHashed;  // unsalted: kHashedSlots salts the rehash with the slot
  PsUnderTest t(c);
  const std::uint32_t index = base_aggregator_index(kJob, 77, {0, kAggregators}, IndexPolicy::kHashed);
  t.individual(77, 0, 0, kWorker0, {1, 0, 0, 0});
  // Worker 1's packet found the aggregator busy with another fragment: forwarded with the flag.
  Header collided = gradient(77, 0b10, 1, kWorker0 + 1);
  collided.collision = true;
  collided.resend = true;
  t.deliver(collided, {2, 0, 0, 0});
  t.individual(77, 0, 2, kWorker0 + 2, {3, 0, 0, 0});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  const auto& ack = t.sink.packets[0];
  expect_multicast_result(ack, 77, {6, 0, 0, 0});
  EXPECT_TRUE(ack.header.collision);
  EXPECT_EQ(ack.header.bitmap, rehash_aggregator_index(index, {0, kAggregators}));
  EXPECT_NE(ack.header.bitmap, index);
  EXPECT_EQ(ack.header.aggregator_index, index);  // switches free the aggregator the gradients used
  EXPECT_EQ(t.ps.stats().collisions, 1u);
}

// Fragment `seq` of two workers at aggregator `index`: worker 0's aggregated there, worker 1's
// found it busy, and its switch offered `offered` (plus one; 0: none).
void deliver_with_a_collision(PsUnderTest& t, Seq seq, std::uint32_t index, std::uint16_t offered = 0) {
  Header first = gradient(seq, 0b01, 1, kWorker0);
  first.aggregator_index = index;
  t.deliver(first, {1, 0, 0, 0});
  Header collided = gradient(seq, 0b10, 1, kWorker0 + 1);
  collided.aggregator_index = index;
  collided.collision = true;
  collided.resend = true;
  collided.offered_aggregator = offered;
  t.deliver(collided, {2, 0, 0, 0});
}

// An allocated fragment (the default) collides only where a switch's table is full: its index
// stays, and its parameter packet tells the switches to find its aggregator by <job, seq>.
TEST(PsEndpoint, AnAllocatedFragmentsCollisionMovesNoIndex) {
  PsConfig c = make_config({2});
  ASSERT_EQ(c.index_policy, IndexPolicy::kAllocated);
  PsUnderTest t(c);
  deliver_with_a_collision(t, 5, 20, 25 + 1);
  ASSERT_EQ(t.sink.packets.size(), 1u);
  const Header& ack = t.sink.packets[0].header;
  EXPECT_TRUE(ack.allocate);
  EXPECT_FALSE(ack.collision);
  EXPECT_EQ(ack.bitmap, 0u);
  EXPECT_EQ(ack.aggregator_index, 20u);
  EXPECT_EQ(t.ps.stats().collisions, 1u);
}

// With hashed_slots the fragment moves to the aggregator the switch offered, where that is the
// job's and not the one it collided at; else (and with the paper's indices) to the rehashed one.
TEST(PsEndpoint, CollisionMovesAHashedSlotsFragmentToTheOfferedAggregator) {
  for (const IndexPolicy policy : {IndexPolicy::kHashedSlots, IndexPolicy::kHashed}) {
    PsConfig c = make_config({2});
    c.index_policy = policy;
    c.aggregators = {16, 16};
    PsUnderTest t(c);
    const std::uint32_t index = 20;
    // offer + 1 -> where the fragment moves, with hashed_slots
    const std::pair<std::uint16_t, std::optional<std::uint32_t>> cases[] = {
        {25 + 1, 25},           {16 + 1, 16},           {31 + 1, 31},          {0, std::nullopt},
        {20 + 1, std::nullopt}, {15 + 1, std::nullopt}, {32 + 1, std::nullopt}};
    Seq seq = 0;
    for (const auto& [offered, moved] : cases) {
      SCOPED_TRACE(testing::Message() << to_string(policy) << ", offered " << offered);
      deliver_with_a_collision(t, seq, index, offered);
      ASSERT_EQ(t.sink.packets.size(), 1u);
      const Header& ack = t.sink.packets[0].header;
      EXPECT_TRUE(ack.collision);
      const std::uint64_t salt = policy == IndexPolicy::kHashedSlots ? seq % c.max_window_seqs + 1 : 0;
      const std::uint32_t rehashed = rehash_aggregator_index(index, c.aggregators, salt);
      EXPECT_EQ(ack.bitmap, policy == IndexPolicy::kHashedSlots && moved ? *moved : rehashed);
      t.sink.packets.clear();
      ++seq;
    }
  }
}

// Static sharing: the job owns [32, 48) of the table. Whatever index a collision was reported
// at (in the share, or a corrupt one outside it), the rehashed index the workers move to is
// in the share, and it moves whenever it can.
TEST(PsEndpoint, CollisionRehashStaysInsideTheJobsShare) {
  const AggregatorRange share{32, 16};
  PsConfig c = make_config({2}, 4, 1024);
  c.aggregators = share;
  c.index_policy = IndexPolicy::kLinear;  // a static share's (plan.cc)
  PsUnderTest t(c);
  for (Seq seq = 0; seq < 600; ++seq) {
    // Every third fragment collided at an index of another job (seq % 64 spans the table).
    const std::uint32_t index = seq % 3 == 0 ? seq % 64 : base_aggregator_index(kJob, seq, share, IndexPolicy::kHashed);
    deliver_with_a_collision(t, seq, index);
    ASSERT_EQ(t.sink.packets.size(), 1u) << "seq " << seq;
    const Header& ack = t.sink.packets[0].header;
    EXPECT_TRUE(ack.collision);
    EXPECT_TRUE(share.contains(ack.bitmap)) << "seq " << seq << ": " << index << " -> " << ack.bitmap;
    if (share.contains(index)) {
      EXPECT_NE(ack.bitmap, index);
    }
    EXPECT_EQ(ack.aggregator_index, index);  // switches free the aggregator the gradients used
    t.sink.packets.clear();
  }
  EXPECT_EQ(t.ps.stats().collisions, 600u);
}

TEST(PsEndpoint, EcnIsCopiedIntoTheResult) {
  PsUnderTest t(make_config({2}));
  t.individual(1, 0, 0, kWorker0, {1, 1, 1, 1}, /*ecn=*/true);
  t.individual(1, 0, 1, kWorker0 + 1, {1, 1, 1, 1});
  t.individual(2, 0, 0, kWorker0, {1, 1, 1, 1});
  t.individual(2, 0, 1, kWorker0 + 1, {1, 1, 1, 1});
  // A discarded duplicate still carries news of congestion (as the switch keeps it, Fig. 7).
  t.individual(3, 0, 0, kWorker0, {1, 1, 1, 1});
  t.individual(3, 0, 0, kWorker0, {1, 1, 1, 1}, /*ecn=*/true);
  t.individual(3, 0, 1, kWorker0 + 1, {1, 1, 1, 1});
  ASSERT_EQ(t.sink.packets.size(), 3u);
  EXPECT_TRUE(t.sink.packets[0].header.ecn);
  EXPECT_FALSE(t.sink.packets[1].header.ecn);
  EXPECT_TRUE(t.sink.packets[2].header.ecn);
}

// Sends the overflow request for `seq` by saturating value 0, for 3 workers in one group.
void saturate(PsUnderTest& t, Seq seq) {
  t.individual(seq, 0, 0, kWorker0, {kSaturatedMax, 1, 2, 3});
  t.individual(seq, 0, 1, kWorker0 + 1, {0, 1, 2, 3});
  t.individual(seq, 0, 2, kWorker0 + 2, {0, 1, 2, 3});
}

void expect_overflow_request(const RecordingSink::Packet& p, Seq seq, Address dst) {
  EXPECT_TRUE(p.header.is_ack);
  EXPECT_TRUE(p.header.overflow);
  EXPECT_FALSE(p.header.float_payload);
  EXPECT_EQ(p.header.seq, seq);
  EXPECT_EQ(p.header.dst, dst);
  EXPECT_EQ(p.header.value_count, 0u);
}

TEST(PsEndpoint, SaturatedValueLeadsToFloatResultSummedInDouble) {
  PsUnderTest t(make_config({3}));
  saturate(t, 50);
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_overflow_request(t.sink.packets[0], 50, multicast_group_address(kJob));
  EXPECT_EQ(t.ps.stats().overflows, 1u);
  EXPECT_EQ(t.ps.stats().completions, 0u);

  // 2^24 + 1 + 1: float addition in any order loses both ones, double keeps them.
  const std::vector<std::vector<float>> floats = {
      {16777216.0f, 0.1f, 1e30f, -3.5f}, {1.0f, 0.2f, -1e30f, 0.25f}, {1.0f, 0.3f, 1.0f, 0.0f}};
  for (std::uint32_t w = 0; w < 3; ++w) {
    Header h = gradient(50, 1u << w, 1, kWorker0 + w);
    h.float_payload = true;
    h.resend = true;
    t.deliver(h, float_bits(floats[w]));
  }
  ASSERT_EQ(t.sink.packets.size(), 2u);
  const auto& result = t.sink.packets[1];
  EXPECT_TRUE(result.header.is_ack);
  EXPECT_TRUE(result.header.float_payload);
  EXPECT_FALSE(result.header.overflow);
  EXPECT_EQ(result.header.dst, multicast_group_address(kJob));
  EXPECT_EQ(result.header.seq, 50u);
  ASSERT_EQ(result.values.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(result.values[i], sum_as_float_bits({floats[0][i], floats[1][i], floats[2][i]})) << i;
  }
  EXPECT_EQ(std::bit_cast<float>(result.values[0]), 16777218.0f);
  EXPECT_EQ(std::bit_cast<float>(result.values[2]), 1.0f);
  EXPECT_EQ(t.ps.stats().completions, 1u);
  EXPECT_EQ(t.ps.stats().parameters_sent, 2u);
}

TEST(PsEndpoint, SumOutsideInt32LeadsToOverflowRequest) {
  PsUnderTest t(make_config({2}));
  t.individual(1, 0, 0, kWorker0, {2'000'000'000, 0, 0, 0});
  t.individual(1, 0, 1, kWorker0 + 1, {2'000'000'000, 0, 0, 0});
  t.individual(2, 0, 0, kWorker0, {0, -2'000'000'000, 0, 0});
  t.individual(2, 0, 1, kWorker0 + 1, {0, -2'000'000'000, 0, 0});
  t.individual(3, 0, 0, kWorker0, {0, 0, kSaturatedMin, 0});  // saturated, though the sum fits
  t.individual(3, 0, 1, kWorker0 + 1, {0, 0, 5, 0});
  // The largest sums that fit are fine.
  t.individual(4, 0, 0, kWorker0, {kSaturatedMax - 1, kSaturatedMin + 1, 0, 0});
  t.individual(4, 0, 1, kWorker0 + 1, {1, -1, 0, 0});
  ASSERT_EQ(t.sink.packets.size(), 4u);
  for (Seq seq = 1; seq <= 3; ++seq) {
    expect_overflow_request(t.sink.packets[seq - 1], seq, multicast_group_address(kJob));
  }
  expect_multicast_result(t.sink.packets[3], 4, {kSaturatedMax, kSaturatedMin, 0, 0});
  EXPECT_EQ(t.ps.stats().overflows, 3u);
}

TEST(PsEndpoint, PacketsDuringFloatCollection) {
  PsUnderTest t(make_config({3}));
  saturate(t, 8);
  ASSERT_EQ(t.sink.packets.size(), 1u);
  // Worker 1 missed the overflow request and resends its int32 gradient: ask it again.
  Header int_resend = gradient(8, 0b10, 1, kWorker0 + 1);
  int_resend.resend = true;
  t.deliver(int_resend, {0, 1, 2, 3});
  ASSERT_EQ(t.sink.packets.size(), 2u);
  expect_overflow_request(t.sink.packets[1], 8, kWorker0 + 1);
  EXPECT_EQ(t.ps.stats().results_resent, 1u);

  Header f0 = gradient(8, 0b1, 1, kWorker0);
  f0.float_payload = true;
  t.deliver(f0, float_bits({1, 2, 3, 4}));
  t.deliver(f0, float_bits({1, 2, 3, 4}));  // duplicate
  EXPECT_EQ(t.ps.stats().overlaps_dropped, 1u);
  Header aggregated = gradient(8, 0b110, 1, kWorker0 + 1);
  aggregated.float_payload = true;
  t.deliver(aggregated, float_bits({1, 2, 3, 4}));  // floats come from single workers only
  Header unknown = gradient(9, 0b1, 1, kWorker0);
  unknown.float_payload = true;
  t.deliver(unknown, float_bits({1, 2, 3, 4}));  // no overflow request for seq 9
  t.individual(10, 0, 0, kWorker0, {1, 1, 1, 1});
  Header not_asked = gradient(10, 0b10, 1, kWorker0 + 1);
  not_asked.float_payload = true;
  t.deliver(not_asked, float_bits({1, 2, 3, 4}));  // seq 10 did not overflow
  EXPECT_EQ(t.ps.stats().dropped, 3u);
  EXPECT_EQ(t.sink.packets.size(), 2u);

  for (std::uint32_t w = 1; w < 3; ++w) {
    Header f = gradient(8, 1u << w, 1, kWorker0 + w);
    f.float_payload = true;
    t.deliver(f, float_bits({0.5f, 0.5f, 0.5f, 0.5f}));
  }
  ASSERT_EQ(t.sink.packets.size(), 3u);
  EXPECT_EQ(t.sink.packets[2].values, float_bits({2.0f, 3.0f, 4.0f, 5.0f}));

  // A late float resend gets the float result, unicast.
  Header late = gradient(8, 0b100, 1, kWorker0 + 2);
  late.float_payload = true;
  t.deliver(late, float_bits({0.5f, 0.5f, 0.5f, 0.5f}));
  ASSERT_EQ(t.sink.packets.size(), 4u);
  EXPECT_TRUE(t.sink.packets[3].header.float_payload);
  EXPECT_EQ(t.sink.packets[3].header.dst, kWorker0 + 2);
  EXPECT_EQ(t.sink.packets[3].values, t.sink.packets[2].values);
}

TEST(PsEndpoint, LateResendOfCompletedFragmentGetsUnicastResult) {
  PsUnderTest t(make_config({3}));
  t.individual(20, 0, 0, kWorker0, {1, 2, 3, 4});
  t.individual(20, 0, 1, kWorker0 + 1, {1, 2, 3, 4});
  t.individual(20, 0, 2, kWorker0 + 2, {1, 2, 3, 4});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  // Worker 2 lost the parameter packet and resends after its timeout.
  Header resend = gradient(20, 0b100, 1, kWorker0 + 2);
  resend.resend = true;
  t.deliver(resend, {1, 2, 3, 4});
  ASSERT_EQ(t.sink.packets.size(), 2u);
  const auto& again = t.sink.packets[1];
  EXPECT_TRUE(again.header.is_ack);
  EXPECT_EQ(again.header.seq, 20u);
  EXPECT_EQ(again.header.dst, kWorker0 + 2);
  EXPECT_EQ(again.header.src, kPs);
  EXPECT_EQ(again.values, (std::vector<std::int32_t>{3, 6, 9, 12}));
  EXPECT_EQ(t.ps.stats().results_resent, 1u);
  EXPECT_EQ(t.ps.stats().parameters_sent, 1u);
  EXPECT_EQ(t.ps.stats().completions, 1u);
}

// A worker's resend comes while the fragment still lacks others' contributions: the PS asks
// each missing worker for a resend (docs/protocol.md "Resend requests"), again only once the
// fragment's age has doubled since the last request, and never without a resend (a first copy,
// a collision's) or for a complete fragment.
TEST(PsEndpoint, AResendAsksTheWorkersStillMissingForTheirsAsTheFragmentAges) {
  PsConfig config = make_config({2, 2});
  config.workers = {kWorker0, kWorker0 + 1, kWorker0 + 2, kWorker0 + 3};  // by leaf node
  PsUnderTest t(config);
  auto requests = [&] {
    std::vector<Address> to;
    for (const auto& p : t.sink.packets) {
      if (!p.header.resend_request) continue;
      EXPECT_TRUE(p.header.is_ack);
      EXPECT_EQ(p.header.job, kJob);
      EXPECT_EQ(p.header.seq, 4u);
      EXPECT_EQ(p.header.src, kPs);
      EXPECT_TRUE(p.values.empty());
      to.push_back(p.header.dst);
    }
    t.sink.packets.clear();
    return to;
  };
  t.individual(4, 0, 0, kWorker0, {1, 1, 1, 1});  // t = 1 us: the fragment opens
  Header collided = own(4, 1, 0, kWorker0 + 2);
  collided.resend = collided.collision = true;  // a first copy forwarded past a busy aggregator
  t.deliver(collided, {3, 3, 3, 3});            // t = 2 us
  EXPECT_EQ(requests(), std::vector<Address>{});
  Header resend = own(4, 0, 0, kWorker0);
  resend.resend = true;
  t.deliver(resend, {1, 1, 1, 1});  // t = 3 us: worker 0 timed out; 1 and 3 are missing
  EXPECT_EQ(requests(), (std::vector<Address>{kWorker0 + 1, kWorker0 + 3}));
  EXPECT_EQ(t.ps.stats().resend_requests, 2u);
  t.deliver(resend, {1, 1, 1, 1});  // t = 4 us: the fragment's age at the request (2 us) has not passed again
  EXPECT_EQ(requests(), std::vector<Address>{});
  Header resend3 = own(4, 1, 1, kWorker0 + 3);
  resend3.resend = true;
  t.deliver(resend3, {4, 4, 4, 4});  // t = 5 us: worker 3's, merged; 1 still missing
  EXPECT_EQ(requests(), (std::vector<Address>{kWorker0 + 1}));
  t.deliver(resend, {1, 1, 1, 1});  // t = 6 us: not yet (next at 9 us)
  EXPECT_EQ(requests(), std::vector<Address>{});
  t.individual(4, 0, 1, kWorker0 + 1, {2, 2, 2, 2});  // complete: the result, no request
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 4, {10, 10, 10, 10});
  t.sink.packets.clear();
  t.deliver(resend, {1, 1, 1, 1});  // a late resend gets its result again, nobody is asked
  ASSERT_EQ(t.sink.packets.size(), 1u);
  EXPECT_FALSE(t.sink.packets[0].header.resend_request);
  EXPECT_EQ(t.ps.stats().resend_requests, 3u);
}

// Workers 0-2 run ahead, worker 3 lags `lag` fragments behind (its window allows it): memory
// must stay within the window however many fragments go through, and every sum is exact.
TEST(PsEndpoint, MemoryIsBoundedByTheWindowNotTheTensor) {
  constexpr std::uint32_t kWindow = 64;
  constexpr std::uint32_t kFragments = 10'000;
  constexpr std::uint32_t kLag = 40;
  PsUnderTest t(make_config({2, 2}, 4, kWindow));
  std::size_t most_stored = 0;
  Seq expected_next = 0;
  for (std::uint32_t step = 0; step < kFragments + kLag; ++step) {
    if (step < kFragments) {
      const Seq seq = step;
      const auto v = static_cast<std::int32_t>(seq);
      t.deliver(gradient(seq, 0b11, 0b01, kWorker0 + 1), {v, 2 * v, -v, 1});  // group 0 aggregated
      t.individual(seq, 1, 0, kWorker0 + 2, {v, 0, 0, 1});
    }
    if (step >= kLag) {
      const Seq seq = step - kLag;
      t.individual(seq, 1, 1, kWorker0 + 3, {1, 0, 0, 1});
    }
    most_stored = std::max(most_stored, t.ps.stored_fragments());
    while (expected_next < t.sink.packets.size()) {
      const auto& p = t.sink.packets[expected_next];
      const auto v = static_cast<std::int32_t>(expected_next);
      ASSERT_EQ(p.header.seq, expected_next);
      ASSERT_EQ(p.values, (std::vector<std::int32_t>{2 * v + 1, 2 * v, -v, 3}));
      ++expected_next;
    }
  }
  EXPECT_EQ(expected_next, kFragments);
  EXPECT_LE(most_stored, 2 * kWindow + 1);
  EXPECT_GE(most_stored, kLag);  // the lagging worker's fragments were held, as they must be
  EXPECT_EQ(t.ps.stats().completions, kFragments);
  EXPECT_EQ(t.ps.stats().stale, 0u);
  EXPECT_EQ(t.ps.stats().dropped, 0u);
}

TEST(PsEndpoint, StaleAndFarAheadPacketsAreCounted) {
  constexpr std::uint32_t kWindow = 16;
  PsUnderTest t(make_config({2}, 4, kWindow));
  for (Seq seq = 0; seq < 500; ++seq) {
    t.individual(seq, 0, 0, kWorker0, {1, 1, 1, 1});
    t.individual(seq, 0, 1, kWorker0 + 1, {1, 1, 1, 1});
  }
  ASSERT_EQ(t.sink.packets.size(), 500u);
  // Both workers sent 499, so both hold every result before 499 - 16 = 483: those are gone.
  EXPECT_EQ(t.ps.stored_fragments(), kWindow + 1);
  t.individual(482, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().stale, 1u);
  EXPECT_EQ(t.sink.packets.size(), 500u);
  t.individual(483, 0, 0, kWorker0, {1, 1, 1, 1});  // still held: answered
  ASSERT_EQ(t.sink.packets.size(), 501u);
  EXPECT_EQ(t.sink.packets.back().header.dst, kWorker0);
  // The oldest slot is 483: at most 2 x 16 ahead of it is accepted.
  t.individual(483 + 2 * kWindow + 1, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().dropped, 1u);
  t.individual(483 + 2 * kWindow, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().dropped, 1u);
  EXPECT_EQ(t.ps.stored_fragments(), kWindow + 2);
}

TEST(PsEndpoint, StalledWorkerCannotMakeMemoryGrow) {
  constexpr std::uint32_t kWindow = 8;
  PsUnderTest t(make_config({2}, 4, kWindow));
  // Worker 1 never sends; worker 0 (buggy, or spoofed) runs far ahead of any window.
  for (Seq seq = 0; seq < 1000; ++seq) t.individual(seq, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_LE(t.ps.stored_fragments(), 2 * kWindow + 1);
  EXPECT_GT(t.ps.stats().dropped, 900u);
  EXPECT_TRUE(t.sink.packets.empty());
}

// Two PS shards: this PS sees every other sequence number; the window counts both shards.
TEST(PsEndpoint, ShardSeesEveryOtherSequenceNumber) {
  constexpr std::uint32_t kWindow = 32;
  PsUnderTest t(make_config({2}, 4, kWindow));
  for (Seq seq = 1; seq < 4000; seq += 2) {
    t.individual(seq, 0, 1, kWorker0 + 1, {1, 1, 1, 1});
    t.individual(seq, 0, 0, kWorker0, {2, 2, 2, 2});
    ASSERT_LE(t.ps.stored_fragments(), kWindow / 2 + 2);
  }
  EXPECT_EQ(t.ps.stats().completions, 2000u);
  EXPECT_EQ(t.ps.stats().stale + t.ps.stats().dropped, 0u);
}

// Real workers against P PS shards, directly connected (no switch), max_window_seqs = window x
// P as plan_job sets it: every round completes exactly and no PS drops a packet, for shard
// counts 1-4, rounds whose fragment count is not a multiple of P (some below it), windows 1-3.
class PsShardsWithWorkers : public ::testing::TestWithParam<std::tuple<std::uint32_t, std::uint32_t>> {};

TEST_P(PsShardsWithWorkers, EveryRoundCompletesExactlyWithoutDrops) {
  const auto [shards, window] = GetParam();
  constexpr std::uint32_t kWorkers = 2;
  constexpr std::uint16_t kValues = 4;
  std::vector<PsEndpoint> servers;
  for (std::uint32_t k = 0; k < shards; ++k) {
    PsConfig c = make_config({kWorkers}, kValues, window * shards);
    c.tree = flat_tree(kWorkers);  // nodes 1..kWorkers: the workers
    c.self = kPs + k;
    servers.emplace_back(c);
  }
  std::vector<WorkerEndpoint> workers;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    WorkerConfig c;
    c.job = kJob;
    c.self = kWorker0 + w;
    for (std::uint32_t k = 0; k < shards; ++k) c.ps.push_back(PsRoute{kPs + k, static_cast<std::uint16_t>(1 + w)});
    c.values_per_packet = kValues;
    c.aggregators = {0, kAggregators};
    c.congestion.initial_window = window;
    c.congestion.max_window = window;
    c.initial_seq = 0xFFFFFFF0u;  // across the wrap, too
    workers.emplace_back(c);
  }
  // Packets in flight, delivered in FIFO order: worker packets to their PS, multicasts to all.
  struct Queue final : PacketSink {
    void send(std::span<const std::uint8_t> p) override { packets.emplace_back(p.begin(), p.end()); }
    std::vector<std::vector<std::uint8_t>> packets;
  } queue;
  Time now = time_from_ns(1'000'000);
  const std::uint32_t rounds[] = {3, 1, 5, 2, 7, 1, 1, 6};
  for (const std::uint32_t fragments : rounds) {
    std::vector<std::vector<float>> inputs(kWorkers);
    for (std::uint32_t w = 0; w < kWorkers; ++w) {
      for (std::uint32_t x = 0; x < kValues * fragments - 1; ++x)
        inputs[w].push_back(0.125f * (x + 1) * (w + 1) - 0.5f);
      ASSERT_TRUE(workers[w].start(inputs[w], now, queue));
    }
    for (std::size_t next = 0; next < queue.packets.size(); ++next) {
      const std::vector<std::uint8_t> p = queue.packets[next];
      Header h;
      ASSERT_EQ(decode_header(p, h), DecodeError::kOk);
      now += Duration(1000);
      if (!h.is_ack) {
        ASSERT_GE(h.dst, kPs);
        ASSERT_LT(h.dst, kPs + shards);
        servers[h.dst - kPs].on_packet(p, now, queue);
      } else {
        for (WorkerEndpoint& w : workers) {
          if (h.dst == multicast_group_address(kJob) || h.dst == w.config().self) w.on_packet(p, now, queue);
        }
      }
    }
    queue.packets.clear();
    for (std::uint32_t w = 0; w < kWorkers; ++w) {
      ASSERT_EQ(workers[w].state(), WorkerState::kIdle)
          << "worker " << w << ", a round of " << fragments << " fragments: " << workers[w].error();
    }
    std::vector<std::int32_t> q0(inputs[0].size()), q1(inputs[1].size());
    quantize(inputs[0], 1e8, q0);
    quantize(inputs[1], 1e8, q1);
    for (const WorkerEndpoint& w : workers) {
      ASSERT_EQ(w.result().size(), q0.size());
      for (std::size_t x = 0; x < q0.size(); ++x) {
        ASSERT_EQ(w.result()[x], dequantize_one(std::int64_t{q0[x]} + q1[x], 1e8)) << "value " << x;
      }
    }
  }
  for (const PsEndpoint& ps : servers) {
    EXPECT_EQ(ps.stats().dropped, 0u);
    EXPECT_EQ(ps.stats().stale, 0u);
    EXPECT_LE(ps.stored_fragments(), 2 * window * shards + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(ShardsByWindow, PsShardsWithWorkers,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u), ::testing::Values(1u, 2u, 3u)));

TEST(PsEndpoint, SequenceNumbersWrapAround) {
  constexpr std::uint32_t kWindow = 16;
  constexpr Seq kFirst = 0xFFFFFF00u;
  PsUnderTest t(make_config({3}, 4, kWindow));
  // The first packet seen is not the job's first fragment (reordering): earlier ones still count.
  t.individual(kFirst + 5, 0, 0, kWorker0, {5, 0, 1, -1});
  std::mt19937 rng(1234);
  std::vector<Seq> done;
  for (std::uint32_t i = 0; i < 600; ++i) {
    const Seq seq = kFirst + i;
    std::vector<std::uint32_t> order = {0, 1, 2};
    std::shuffle(order.begin(), order.end(), rng);
    for (std::uint32_t w : order) {
      if (i == 5 && w == 0) continue;  // already sent
      t.individual(seq, 0, w, kWorker0 + w, {static_cast<std::int32_t>(i), static_cast<std::int32_t>(w), 1, -1});
    }
    ASSERT_LE(t.ps.stored_fragments(), 2 * kWindow + 1);
  }
  ASSERT_EQ(t.sink.packets.size(), 600u);
  for (std::uint32_t i = 0; i < 600; ++i) {
    const auto& p = t.sink.packets[i];
    EXPECT_EQ(p.header.seq, kFirst + i);
    EXPECT_EQ(p.values, (std::vector<std::int32_t>{3 * static_cast<std::int32_t>(i), 3, 3, -3}));
  }
  EXPECT_EQ(t.ps.stats().stale + t.ps.stats().dropped + t.ps.stats().overlaps_dropped, 0u);
  // A packet from before the wrap is now far behind.
  t.individual(kFirst + 10, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().stale, 1u);
}

TEST(PsEndpoint, FirstPacketOpensTheWindowOneWindowBack) {
  constexpr std::uint32_t kWindow = 16;
  PsUnderTest t(make_config({2}, 4, kWindow));
  t.individual(1000, 0, 0, kWorker0, {1, 1, 1, 1});
  t.individual(1000 - kWindow, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().stale, 0u);
  t.individual(1000 - kWindow - 1, 0, 0, kWorker0, {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().stale, 1u);
}

// Random corruption of valid packets: never a crash, never a malformed packet out (checked by
// the sink), memory within the bound.
TEST(PsEndpoint, CorruptedPacketsNeverCrash) {
  constexpr std::uint32_t kWindow = 8;
  PsUnderTest t(make_config({2, 3}, 4, kWindow));
  std::mt19937 rng(42);
  for (int i = 0; i < 50'000; ++i) {
    Header h = gradient(rng() % 64, 1u << (rng() % 3), 1u << (rng() % 2), kWorker0 + rng() % 5);
    h.float_payload = rng() % 4 == 0;
    h.collision = rng() % 4 == 0;
    h.ecn = rng() % 2 == 0;
    std::vector<std::int32_t> values(4);
    for (auto& v : values) v = static_cast<std::int32_t>(rng());
    std::vector<std::uint8_t> bytes = build_packet(h, values);
    const int flips = static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    t.deliver_bytes(bytes);
    ASSERT_LE(t.ps.stored_fragments(), 2 * kWindow + 1);
  }
  const PsStats& s = t.ps.stats();
  EXPECT_GT(s.dropped, 0u);
  EXPECT_GT(s.aggregations, 0u);
}

// A tree three switches deep, and a worker straight under the PS (docs/protocol.md "Aggregation
// tree"): sums of any node merge as long as their workers are new.
TEST(PsEndpoint, MergesSumsFromEveryLevelOfADeepTreeWithoutCountingAWorkerTwice) {
  PsConfig c = make_config({});
  // 0: PS; 1: spine above 2 and 3; 2: ToR of workers 4, 5; 3: ToR of workers 6, 7; 8: a worker.
  c.tree = {0, 0, 1, 1, 2, 2, 3, 3, 0};
  PsUnderTest t(c);
  auto from = [](std::uint16_t node, std::uint32_t bitmap, std::uint8_t fan_in) {
    Header h = gradient(5, 1, 1, kWorker0);
    h.node = node;
    h.bitmap = bitmap;
    h.fan_in = fan_in;
    return h;
  };
  t.deliver(from(2, 0b01, 2), {1, 0, 0, 0});  // ToR 2 flushed with worker 4 only
  t.deliver(from(1, 0b01, 2), {9, 9, 9, 9});  // the spine's partial of ToR 2: worker 4 again
  t.deliver(from(4, 1, 1), {9, 9, 9, 9});     // worker 4's own resend
  EXPECT_EQ(t.ps.stats().overlaps_dropped, 2u);
  t.deliver(from(3, 0b11, 2), {0, 1, 0, 0});  // ToR 3 whole: workers 6 and 7
  t.deliver(from(5, 1, 1), {0, 0, 1, 0});     // worker 5
  EXPECT_TRUE(t.sink.packets.empty());
  t.deliver(from(8, 1, 1), {0, 0, 0, 1});  // the worker under the PS: every one is in
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_multicast_result(t.sink.packets[0], 5, {1, 1, 1, 1});
  // Nodes and bitmaps the tree does not have are dropped.
  t.deliver(from(9, 1, 1), {1, 1, 1, 1});      // no node 9
  t.deliver(from(0, 1, 1), {1, 1, 1, 1});      // the PS's own
  t.deliver(from(1, 0b100, 2), {1, 1, 1, 1});  // the spine has two children
  t.deliver(from(1, 0b11, 3), {1, 1, 1, 1});   // nor three
  t.deliver(from(4, 0b11, 1), {1, 1, 1, 1});   // a worker speaks for itself
  EXPECT_EQ(t.ps.stats().dropped, 5u);
}

TEST(PsEndpoint, ATreeThatIsNotOneIsRefusedWithOneSentence) {
  PsConfig c = make_config({2});
  auto refusal = [&c] {
    try {
      PsEndpoint ps(c);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  c.tree = {0};
  EXPECT_EQ(refusal(), "job 7: tree has 1 nodes; it needs the PS and 1 to 65535 more");
  c.tree = {0, 2, 0};
  EXPECT_EQ(refusal(), "job 7: tree[1] is 2; a node's parent must come before it");
  c.tree = {0, 0};
  c.tree.insert(c.tree.end(), 33, 1);
  EXPECT_EQ(refusal(), "job 7: tree node 1 has more than 32 children; a bitmap holds 32");
  c.tree = flat_tree(100);  // the PS itself takes any number
  EXPECT_EQ(refusal(), "");
}

TEST(PsEndpoint, BadConfigDoesNotCrash) {
  PsConfig c = make_config({2}, 4, 0);
  c.aggregators = {0, 0};
  PsUnderTest t(c);
  t.deliver(gradient(1, 0b11, 1, kWorker0), {1, 1, 1, 1});
  EXPECT_EQ(t.ps.stats().completions, 1u);
}

// ---------------------------------------------------------------------------------------------
// Round shape (docs/protocol.md): contributions whose round_shape differs never merge.

void expect_mismatch_notice(const RecordingSink::Packet& p, Seq seq, Address dst) {
  EXPECT_TRUE(p.header.is_ack);
  EXPECT_EQ(p.header.round_shape, kRoundShapeMismatch);
  EXPECT_EQ(p.header.seq, seq);
  EXPECT_EQ(p.header.dst, dst);
  EXPECT_EQ(p.header.value_count, 0);
  EXPECT_FALSE(p.header.overflow);
  EXPECT_FALSE(p.header.float_payload);
  EXPECT_FALSE(p.header.collision);
}

TEST(PsEndpoint, DifferentRoundShapesFailTheFragmentAndMulticastTheNotice) {
  PsUnderTest t(make_config({3}));
  Header last = gradient(100, 1u << 0, 1, kWorker0);
  last.round_shape = 3;  // worker 0: its round's last fragment, 3 real values
  t.deliver(last, {1, 2, 3, 0});
  Header not_last = gradient(100, 1u << 1, 1, kWorker0 + 1);  // worker 1: its round goes on
  t.deliver(not_last, {4, 5, 6, 7});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_mismatch_notice(t.sink.packets[0], 100, multicast_group_address(kJob));
  EXPECT_EQ(t.sink.packets[0].header.aggregator_index, last.aggregator_index);  // frees the switches' aggregator
  EXPECT_EQ(t.ps.stats().shape_mismatches, 1u);
  EXPECT_EQ(t.ps.stats().parameters_sent, 1u);
  EXPECT_EQ(t.ps.stats().completions, 0u);

  // Worker 2's packet, of either shape, does not complete it: it gets the notice, to it only.
  Header third = gradient(100, 1u << 2, 1, kWorker0 + 2);
  third.round_shape = 3;
  t.deliver(third, {1, 1, 1, 1});
  ASSERT_EQ(t.sink.packets.size(), 2u);
  expect_mismatch_notice(t.sink.packets[1], 100, kWorker0 + 2);
  t.deliver(not_last, {4, 5, 6, 7});  // a resend
  ASSERT_EQ(t.sink.packets.size(), 3u);
  expect_mismatch_notice(t.sink.packets[2], 100, kWorker0 + 1);
  EXPECT_EQ(t.ps.stats().shape_mismatches, 1u);
  EXPECT_EQ(t.ps.stats().results_resent, 2u);
  EXPECT_EQ(t.ps.stats().completions, 0u);

  // Another fragment whose contributions agree (all last, 4 values) completes as always.
  for (std::uint32_t w = 0; w < 3; ++w) {
    Header h = gradient(101, 1u << w, 1, kWorker0 + w);
    h.round_shape = 4;
    t.deliver(h, {1, 1, 1, 1});
  }
  ASSERT_EQ(t.sink.packets.size(), 4u);
  expect_multicast_result(t.sink.packets[3], 101, {3, 3, 3, 3});
  EXPECT_EQ(t.sink.packets[3].header.round_shape, 0);
}

// A partial aggregate (a switch's) with one shape and an individual with another: no mix.
TEST(PsEndpoint, PartialAggregateAndIndividualOfDifferentShapesDoNotMerge) {
  PsUnderTest t(make_config({2, 1}));
  Header partial = gradient(7, 0b11, 0b01, kWorker0);
  partial.round_shape = 2;
  t.deliver(partial, {2, 2, 0, 0});
  Header single = gradient(7, 1, 0b10, kWorker0 + 2);
  single.round_shape = 0;
  t.deliver(single, {5, 5, 5, 5});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  expect_mismatch_notice(t.sink.packets[0], 7, multicast_group_address(kJob));
  EXPECT_EQ(t.ps.stats().aggregations, 1u);
}

// Float32 resends carry the shape too: a float contribution with another shape fails the slot.
TEST(PsEndpoint, DifferentRoundShapesInTheFloatPhase) {
  PsUnderTest t(make_config({2}));
  Header h0 = gradient(50, 1, 1, kWorker0);
  Header h1 = gradient(50, 2, 1, kWorker0 + 1);
  t.deliver(h0, {kSaturatedMax, 0, 0, 0});
  t.deliver(h1, {1, 0, 0, 0});
  ASSERT_EQ(t.sink.packets.size(), 1u);
  EXPECT_TRUE(t.sink.packets[0].header.overflow);
  h0.float_payload = true;
  t.deliver(h0, float_bits({1.0f, 0, 0, 0}));
  h1.float_payload = true;
  h1.round_shape = 1;
  t.deliver(h1, float_bits({2.0f, 0, 0, 0}));
  ASSERT_EQ(t.sink.packets.size(), 2u);
  expect_mismatch_notice(t.sink.packets[1], 50, multicast_group_address(kJob));
  EXPECT_EQ(t.ps.stats().completions, 0u);
}

// ---------------------------------------------------------------------------------------------
// Memory: bounded by the config whatever packets claim; configs beyond the budget are refused.

std::string constructor_error(const PsConfig& c) {
  try {
    PsEndpoint ps(c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(PsEndpoint, ConfigsBeyondTheMemoryBudgetAreRefusedWithOneSentence) {
  PsConfig c;
  c.job = kJob;
  c.tree = flat_tree(4);
  EXPECT_LT(ps_job_memory_bound(c), 4u << 20);  // the default: 1024 x 62 values, about 2 MiB
  EXPECT_EQ(constructor_error(c), "");
  for (const std::uint32_t window : {0xFFFFFFFFu, kMaxWindowSeqs + 1}) {
    c.max_window_seqs = window;
    EXPECT_EQ(constructor_error(c), "job 7: max_window_seqs " + std::to_string(window) +
                                        " is above 1048576, the most a PS takes; lower it (it is the job's "
                                        "max_window x PS shards)");
  }
  // At 2^20 the pool could hold 2^21 + 1 fragments of 62 int64 sums: about 1.3 GiB.
  c.max_window_seqs = kMaxWindowSeqs;
  const std::string error = constructor_error(c);
  EXPECT_NE(error.find("job 7: max_window_seqs 1048576 with values_per_packet 62 lets a PS hold up to "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("above the 256.0 MiB a PS job may use; lower max_window_seqs"), std::string::npos) << error;
  EXPECT_GT(ps_job_memory_bound(c), std::uint64_t{1} << 30);
  // The bound grows with window x values: the largest window that fits is accepted.
  c.values_per_packet = kMaxValuesPerPacket;
  c.max_window_seqs = 4096;
  EXPECT_GT(ps_job_memory_bound(c), kPsJobMemoryBudget);
  EXPECT_NE(constructor_error(c), "");
  c.max_window_seqs = 2048;
  EXPECT_LT(ps_job_memory_bound(c), kPsJobMemoryBudget);
  EXPECT_EQ(constructor_error(c), "");
}

// Forged packets at every sequence number the window allows, with every slot driven into the
// float phase: the slots held never pass 2 x window + 1, as ps_job_memory_bound assumes.
TEST(PsEndpoint, ForgedPacketsKeepTheSlotPoolWithinItsBound) {
  constexpr std::uint32_t kWindow = 32;
  PsUnderTest t(make_config({2}, 4, kWindow));
  for (Seq seq = 0; seq < 100'000; seq += 7) {
    t.individual(seq, 0, 0, kWorker0, {kSaturatedMax, 1, 1, 1});
    ASSERT_LE(t.ps.stored_fragments(), 2 * kWindow + 1);
  }
}

}  // namespace
}  // namespace atp
