// LeaseTable with time advanced by hand: grant, keep alive, revoke, expiry, owners, bounds.
#include "atp/control/lease_table.h"

#include <gtest/gtest.h>

namespace atp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LeaseTable, ExpiresWhenNotKeptAlive) {
  LeaseTable t;
  const Time t0 = time_from_ns(0);
  const LeaseTable::Id a = t.grant("alice", seconds(10), t0);
  const LeaseTable::Id b = t.grant("bob", seconds(5), t0);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.next_deadline(), t0 + seconds(5));
  EXPECT_EQ(t.keep_alive(b, "bob", t0 + seconds(4)), LeaseTable::Outcome::kOk);
  EXPECT_EQ(t.next_deadline(), t0 + seconds(9));
  EXPECT_TRUE(t.expire(t0 + seconds(9) - milliseconds(1)).empty());
  EXPECT_EQ(t.expire(t0 + seconds(10)), (std::vector<LeaseTable::Id>{a, b}));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.next_deadline(), kNever);
  EXPECT_EQ(t.keep_alive(a, "alice", t0 + seconds(11)), LeaseTable::Outcome::kUnknown) << "expired is gone";
}

TEST(LeaseTable, OnlyTheOwnerKeepsAliveOrRevokes) {
  LeaseTable t;
  const LeaseTable::Id a = t.grant("alice", seconds(10), time_from_ns(0));
  EXPECT_EQ(t.keep_alive(a, "bob", time_from_ns(1)), LeaseTable::Outcome::kNotOwner);
  EXPECT_EQ(t.revoke(a, "bob"), LeaseTable::Outcome::kNotOwner);
  EXPECT_EQ(t.check(a, "bob"), LeaseTable::Outcome::kNotOwner);
  EXPECT_EQ(t.check(a, "alice"), LeaseTable::Outcome::kOk);
  EXPECT_EQ(t.revoke(a, "alice"), LeaseTable::Outcome::kOk);
  EXPECT_EQ(t.check(a, "alice"), LeaseTable::Outcome::kUnknown);
  EXPECT_EQ(t.revoke(a, "alice"), LeaseTable::Outcome::kUnknown);
}

TEST(LeaseTable, TtlIsClampedAndIdsAreNeverReused) {
  LeaseTable t;
  const LeaseTable::Id a = t.grant("x", milliseconds(1), time_from_ns(0));
  EXPECT_EQ(t.ttl(a), LeaseTable::kMinTtl);
  const LeaseTable::Id b = t.grant("x", std::chrono::hours(100), time_from_ns(0));
  EXPECT_EQ(t.ttl(b), LeaseTable::kMaxTtl);
  t.revoke(a, "x");
  EXPECT_GT(t.grant("x", seconds(1), time_from_ns(0)), b);
}

TEST(LeaseTable, GrantsAtMostTheBound) {
  LeaseTable t;
  for (std::size_t i = 0; i < LeaseTable::kMaxLeases; ++i) ASSERT_NE(t.grant("x", seconds(1), time_from_ns(0)), 0u);
  EXPECT_EQ(t.grant("x", seconds(1), time_from_ns(0)), 0u);
}

}  // namespace
}  // namespace atp
