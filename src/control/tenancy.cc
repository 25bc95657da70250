// Tenancy: owners of jobs and hosts, and the leases they hang on.
#include "atp/control/tenancy.h"

#include "atp/control/control_auth.h"

namespace atp::control {

std::string Tenancy::describe(Resource r) {
  return (r.kind == Kind::kJob ? "job " : "host port ") + std::to_string(r.id);
}

std::optional<std::string> Tenancy::forbids_change(std::string_view who, Resource r) const {
  if (who == Authenticator::kOperator) return std::nullopt;
  const auto it = owned_.find(r);
  if (it != owned_.end() && it->second.owner == who) return std::nullopt;
  const std::string owner = it == owned_.end() ? std::string(Authenticator::kOperator) : it->second.owner;
  return describe(r) + " belongs to " + (owner == Authenticator::kOperator ? "the operator" : "another tenant") +
         "; only its owner or the operator may change or remove it";
}

std::optional<std::string> Tenancy::forbids_use(std::string_view who, Resource host) const {
  if (who == Authenticator::kOperator) return std::nullopt;
  const auto it = owned_.find(host);
  if (it == owned_.end() || it->second.owner == who || it->second.owner == Authenticator::kOperator) {
    return std::nullopt;
  }
  return describe(host) +
         " was attached by another tenant; a job may name only its own tenant's hosts and the "
         "operator's";
}

LeaseTable::Outcome Tenancy::check_lease(LeaseTable::Id lease, std::string_view who) const {
  return lease == 0 ? LeaseTable::Outcome::kOk : leases_.check(lease, acting_as(lease, who));
}

void Tenancy::claim(Resource r, std::string who, LeaseTable::Id lease) { owned_[r] = Owned{std::move(who), lease}; }

void Tenancy::release(Resource r) { owned_.erase(r); }

std::string_view Tenancy::acting_as(LeaseTable::Id id, std::string_view who) const {
  return who == Authenticator::kOperator ? leases_.owner(id) : who;
}

LeaseTable::Outcome Tenancy::keep_alive(LeaseTable::Id id, std::string_view who, Time now) {
  return leases_.keep_alive(id, acting_as(id, who), now);
}

LeaseTable::Outcome Tenancy::revoke(LeaseTable::Id id, std::string_view who, std::vector<Resource>& removed) {
  const LeaseTable::Outcome o = leases_.revoke(id, acting_as(id, who));
  if (o == LeaseTable::Outcome::kOk) removed = release_lease(id);
  return o;
}

std::vector<Tenancy::Resource> Tenancy::expire(Time now) {
  std::vector<Resource> removed;
  for (LeaseTable::Id id : leases_.expire(now)) {
    for (Resource r : release_lease(id)) removed.push_back(r);
  }
  return removed;
}

std::vector<Tenancy::Resource> Tenancy::release_lease(LeaseTable::Id id) {
  std::vector<Resource> held;
  for (auto it = owned_.begin(); it != owned_.end();) {
    if (it->second.lease == id) {
      held.push_back(it->first);
      it = owned_.erase(it);
    } else {
      ++it;
    }
  }
  return held;
}

}  // namespace atp::control
