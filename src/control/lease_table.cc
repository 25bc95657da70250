// LeaseTable: grant, keep alive, revoke and expire leases. A handful of leases per daemon: linear
// scans for the earliest expiry are cheaper than keeping a second index in step.
#include "atp/control/lease_table.h"

#include <algorithm>

namespace atp {

LeaseTable::Id LeaseTable::grant(std::string owner, Duration ttl, Time now) {
  if (leases_.size() >= kMaxLeases) return 0;
  ttl = std::clamp(ttl, kMinTtl, kMaxTtl);
  const Id id = next_id_++;
  leases_.emplace(id, Lease{std::move(owner), ttl, now + ttl});
  return id;
}

LeaseTable::Outcome LeaseTable::owned(Id id, std::string_view owner) const {
  const auto it = leases_.find(id);
  if (it == leases_.end()) return Outcome::kUnknown;
  return it->second.owner == owner ? Outcome::kOk : Outcome::kNotOwner;
}

LeaseTable::Outcome LeaseTable::keep_alive(Id id, std::string_view owner, Time now) {
  const Outcome o = owned(id, owner);
  if (o == Outcome::kOk) {
    Lease& lease = leases_.at(id);
    lease.expiry = now + lease.ttl;
  }
  return o;
}

LeaseTable::Outcome LeaseTable::revoke(Id id, std::string_view owner) {
  const Outcome o = owned(id, owner);
  if (o == Outcome::kOk) leases_.erase(id);
  return o;
}

LeaseTable::Outcome LeaseTable::check(Id id, std::string_view owner) const { return owned(id, owner); }

Duration LeaseTable::ttl(Id id) const {
  const auto it = leases_.find(id);
  return it == leases_.end() ? Duration::zero() : it->second.ttl;
}

std::string_view LeaseTable::owner(Id id) const {
  const auto it = leases_.find(id);
  return it == leases_.end() ? std::string_view() : std::string_view(it->second.owner);
}

std::vector<LeaseTable::Id> LeaseTable::expire(Time now) {
  std::vector<Id> expired;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expiry <= now) {
      expired.push_back(it->first);
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

Time LeaseTable::next_deadline() const {
  Time t = kNever;
  for (const auto& [id, lease] : leases_) t = std::min(t, lease.expiry);
  return t;
}

}  // namespace atp
