// Tests of aggregator index hashing: stable, in range (a whole table or a job's static share),
// spread across jobs and sequences, and rehashing after a collision always moves to another index.
#include "atp/aggregator_index.h"

#include <gtest/gtest.h>

#include <set>

namespace atp {
namespace {

TEST(AggregatorIndex, HashIsStableAndInRange) {
  // The hash is part of the protocol (every host of a job must agree, across versions too):
  // these values are pinned.
  EXPECT_EQ(base_aggregator_index(1, 0, {0, 20000}, IndexPolicy::kHashed), 11743u);
  EXPECT_EQ(base_aggregator_index(1, 1, {0, 20000}, IndexPolicy::kHashed), 11105u);
  EXPECT_EQ(base_aggregator_index(7, 123456, {0, 4096}, IndexPolicy::kHashed), 3061u);
  EXPECT_EQ(rehash_aggregator_index(42, {0, 20000}), 15413u);
  for (Seq s = 0; s < 1000; ++s) {
    EXPECT_LT(base_aggregator_index(3, s, {0, 97}, IndexPolicy::kHashed), 97u);
  }
  EXPECT_EQ(base_aggregator_index(3, 205, {0, 100}, IndexPolicy::kLinear), 5u);
}

TEST(AggregatorIndex, HashSpreadsConsecutiveSequencesAndJobs) {
  std::set<std::uint32_t> job1, job2;
  for (Seq s = 0; s < 200; ++s) {
    job1.insert(base_aggregator_index(1, s, {0, 4096}, IndexPolicy::kHashed));
    job2.insert(base_aggregator_index(2, s, {0, 4096}, IndexPolicy::kHashed));
  }
  EXPECT_GT(job1.size(), 190u);  // few self-collisions among 200 of 4096
  std::size_t common = 0;
  for (auto i : job1) common += job2.count(i);
  EXPECT_LT(common, 30u);  // linear indices would share all 200
}

TEST(AggregatorIndex, RehashMovesTheIndex) {
  for (std::uint32_t i = 0; i < 500; ++i) {
    const auto r = rehash_aggregator_index(i, {0, 500});
    EXPECT_LT(r, 500u);
    EXPECT_NE(r, i);
  }
  EXPECT_EQ(rehash_aggregator_index(0, {0, 1}), 0u);
}

TEST(AggregatorIndex, RangeContainsItsIndicesOnly) {
  const AggregatorRange r{100, 50};
  EXPECT_FALSE(r.contains(99));
  EXPECT_TRUE(r.contains(100));
  EXPECT_TRUE(r.contains(149));
  EXPECT_FALSE(r.contains(150));
  EXPECT_FALSE(r.contains(0));
  EXPECT_TRUE((AggregatorRange{0xFFFFFFF0u, 16}).contains(0xFFFFFFFFu));
  EXPECT_FALSE((AggregatorRange{0, 0}).contains(0));
}

// A slice of a table behaves as a table of its own size moved to its first index: the offsets
// are the ones a whole table of `count` would give, so the range {0, n} is today's table of n.
TEST(AggregatorIndex, ARangeIsATableOfItsSizeMovedToItsFirstIndex) {
  for (const AggregatorRange r : {AggregatorRange{0, 4096}, AggregatorRange{1024, 1024}, AggregatorRange{3000, 97}}) {
    for (Seq s = 0; s < 300; ++s) {
      for (const IndexPolicy policy : {IndexPolicy::kHashed, IndexPolicy::kLinear}) {
        EXPECT_EQ(base_aggregator_index(5, s, r, policy), r.first + base_aggregator_index(5, s, {0, r.count}, policy));
      }
      const std::uint32_t offset = s % r.count;
      EXPECT_EQ(rehash_aggregator_index(r.first + offset, r), r.first + rehash_aggregator_index(offset, {0, r.count}));
    }
  }
}

// Static sharing's promise: a job's indices never leave its range, hashed or linear, first
// sent or rehashed after a collision (also rehashed again, and from an index outside it).
TEST(AggregatorIndex, IndicesAndRehashesStayInsideTheRange) {
  const AggregatorRange ranges[] = {{0, 1},       {7, 1},       {0, 64},    {64, 64},
                                    {1365, 1365}, {2730, 1366}, {4000, 96}, {0xFFFFFF00u, 256}};
  for (const AggregatorRange r : ranges) {
    SCOPED_TRACE(testing::Message() << "range [" << r.first << ", +" << r.count << ")");
    for (const IndexPolicy policy : {IndexPolicy::kHashed, IndexPolicy::kLinear}) {
      // Seqs from 0 and across the 2^32 wrap.
      for (const Seq start : {Seq{0}, Seq{0xFFFFF000u}}) {
        for (Seq s = start; s != start + 5000; ++s) {
          const std::uint32_t index = base_aggregator_index(9, s, r, policy);
          ASSERT_TRUE(r.contains(index)) << "seq " << s << " -> " << index;
          std::uint32_t rehashed = index;
          for (int hop = 0; hop < 3; ++hop) {
            const std::uint32_t next = rehash_aggregator_index(rehashed, r);
            ASSERT_TRUE(r.contains(next)) << "seq " << s << " hop " << hop << " -> " << next;
            if (r.count > 1) {
              ASSERT_NE(next, rehashed);
            }
            rehashed = next;
          }
        }
      }
    }
    // An index of no job (a corrupt header) is still rehashed into the range.
    for (const std::uint32_t outside : {0u, r.first - 1, r.first + r.count, 0xFFFFFFFFu}) {
      if (!r.contains(outside)) {
        EXPECT_TRUE(r.contains(rehash_aggregator_index(outside, r))) << outside;
      }
    }
  }
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

// A job's slots sit side by side from its home, wrapping inside the range: distinct aggregators
// for its fragments in flight (slots <= count), each reused every `slots` sequence numbers.
TEST(AggregatorIndex, HashedSlotsReusesAnIndexEverySlotsSequenceNumbers) {
  const AggregatorRange range{100, 5000};
  for (const std::uint32_t home : {0u, 4900u, hashed_slot_home(9, range.count)}) {
    std::set<std::uint32_t> in_flight;
    for (Seq seq = 0; seq < 3000; ++seq) {
      const std::uint32_t i = base_aggregator_index(9, seq, range, IndexPolicy::kHashedSlots, 256, home);
      EXPECT_TRUE(range.contains(i));
      EXPECT_EQ(i, range.first + (home + seq % 256) % range.count);
      EXPECT_EQ(i, base_aggregator_index(9, seq + 256, range, IndexPolicy::kHashedSlots, 256, home));
      if (seq < 256) in_flight.insert(i);
    }
    EXPECT_EQ(in_flight.size(), 256u) << "home " << home;
  }
  // Unplanned jobs start at HASH(job): somewhere in the range, and not all at one place.
  std::set<std::uint32_t> homes;
  for (JobId job = 1; job <= 64; ++job) {
    EXPECT_LT(hashed_slot_home(job, 480), 480u);
    homes.insert(hashed_slot_home(job, 480));
  }
  EXPECT_GT(homes.size(), 50u);
  EXPECT_EQ(hashed_slot_home(7, 0), 0u);
}

TEST(AggregatorIndex, SaltedRehashesSeparateSlotsThatCollidedAtOneIndex) {
  const AggregatorRange range{0, 100000};
  EXPECT_EQ(rehash_aggregator_index(77, range), rehash_aggregator_index(77, range, 0));
  EXPECT_NE(rehash_aggregator_index(77, range, 1), rehash_aggregator_index(77, range, 2));
  for (std::uint64_t salt = 0; salt < 100; ++salt) {
    const std::uint32_t r = rehash_aggregator_index(77, range, salt);
    EXPECT_TRUE(range.contains(r));
    EXPECT_NE(r, 77u);
  }
}

TEST(AggregatorIndex, PolicyNamesRoundTrip) {
  for (IndexPolicy p : {IndexPolicy::kHashed, IndexPolicy::kLinear, IndexPolicy::kHashedSlots}) {
    EXPECT_EQ(parse_index_policy(to_string(p)), p);
  }
  EXPECT_EQ(parse_index_policy("random"), std::nullopt);
}

}  // namespace
}  // namespace atp
