// Who owns what on a shared daemon: each job and attached host belongs to the tenant whose
// request installed it (control_auth.h names tenants), and may hang on one of its leases
// (lease_table.h), so that it goes when that tenant's process stops keeping the lease alive. The
// rules both daemons' control planes apply, in one place. Single-threaded: a daemon keeps it on
// its dataplane thread, beside what it describes. Injected time.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atp/control/lease_table.h"
#include "atp/time.h"

namespace atp::control {

class Tenancy {
 public:
  enum class Kind : std::uint8_t { kJob, kHost };
  struct Resource {
    Kind kind;
    std::uint64_t id;  // the job id, or the host's switch port
    friend auto operator<=>(const Resource&, const Resource&) = default;
  };
  static std::string describe(Resource r);  // "job 3", "host port 5"

  // Why `who` may not change or remove `r` (the 403 sentence), or nullopt when it may: the
  // operator may do anything; a tenant what it owns. What no tenant's request installed (a
  // configured port, a job installed through the C++ API) is the operator's.
  std::optional<std::string> forbids_change(std::string_view who, Resource r) const;
  // Why `who` may not name port `host` in a job it installs, or attach its peer again (another
  // tenant's attached host), or nullopt: its own hosts and the operator's (configured ports, a
  // shared PS the operator attached) may be named by anyone.
  std::optional<std::string> forbids_use(std::string_view who, Resource host) const;

  // Whether `who` may hang something on `lease`: kOk for its own live lease (any, for the
  // operator) and for 0, "no lease".
  LeaseTable::Outcome check_lease(LeaseTable::Id lease, std::string_view who) const;
  // Records `who` as r's owner, hanging on `lease` (0: none; else one check_lease accepts). A
  // resource claimed again (POST /hosts is idempotent) takes the newer lease.
  void claim(Resource r, std::string who, LeaseTable::Id lease);
  void release(Resource r);  // the daemon removed it

  // The lease requests (POST /leases, .../keepalive, DELETE): as LeaseTable's, with the operator
  // acting for any tenant. revoke returns what hung on the lease, released, for the daemon to
  // remove.
  LeaseTable::Id grant(std::string who, Duration ttl, Time now) { return leases_.grant(std::move(who), ttl, now); }
  LeaseTable::Outcome keep_alive(LeaseTable::Id id, std::string_view who, Time now);
  LeaseTable::Outcome revoke(LeaseTable::Id id, std::string_view who, std::vector<Resource>& removed);
  Duration ttl(LeaseTable::Id id) const { return leases_.ttl(id); }

  // What hung on the leases that expired by `now`, released, for the daemon to remove.
  std::vector<Resource> expire(Time now);
  Time next_deadline() const { return leases_.next_deadline(); }

 private:
  struct Owned {
    std::string owner;
    LeaseTable::Id lease = 0;
  };
  std::string_view acting_as(LeaseTable::Id id, std::string_view who) const;
  std::vector<Resource> release_lease(LeaseTable::Id id);

  LeaseTable leases_;
  std::map<Resource, Owned> owned_;
};

}  // namespace atp::control
