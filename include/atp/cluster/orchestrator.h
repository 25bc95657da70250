// The one place that plans jobs over a cluster and installs them on its daemons, any number of
// switches and PSes: what the process backends (a scenario's daemons) and ClusterJob (a PyTorch
// job's ranks, which attach to their switches at run time) both run jobs with.
//
// It holds the cluster's topology (the switches and hosts, extended by attach()), a control
// client per daemon (daemon_clients.h), the jobs it installed (to install them again on a
// switch that restarted), and optionally a lease per daemon that everything it installs hangs on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "atp/control/daemon_clients.h"
#include "atp/control/protocol.h"
#include "atp/plan/plan.h"
#include "atp/time.h"

namespace atp {

class Orchestrator {
 public:
  // `topology`: the cluster's switches and hosts as far as they are known (attach() adds hosts
  // that join at run time); `mtu_bytes`: the IP MTU of its links (NetworkPlan::mtu_bytes).
  explicit Orchestrator(Topology topology = {}, std::uint32_t mtu_bytes = 0);
  ~Orchestrator();  // stops keeping leases alive (they then expire: revoke_leases() ends them at once)
  Orchestrator(const Orchestrator&) = delete;
  Orchestrator& operator=(const Orchestrator&) = delete;

  // The daemons, by the topology's names: a switch by its name, a PS by its host's. set_switch
  // also replaces a switch's client (a restarted switch has another control address, and none of
  // the old one's leases: the lease held there is forgotten, and the next install grants another).
  void set_switch(const std::string& name, control::SwitchClient client);
  void set_ps(const std::string& host, control::PsClient client);
  // std::invalid_argument naming the switch or host when it has no client.
  const control::SwitchClient& switch_client(const std::string& name) const;
  const control::PsClient& ps_client(const std::string& host) const;

  // Hangs what this orchestrator installs from now on (jobs, hosts attached) on one lease per
  // daemon with this time to live, clamped to what the daemons grant ([1 s, 1 h], LeaseTable),
  // granted at the daemon's first use and kept alive by a thread (every third of it) until
  // revoke_leases() or the destructor: if this process dies, the daemons remove everything it
  // installed within that time. A ttl of zero or less is std::invalid_argument.
  void hold_leases(Duration ttl);
  // Revokes the leases, which removes what hung on them, and stops keeping them alive. Never
  // throws (a daemon may be gone).
  void revoke_leases() noexcept;

  // Attaches `peer` (a UDP address) to switch `switch_name` as host `host` (POST /hosts) and adds
  // the host to the topology, and the switch as its answer describes it if the topology does not
  // have it yet. How: kLeased, on the switch's lease if leases are held (a job's own hosts);
  // kShared, as a host every tenant's jobs may name that stays when this job goes (a PS shared
  // with other jobs: POST /hosts?shared=1).
  enum class Attach : std::uint8_t { kLeased, kShared };
  HostAttachment attach(const std::string& switch_name, const std::string& host, const SocketAddress& peer,
                        Attach how = Attach::kLeased);

  // Adds to the topology every switch with a client that it lacks, as the switch's GET /stats
  // describes it (a switch no host is attached to, e.g. a core), and the links between those
  // switches as the operator configured them: a UDP port of one whose peer is another's data
  // address, or an interface port whose `switch:` names another, paired with the other's port
  // back (SwitchLink::ports). Links found earlier between
  // them are replaced. Returns how many links it found. Throws control::DaemonError when a switch
  // does not answer, PlanError (one sentence naming the switches) when two have one data address,
  // a link has only one end, or a switch has two ports to another.
  std::size_t discover_links();

  const Topology& topology() const { return topology_; }
  // The plan of the topology as it is now (plan_network, with the MTU). Throws PlanError. The
  // reference holds until the next attach(), which changes the topology.
  const NetworkPlan& network();

  // `protocol`'s plan of `spec` over network() (ATP's plan_job, Rina's plan_rina_job). Throws
  // PlanError.
  EndpointJobPlan plan(const Protocol& protocol, const JobSpec& spec);
  // Installs a planned job on every switch and PS its plan names (a Rina job's racks' ToRs get
  // the job's rack ports, docs/rina.md; it has no PS). kIdTaken when a daemon has a job of that id
  // already: nothing stays installed (parts installed before are removed again, and so is the
  // part of a daemon that did not answer, in case it installed it all the same). Throws
  // control::DaemonError when a daemon refuses or does not answer, std::invalid_argument when a
  // daemon of the plan has no client.
  control::Install install(const EndpointJobPlan& plan);
  // plan() and install() `spec` under a free id: a random one in [1, 65534], tried up to
  // `attempts` times while daemons have it (as every tenant may install jobs). Returns the plan;
  // throws what plan() and install() throw, and control::DaemonError when every id tried was
  // taken.
  EndpointJobPlan install_with_free_id(const Protocol& protocol, JobSpec spec, int attempts = 64);
  // Installs again, on switch `name`, the part of every job installed so far (a switch that
  // restarted lost them). Throws control::DaemonError.
  void reinstall(const std::string& name);
  // Removes job `id`'s parts from the switches install() put them on (their aggregators freed)
  // and forgets them: a Rina ring that re-forms without a worker gone (docs/rina.md "Failures")
  // goes in again under the same id. A switch that does not answer (down: it comes back
  // without the job) is passed over; one that refuses throws control::DaemonError.
  void remove_from_switches(JobId id);

 private:
  control::Install install(JobId id, const std::map<std::string, SwitchJobPlan>& switches,
                           const std::vector<PsConfig>& ps);
  LeaseTable::Id lease_on(const control::DaemonClient& daemon);
  void keep_leases_alive();

  Topology topology_;
  std::uint32_t mtu_bytes_;
  std::unique_ptr<NetworkPlan> network_;  // planned on first use after a change (it points into topology_)
  std::map<std::string, control::SwitchClient> switches_;
  std::map<std::string, control::PsClient> ps_;
  std::map<JobId, std::map<std::string, SwitchJobPlan>> installed_;  // each job's switches' parts

  // Leases: ttl 0 while none are held; one per daemon, by DaemonClient::where().
  Duration lease_ttl_{0};
  std::mutex lease_mutex_;
  std::map<std::string, std::pair<control::DaemonClient, LeaseTable::Id>> leases_;  // by where()
  std::condition_variable keeper_wake_;
  bool keeper_stopping_ = false;
  std::thread keeper_;
};

}  // namespace atp
