// The switch daemon's control plane (private to the runtime): what its HTTP routes do to the
// dataplane (jobs, hosts, port settings, leases) and the counters document they read.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "atp/control/control.h"
#include "atp/control/stats.h"
#include "atp/control/tenancy.h"
#include "atp/daemons/switch_daemon.h"
#include "atp/io/loop_tasks.h"
#include "switch_dataplane.h"

namespace httplib {
class Server;
}

namespace atp::detail {

// DELETE /hosts' 400 on a switch whose ports are Linux interfaces.
inline constexpr const char* kInterfacePortsHaveNoHosts =
    "this switch's ports are Linux interfaces: hosts are attached by cable and routes:, not detached by DELETE /hosts";

// Each request's answer is computed on the dataplane thread (on_dataplane), like everything
// else here but supports_hosts(); the HTTP thread only parses (switch_http.cc). Each job and
// attached host belongs to the tenant that installed it (control::Tenancy).
class SwitchControl {
 public:
  // `config` (as started) and `dataplane` must outlive the control plane.
  SwitchControl(const SwitchDaemonConfig& config, SwitchDataplane& dataplane);

  // POST /jobs by `who`, hanging the job on `lease` (0: none).
  control::Reply install_job(const SwitchJobPlan& plan, const std::string& who, LeaseTable::Id lease);
  // DELETE /jobs/<id> by `who`: job `text` (parsed: `id`, nullopt when it is no 64-bit number).
  control::Reply uninstall_job(std::optional<std::uint64_t> id, const std::string& text, const std::string& who);
  // PUT /ports/<i> by `who`: port `text` (parsed: `port`) gets `settings`, or the body did not
  // parse and `bad_body` says why (reported after the port check: a missing port is the first
  // thing to say).
  control::Reply set_port(std::optional<std::uint64_t> port, const std::string& text,
                          const std::optional<control::PortSettings>& settings, const std::string& bad_body,
                          const std::string& who);
  // POST /hosts by `who`: the port `peer` is on (attaching it if it is on none) and its overlay
  // address, hanging the port on `lease` (0: none); `shared`: the port is the operator's, for
  // every tenant's jobs (switch_daemon.h).
  control::Reply attach_host(const SocketAddress& peer, const std::string& who, LeaseTable::Id lease,
                             bool shared = false);
  // POST /hosts on a switch of interface ports, where hosts are attached by cable: the port the
  // routes give for `peer`'s IP (kUdpPort) and that IP as its address; 404 when no route leads to it
  // or the route is a link to another switch (a port with `switch:`). Holds nothing.
  control::Reply host_by_cable(const SocketAddress& peer, const std::string& who, LeaseTable::Id lease, bool shared);
  // DELETE /hosts/<port> by `who`: port `text` (parsed: `port`) loses its peer and routes and is
  // reset; POST /hosts reuses it.
  control::Reply detach_host(std::optional<std::uint64_t> port, const std::string& text, const std::string& who);

  // Whether POST /hosts can attach hosts (UDP ports); a constant, safe from the HTTP thread.
  bool supports_hosts() const { return dataplane_.ports().supports_hosts(); }

  // ---- leases ----
  control::Tenancy& tenancy() { return tenancy_; }
  // What hung on a lease that expired or was revoked; `why` says which (the log's words).
  void remove(control::Tenancy::Resource r, const char* why);
  Time next_deadline() const { return tenancy_.next_deadline(); }  // the next lease to expire
  // Removes what hung on the leases that have expired by `now`.
  void expire(Time now);

  // The counters, as GET /stats and GET /metrics answer them.
  control::SwitchStats stats();

 private:
  void remove_job(JobId job);
  // A line of the daemon's log at info, about this switch ("switch NAME: what").
  void note(const std::string& what) const;
  void detach(PortId p);
  // POST /hosts' refusal of `lease` for `who` (a shared host hangs on none), if any.
  std::optional<control::Reply> refuse_host_lease(const std::string& who, LeaseTable::Id lease, bool shared);
  // POST /hosts' answer: the host's port and address, and this switch.
  control::Reply host_attached(PortId port, Address address) const;
  std::optional<control::Reply> missing_port(const char* field, const std::vector<PortId>& ports) const;

  struct InstalledJob {
    std::string name;
    std::size_t entries = 0;      // the ports, roles and routes it names
    std::vector<Address> routes;  // the destinations it holds in job_routes_
  };
  // A route the switch has because installed jobs asked for it (SwitchJobPlan::routes), not its
  // config or POST /hosts: it goes with the last of them.
  struct JobRoute {
    PortId port = 0;
    std::size_t jobs = 0;
  };

  const SwitchDaemonConfig& config_;
  SwitchDataplane& dataplane_;
  std::map<JobId, InstalledJob> installed_;
  std::size_t installed_entries_ = 0;  // their entries' sum, at most config.max_job_entries
  std::map<Address, JobRoute> job_routes_;
  control::Tenancy tenancy_;         // who owns which job and attached host, and their leases
  std::set<PortId> detached_ports_;  // detached UDP ports, reused lowest first by POST /hosts
};

// Adds the control plane's routes (switch_daemon.h) to `http` (control::make_server's): each
// request is parsed on the HTTP thread and answered by `control_plane` on the dataplane thread,
// through `tasks`.
void add_switch_routes(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks);

// Runs `fn` on the dataplane thread through `tasks` and returns its result; a dataplane that does
// not answer within a second is a std::runtime_error (a control request never hangs).
template <class Fn>
auto on_dataplane(LoopTasks& tasks, Fn fn) -> decltype(fn()) {
  return tasks.run(std::move(fn), std::chrono::seconds(1), "the switch dataplane");
}

}  // namespace atp::detail
