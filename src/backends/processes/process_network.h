// The network side of a process run: a scenario's switches (`atp switch`) and PSes (`atp ps`) as
// child processes where the placement puts them (127.0.0.1, or network namespaces joined by veth
// links), the orchestrator that installs jobs on them, and the scenario's network timeline while
// it runs: link settings in their fault windows, switch restarts, background TCP flows. What
// `atp run --backend loopback|netns` runs its workers on (run_processes.cc), and what
// `atp testbed` runs a user's command on (testbed_run.cc).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "atp/cluster/orchestrator.h"
#include "atp/control/control_client.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/stats.h"
#include "atp/io/processes.h"
#include "atp/plan/plan.h"
#include "atp/scenario/scenario.h"
#include "atp/scenario/timeline.h"
#include "placement.h"

namespace atp {

// The atp binary a run starts its daemons from: `given`, or this binary's real path (so that its
// daemons show up as `atp switch ...`, not `exe`, in ps and pgrep).
std::string daemon_binary(const std::string& given);

// A daemon's /stats (SwitchStats or PsStats), or nullopt when it does not answer (a switch that
// was stopped). A daemon that answers with an error, or with a document that does not read (the
// runner and the daemon disagree: a renamed counter), is loud, never read as no counters.
template <class Client>
auto stats_or_none(const Client& daemon) -> std::optional<decltype(daemon.stats())> {
  try {
    return daemon.stats();
  } catch (const control::DaemonError& e) {
    if (e.status() != 0) throw;
    return std::nullopt;
  }
}

class ProcessNetwork {
 public:
  // `binary`: the atp binary the daemons run. Removes what a SIGKILLed run of the same placement
  // left behind (its temporary directories); the placement removes its own namespaces.
  ProcessNetwork(const Scenario& scenario, std::string binary, std::unique_ptr<Placement> placement);
  ~ProcessNetwork();
  ProcessNetwork(const ProcessNetwork&) = delete;
  ProcessNetwork& operator=(const ProcessNetwork&) = delete;

  // Plans the topology (ScenarioError "topology: ..." when it cannot be), so that jobs can be
  // planned over orchestrator() before anything starts.
  void plan();
  // Builds the placement's network, then starts every switch and a PS on each of `ps_hosts`, and
  // waits until each has said where its control plane is.
  void start(const std::set<std::string>& ps_hosts);
  // The moment the run's clock starts (TimedFault::at, flow times): now.
  void begin() { start_ = processes::Clock::now(); }
  processes::Clock::time_point start_time() const { return start_; }

  // Applies the network's part of the fault timeline (timeline.h): a switch restart's stop and
  // start (the switch given its jobs again), links' settings as a fault window opens or closes, a
  // background flow's start and stop. false for a host crash: the runner's (its workers).
  bool apply(const TimedFault& fault);
  // Every flow still running stops now; then each receiver's report is read (bounded).
  void finish_flows();

  // A host crashed: its PS (if it runs one) is killed.
  void kill_ps(const std::string& host);

  // Once the run is over: every switch's counters (live ones once their tables have settled, plus
  // those of processes a restart retired), with the scenario-wide counts they give added to
  // `result` (leaked aggregators, rejected and noise packets), its links and flows, and what the
  // hosts' own stacks dropped.
  std::map<std::string, control::SwitchStats> collect(ScenarioResult& result);

  Orchestrator& orchestrator() { return *orchestrator_; }
  const NetworkPlan& network() const { return *network_; }
  Placement& placement() { return *where_; }
  processes::ChildSet& children() { return children_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  const std::string& binary() const { return binary_; }
  std::string namespace_of(const std::string& node) const { return where_->namespace_of(node); }
  bool is_switch(const std::string& node) const { return switches_.contains(node); }

 private:
  struct Switch {
    processes::Child* child = nullptr;
    std::vector<std::pair<std::string, PortId>> ports;  // peer, port; sorted by port
    bool up = false;
    control::SwitchStats retired;  // counters of its processes before restarts (SwitchStats::operator+=)
    // Packets of the jobs its restarted processes rejected before the jobs were installed again.
    std::uint64_t restart_rejected = 0;
  };
  struct Flow {
    processes::Child* receiver = nullptr;
    processes::Child* sender = nullptr;
    bool stopped = false;
  };

  std::filesystem::path token_file() const { return dir_.path() / "token"; }
  std::string switch_config(const std::string& name, Duration t) const;
  EgressConfig host_ingress(const std::string& host, const std::string& sw, Duration t) const;
  void start_switch(const std::string& name, Duration t, bool wait);
  void read_control(const std::vector<std::string>& names);
  void start_ps(const std::set<std::string>& hosts);
  void stop_switch(const std::string& name);
  void count_restart_rejections(const std::string& name);
  std::uint64_t noise_received_in(const std::string& name, const control::SwitchStats& stats) const;
  void apply_link_settings(Duration t);
  void start_flow(std::size_t i);
  void stop_flow(std::size_t i);
  void expect_line(processes::Child& child, const std::string& event);
  std::map<std::string, std::optional<control::SwitchStats>> settled_stats();
  void collect_links(ScenarioResult& result, const std::map<std::string, control::SwitchStats>& stats) const;

  const Scenario& s_;
  std::string binary_;
  // Declaration order matters for the way out: children are stopped (ChildSet's destructor)
  // before the signal handlers are restored and the config directory is removed.
  std::unique_ptr<Placement> where_;  // its namespaces go after every child is stopped
  processes::StopSignals signals_;
  processes::TempDir dir_;
  // The daemons' operator token (plain HTTP: they are this run's own).
  control::ClientAccess access_;
  processes::ChildSet children_;

  std::unique_ptr<Orchestrator> orchestrator_;  // plans the jobs, installs them on the daemons
  const NetworkPlan* network_ = nullptr;        // the orchestrator's plan of the topology
  std::map<std::string, Switch> switches_;
  std::map<std::string, processes::Child*> ps_;  // host -> its PS process
  std::vector<Flow> flows_;
  std::vector<FlowResult> flow_results_;
  processes::Clock::time_point start_;
};

}  // namespace atp
