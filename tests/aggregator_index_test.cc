// Tests of aggregator index hashing: stable, in range, spread across jobs and sequences, and
// rehashing after a collision always moves to another index.
#include "atp/aggregator_index.h"

#include <gtest/gtest.h>

#include <set>

namespace atp {
namespace {

TEST(AggregatorIndex, HashIsStableAndInRange) {
  // The hash is part of the protocol (every host of a job must agree, across versions too):
  // these values are pinned.
  EXPECT_EQ(base_aggregator_index(1, 0, 20000, IndexPolicy::kHashed), 11743u);
  EXPECT_EQ(base_aggregator_index(1, 1, 20000, IndexPolicy::kHashed), 11105u);
  EXPECT_EQ(base_aggregator_index(7, 123456, 4096, IndexPolicy::kHashed), 3061u);
  EXPECT_EQ(rehash_aggregator_index(42, 20000), 15413u);
  for (Seq s = 0; s < 1000; ++s) {
    EXPECT_LT(base_aggregator_index(3, s, 97, IndexPolicy::kHashed), 97u);
  }
  EXPECT_EQ(base_aggregator_index(3, 205, 100, IndexPolicy::kLinear), 5u);
}

TEST(AggregatorIndex, HashSpreadsConsecutiveSequencesAndJobs) {
  std::set<std::uint32_t> job1, job2;
  for (Seq s = 0; s < 200; ++s) {
    job1.insert(base_aggregator_index(1, s, 4096, IndexPolicy::kHashed));
    job2.insert(base_aggregator_index(2, s, 4096, IndexPolicy::kHashed));
  }
  EXPECT_GT(job1.size(), 190u);  // few self-collisions among 200 of 4096
  std::size_t common = 0;
  for (auto i : job1) common += job2.count(i);
  EXPECT_LT(common, 30u);  // linear indices would share all 200
}

TEST(AggregatorIndex, RehashMovesTheIndex) {
  for (std::uint32_t i = 0; i < 500; ++i) {
    const auto r = rehash_aggregator_index(i, 500);
    EXPECT_LT(r, 500u);
    EXPECT_NE(r, i);
  }
  EXPECT_EQ(rehash_aggregator_index(0, 1), 0u);
}

}  // namespace
}  // namespace atp
