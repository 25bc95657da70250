// Shared by the orchestrator's and ClusterJob's tests: the smallest multi-rack cluster of running
// daemons, as an operator would start it. Switches tor0 and tor1 each link to switch core by a
// port of their config (peer: core's data address, and core has a port back to each); the PS
// hangs under core (--uplink). Each switch gives its hosts addresses of its own pool
// (10.1.0.0/16, 10.2.0.0/16, 10.3.0.0/16). All are `atp` child processes that answer only to
// `token`, and stop with this object.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "atp/cluster/daemon_processes.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/switch_config.h"
#include "atp/io/processes.h"
#include "atp/io/udp_socket.h"

namespace atp::test {

class RackedDaemons {
 public:
  // `core_links`: false leaves core's ports out of its config (tor0 and tor1 still name core):
  // links with one end only.
  RackedDaemons(const std::string& binary, const std::string& token, std::uint32_t aggregators, bool core_links = true)
      : token_(token) {
    const std::string token_file = (dir_.path() / "token").string();
    processes::write_private_file(token_file, token + "\n");
    // Data addresses are picked before anything starts: each config names its neighbours'.
    std::map<std::string, SocketAddress> data;
    {
      std::vector<UdpSocket> held;
      for (const char* name : {"tor0", "tor1", "core"}) {
        held.emplace_back(SocketAddress::loopback(0));
        data[name] = held.back().local_endpoint();
      }
    }
    const std::map<std::string, std::vector<std::string>> neighbours = {
        {"tor0", {"core"}},
        {"tor1", {"core"}},
        {"core", core_links ? std::vector<std::string>{"tor0", "tor1"} : std::vector<std::string>{}}};
    std::vector<processes::Child*> started;
    Address pool = 0x0A010000;
    for (const char* name : {"tor0", "tor1", "core"}) {
      control::SwitchDaemonConfig c;
      c.name = name;
      c.pipeline.num_aggregators = aggregators;
      c.listen = data.at(name);
      c.host_pool = {pool, 16};
      pool += 0x10000;
      for (const std::string& n : neighbours.at(name)) c.ports.push_back({data.at(n), {}, {}, ""});
      const auto file = dir_.path() / (std::string(name) + ".yaml");
      processes::write_file(file, control::to_yaml(c));
      started.push_back(&start_switch_process(children_, binary, name, file.string(), token_file));
    }
    const auto controls = control_addresses(children_, started, processes::Clock::now() + processes::kStartupTimeout);
    for (std::size_t i = 0; i < controls.size(); ++i) switch_control_[started[i]->name] = controls[i];
    PsProcessOptions ps;
    ps.listen = SocketAddress::loopback(0);
    ps.uplink = data.at("core");
    processes::Child& child = start_ps_process(children_, binary, "ps", ps, token_file);
    ps_control_ = control_addresses(children_, {&child}, processes::Clock::now() + processes::kStartupTimeout).front();
  }

  // By name: tor0, tor1, core (their child process names are "switch 'NAME'").
  SocketAddress switch_control(const std::string& name) const { return switch_control_.at("switch '" + name + "'"); }
  const SocketAddress& ps_control() const { return ps_control_; }
  control::ClientAccess access() const { return {token_, ""}; }
  control::SwitchClient switch_client(const std::string& name) const {
    return {"switch '" + name + "'", switch_control(name), access()};
  }
  control::PsClient ps_client() const { return {"the PS", ps_control_, access()}; }

 private:
  processes::TempDir dir_{"atp-racks"};
  std::string token_;
  processes::ChildSet children_;
  std::map<std::string, SocketAddress> switch_control_;  // by child name
  SocketAddress ps_control_;
};

}  // namespace atp::test
