// The daemons as child processes: `atp switch` and `atp ps` started from the atp binary, and
// their control addresses read from the one line each prints when it is up. What the process
// backends start a scenario's daemons with, and what ClusterJob's local cluster runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "atp/io/processes.h"
#include "atp/io/socket_address.h"

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

}  // namespace atp
