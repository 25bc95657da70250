// Tenancy with time advanced by hand: who may change, remove and name jobs and hosts, and what
// goes when a lease is revoked or expires.
#include "atp/control/tenancy.h"

#include <gtest/gtest.h>

namespace atp::control {
namespace {

using std::chrono::seconds;
using Kind = Tenancy::Kind;

constexpr std::string_view kOperator = "operator";  // Authenticator::kOperator
const Tenancy::Resource kJob3{Kind::kJob, 3};
const Tenancy::Resource kPort5{Kind::kHost, 5};

TEST(Tenancy, DescribesResources) {
  EXPECT_EQ(Tenancy::describe(kJob3), "job 3");
  EXPECT_EQ(Tenancy::describe(kPort5), "host port 5");
}

TEST(Tenancy, OnlyTheOwnerOrTheOperatorChangesWhatItClaimed) {
  Tenancy t;
  t.claim(kJob3, "alice", 0);
  EXPECT_EQ(t.forbids_change("alice", kJob3), std::nullopt);
  EXPECT_EQ(t.forbids_change(kOperator, kJob3), std::nullopt);
  const std::optional<std::string> bob = t.forbids_change("bob", kJob3);
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(*bob, "job 3 belongs to another tenant; only its owner or the operator may change or remove it");
}

TEST(Tenancy, WhatNoTenantClaimedIsTheOperators) {
  Tenancy t;
  const std::optional<std::string> why = t.forbids_change("alice", kPort5);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("host port 5 belongs to the operator"), std::string::npos) << *why;
  // But anyone may name the operator's hosts in a job.
  EXPECT_EQ(t.forbids_use("alice", kPort5), std::nullopt);
  t.claim(kPort5, std::string(kOperator), 0);
  EXPECT_EQ(t.forbids_use("alice", kPort5), std::nullopt);
}

TEST(Tenancy, AJobNamesOnlyItsOwnTenantsHosts) {
  Tenancy t;
  t.claim(kPort5, "alice", 0);
  EXPECT_EQ(t.forbids_use("alice", kPort5), std::nullopt);
  EXPECT_EQ(t.forbids_use(kOperator, kPort5), std::nullopt);
  const std::optional<std::string> bob = t.forbids_use("bob", kPort5);
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(bob->rfind("host port 5 was attached by another tenant", 0), 0u) << *bob;
  t.release(kPort5);
  EXPECT_EQ(t.forbids_use("bob", kPort5), std::nullopt) << "released: nobody's, so the operator's";
}

TEST(Tenancy, RevokingALeaseReleasesWhatHungOnItOnly) {
  Tenancy t;
  const Time t0 = time_from_ns(0);
  const LeaseTable::Id a = t.grant("alice", seconds(10), t0);
  const LeaseTable::Id b = t.grant("alice", seconds(10), t0);
  EXPECT_EQ(t.check_lease(a, "alice"), LeaseTable::Outcome::kOk);
  EXPECT_EQ(t.check_lease(a, "bob"), LeaseTable::Outcome::kNotOwner);
  EXPECT_EQ(t.check_lease(0, "bob"), LeaseTable::Outcome::kOk) << "0: no lease";
  t.claim(kJob3, "alice", a);
  t.claim(kPort5, "alice", b);
  std::vector<Tenancy::Resource> removed;
  EXPECT_EQ(t.revoke(a, "bob", removed), LeaseTable::Outcome::kNotOwner);
  EXPECT_TRUE(removed.empty());
  EXPECT_EQ(t.revoke(a, "alice", removed), LeaseTable::Outcome::kOk);
  EXPECT_EQ(removed, std::vector<Tenancy::Resource>{kJob3});
  EXPECT_NE(t.forbids_change("alice", kJob3), std::nullopt) << "released: the operator's now";
  EXPECT_EQ(t.forbids_change("alice", kPort5), std::nullopt) << "still on its own lease";
}

TEST(Tenancy, TheOperatorActsForAnyTenantOnItsLeases) {
  Tenancy t;
  const Time t0 = time_from_ns(0);
  const LeaseTable::Id a = t.grant("alice", seconds(10), t0);
  EXPECT_EQ(t.check_lease(a, kOperator), LeaseTable::Outcome::kOk);
  EXPECT_EQ(t.keep_alive(a, kOperator, t0 + seconds(5)), LeaseTable::Outcome::kOk);
  EXPECT_EQ(t.next_deadline(), t0 + seconds(15));
  t.claim(kJob3, "alice", a);
  std::vector<Tenancy::Resource> removed;
  EXPECT_EQ(t.revoke(a, kOperator, removed), LeaseTable::Outcome::kOk);
  EXPECT_EQ(removed, std::vector<Tenancy::Resource>{kJob3});
}

TEST(Tenancy, ExpiryReleasesWhatHungOnTheExpiredLeases) {
  Tenancy t;
  const Time t0 = time_from_ns(0);
  const LeaseTable::Id short_lease = t.grant("alice", seconds(2), t0);
  const LeaseTable::Id long_lease = t.grant("bob", seconds(20), t0);
  t.claim(kJob3, "alice", short_lease);
  t.claim(kPort5, "alice", short_lease);
  t.claim({Kind::kJob, 4}, "bob", long_lease);
  EXPECT_TRUE(t.expire(t0 + seconds(1)).empty());
  EXPECT_EQ(t.expire(t0 + seconds(2)), (std::vector<Tenancy::Resource>{kJob3, kPort5}));
  EXPECT_EQ(t.forbids_change("bob", {Kind::kJob, 4}), std::nullopt);
  EXPECT_EQ(t.next_deadline(), t0 + seconds(20));
}

TEST(Tenancy, AResourceClaimedAgainTakesTheNewerLease) {
  Tenancy t;
  const Time t0 = time_from_ns(0);
  const LeaseTable::Id first = t.grant("alice", seconds(2), t0);
  const LeaseTable::Id second = t.grant("alice", seconds(20), t0);
  t.claim(kPort5, "alice", first);
  t.claim(kPort5, "alice", second);  // POST /hosts again
  EXPECT_TRUE(t.expire(t0 + seconds(2)).empty()) << "no longer on the first lease";
  std::vector<Tenancy::Resource> removed;
  EXPECT_EQ(t.revoke(second, "alice", removed), LeaseTable::Outcome::kOk);
  EXPECT_EQ(removed, std::vector<Tenancy::Resource>{kPort5});
}

}  // namespace
}  // namespace atp::control
