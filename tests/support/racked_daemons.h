// Shared by the orchestrator's and ClusterJob's tests: the smallest multi-rack cluster of running
// daemons. Switches tor0 and tor1 each link to switch core by a port of their config (peer: core's
// data address, and core has a port back to each); the PS hangs under core (--uplink). Each switch
// gives its hosts addresses of its own pool (10.1.0.0/16, 10.2.0.0/16, 10.3.0.0/16). All are
// `atp` child processes (LocalDaemons) that answer only to `token`, and stop with this object.
#pragma once

#include <string>

#include "atp/cluster/daemon_processes.h"
#include "atp/control/daemon_clients.h"
#include "atp/plan/plan.h"

namespace atp::test {

class RackedDaemons {
 public:
  // `core_links`: false detaches core's ports to tor0 and tor1 once they run (tor0 and tor1 still
  // name core): links with one end only.
  RackedDaemons(const std::string& binary, const std::string& token, std::uint32_t aggregators, bool core_links = true)
      : daemons_(binary, topology(aggregators), "core", token) {
    if (!core_links) {
      for (PortId port : {0, 1}) switch_client("core").detach_host(port);
    }
  }

  // tor0 and tor1 under core, each switch with `aggregators`.
  static Topology topology(std::uint32_t aggregators) {
    Topology t;
    for (const char* name : {"tor0", "tor1", "core"}) {
      t.switches.push_back({name, {}});
      t.switches.back().config.num_aggregators = aggregators;
    }
    t.switch_links = {{"tor0", "core"}, {"tor1", "core"}};
    return t;
  }

  // By name: tor0, tor1, core.
  const SocketAddress& switch_control(const std::string& name) const { return daemons_.switch_control(name); }
  const SocketAddress& ps_control() const { return daemons_.ps_control(); }
  control::ClientAccess access() const { return daemons_.access(); }
  control::SwitchClient switch_client(const std::string& name) const {
    return {"switch '" + name + "'", switch_control(name), access()};
  }
  control::PsClient ps_client() const { return {"the PS", ps_control(), access()}; }

 private:
  LocalDaemons daemons_;
};

}  // namespace atp::test
