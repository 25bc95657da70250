// What a scenario runs over ns-3's TCP next to the ATP jobs: ring allreduce jobs (the host-based
// baseline) and background flows (the competing traffic of the paper's Fig. 16).
//
// The ring moves bytes, not values: rank i streams 2(n-1) chunks of S/n bytes to rank i+1, and a
// chunk's byte b may leave only after the previous step's byte b arrived (the reduce-scatter and
// allgather dependency, forwarded piece by piece as RingAllreduce does on real sockets). Its
// timing is the algorithm's; its result is not computed (the real ring is checked on the loopback
// and netns backends), so a ring job here is `correct` when every rank completed every round.
#pragma once

#include <memory>

#include "atp/backends/simulated.h"
#include "atp/scenario/scenario.h"
#include "atp/sim/ns3_network.h"

namespace atp::ns3adapter {

class TcpApps {
 public:
  // Installs the ring jobs' ranks and the background flows on `network`'s hosts; they start at
  // their scheduled times once the simulation runs. Flows stop at `until` or once no job runs.
  // series_interval > 0: the flows' goodput is sampled at that interval (RunOptions).
  TcpApps(const Scenario& scenario, Ns3Network& network, SimulatedScenario& run, Duration series_interval);
  ~TcpApps();
  TcpApps(const TcpApps&) = delete;
  TcpApps& operator=(const TcpApps&) = delete;

  // Fills in the ring jobs' results and the flows (call after the run).
  void report(ScenarioResult& result) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp::ns3adapter
