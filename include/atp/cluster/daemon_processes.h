// The daemons as child processes: `atp switch` and `atp ps` started from the atp binary, and
// their control addresses read from the one line each prints when it is up. What the process
// backends start a scenario's daemons with, and what ClusterJob's local cluster runs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "atp/control/control_client.h"
#include "atp/io/processes.h"
#include "atp/io/socket_address.h"
#include "atp/plan/plan.h"

namespace atp {

// The atp binary that daemons are started from: `configured` when it is not empty, else the
// environment's ATP_BINARY, else the file `atp` in the folder of the binary or shared library
// this code was linked into (the PyTorch extension's package ships it there). Throws
// std::runtime_error with one sentence saying what to set when none of these is an executable file.
std::string find_atp_binary(const std::string& configured = "");

// `binary switch --config CONFIG --token-file TOKEN_FILE`, in network namespace `netns` (a path;
// "": this one). Its control address comes from its first line (control_addresses).
processes::Child& start_switch_process(processes::ChildSet& children, const std::string& binary,
                                       const std::string& name, const std::string& config_file,
                                       const std::string& token_file, const std::string& netns = "");

// `binary ps`: receives on `listen` (port 0: any), serves its control plane on `control` (port 0:
// any), sends to `uplink` (unset: to each packet's destination IP), answers as overlay address
// `address` (a dotted quad; "": none).
struct PsProcessOptions {
  SocketAddress listen;
  SocketAddress control = SocketAddress::loopback(0);
  std::optional<SocketAddress> uplink;
  std::string address;
};
processes::Child& start_ps_process(processes::ChildSet& children, const std::string& binary, const std::string& host,
                                   const PsProcessOptions& options, const std::string& token_file,
                                   const std::string& netns = "");

// The control addresses of daemons just started, from their first lines ("... control
// http://127.0.0.1:40123 ..."), in order. Throws std::runtime_error naming the first daemon that
// printed something else, or nothing before `deadline` ("switch 'tor0' did not start (its first
// line: '...')"); its own error went to stderr, which is this process's.
std::vector<SocketAddress> control_addresses(processes::ChildSet& children,
                                             const std::vector<processes::Child*>& started,
                                             processes::Clock::time_point deadline);

// A network of software switches and a PS on 127.0.0.1, as children of this process that answer
// only to `token` (a fresh random one by default): ClusterJob's local cluster. Every switch of
// `topology` runs with its config (aggregators, width, ATP-capable or not), a UDP port per link of
// its `switch_links` (peer: the other switch's data address, so Orchestrator::discover_links finds
// them) and a host_pool of its own (10.1.0.0/16, 10.2.0.0/16, ... in topology order; one switch:
// all of 10/8); its hosts are not read (they attach at run time, POST /hosts). The PS sends to
// switch `ps_switch`. They stop when this is destroyed, or die with the thread that made it
// (PR_SET_PDEATHSIG) if that thread ends first. Throws std::invalid_argument naming what is wrong
// with the topology (no switch, more than 255, an unknown ps_switch or link end), std::runtime_error
// when a daemon does not start (its own error is on stderr).
class LocalDaemons {
 public:
  LocalDaemons(const std::string& binary, const Topology& topology, const std::string& ps_switch,
               const std::string& token = "");
  // One switch named "local" with `aggregators` (of the default width), the PS under it.
  LocalDaemons(const std::string& binary, std::uint32_t aggregators, const std::string& token = "");

  // std::out_of_range for a name the topology does not have.
  const SocketAddress& switch_control(const std::string& name) const { return switch_control_.at(name); }
  // Every switch's, in topology order.
  std::vector<SocketAddress> switch_controls() const;
  const SocketAddress& ps_control() const { return ps_control_; }
  // How to reach them: their token, plain HTTP.
  control::ClientAccess access() const { return {token_, ""}; }

 private:
  std::string token_;
  processes::ChildSet children_;
  std::vector<std::string> names_;                       // the switches, in topology order
  std::map<std::string, SocketAddress> switch_control_;  // by switch name
  SocketAddress ps_control_;
};

}  // namespace atp
