// Leases on a shared daemon's state (etcd's model): a client is granted a lease with a time to
// live, attaches what it installs (jobs, hosts) to it and keeps it alive; when it stops doing so
// (its process died), the lease expires and the daemon removes everything attached. Injected time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "atp/time.h"

namespace atp {

class LeaseTable {
 public:
  using Id = std::uint64_t;  // never 0, never reused by one table

  // Bounds of a lease's time to live: long enough for a loaded machine's scheduling hiccups, short
  // enough that a dead client's state goes within minutes.
  static constexpr Duration kMinTtl = std::chrono::seconds(1);
  static constexpr Duration kMaxTtl = std::chrono::hours(1);
  // Leases one table holds at most (a client that grants without end cannot grow the daemon).
  static constexpr std::size_t kMaxLeases = 4096;

  enum class Outcome : std::uint8_t {
    kOk,
    kUnknown,   // no such lease (never granted, revoked or expired)
    kNotOwner,  // the lease belongs to another tenant
  };

  // A new lease for `owner` expiring at now + ttl (ttl clamped to [kMinTtl, kMaxTtl]); 0 when
  // kMaxLeases are held.
  Id grant(std::string owner, Duration ttl, Time now);
  // Pushes the expiry to now + the lease's ttl.
  Outcome keep_alive(Id id, std::string_view owner, Time now);
  // Ends the lease now (what it holds is the caller's to remove).
  Outcome revoke(Id id, std::string_view owner);
  // kOk when `id` is a live lease of `owner` (something may be attached to it).
  Outcome check(Id id, std::string_view owner) const;
  Duration ttl(Id id) const;            // zero for an unknown lease
  std::string_view owner(Id id) const;  // empty for an unknown lease

  // Removes the leases whose expiry is at or before `now` and returns their ids, oldest first.
  std::vector<Id> expire(Time now);
  Time next_deadline() const;  // the earliest expiry; kNever when no lease is held
  std::size_t size() const { return leases_.size(); }

 private:
  struct Lease {
    std::string owner;
    Duration ttl{};
    Time expiry{};
  };
  Outcome owned(Id id, std::string_view owner) const;

  std::map<Id, Lease> leases_;
  Id next_id_ = 1;
};

}  // namespace atp
