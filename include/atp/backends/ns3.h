// The ns3 backend: a scenario on ns-3's simulator (src/backends/ns3/); in the build where ns-3 is
// (ATP_WITH_NS3).
#pragma once

#include "atp/backends/backend.h"
#include "atp/scenario/scenario.h"

namespace atp {

// The ns3 backend: the same nodes as run_inproc on ns-3 3.37 (src/backends/ns3/): point-to-point links
// with the scenario's rates and delays, switch ports whose device queues drop and ECN-mark,
// hosts with ns-3's IPv4/UDP/TCP stack, ATP in UDP to port kUdpPort. Ring jobs run as ns-3
// applications over ns-3 TCP and background flows as ns-3 TCP senders. ns-3's simulator is a
// process-wide singleton: one run at a time. It cannot model gloo jobs, delays that differ by
// direction or change during the run, and PS shards on workers' hosts (cannot_run says which).
const Backend& ns3_backend();
// ns3_backend().run(scenario, options)
ScenarioResult run_ns3(const Scenario& scenario, const RunOptions& options = {});

}  // namespace atp
