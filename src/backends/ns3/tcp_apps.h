// What a scenario runs over ns-3's TCP next to the ATP jobs: host collectives (ring,
// halving-doubling: the host-based baselines) and background flows (the competing traffic of the
// paper's Fig. 16).
//
// A host collective is its schedule (include/atp/schedule/) run by the same ScheduleExecutor as
// on real sockets, driven here by ns-3's socket callbacks: one TCP connection per ordered pair of
// ranks that the schedule names, carrying the real float32 values, so every rank's result is
// checked each round against the seeded inputs' sum, as the worker processes check theirs.
#pragma once

#include <memory>

#include "atp/backends/simulated.h"
#include "atp/scenario/scenario.h"
#include "atp/sim/ns3_network.h"

namespace atp::ns3adapter {

class TcpApps {
 public:
  // Installs the host collectives' ranks (ring, halving-doubling: every job whose algorithm has a
  // schedule) and the background flows on `network`'s hosts; they start at their scheduled times
  // once the simulation runs. Flows stop at `until` or once no job runs. series_interval > 0: the
  // flows' goodput is sampled at that interval (RunOptions). Throws ScenarioError in the unlikely
  // case that the listeners need more TCP ports than there are.
  TcpApps(const Scenario& scenario, Ns3Network& network, SimulatedScenario& run, Duration series_interval);
  ~TcpApps();
  TcpApps(const TcpApps&) = delete;
  TcpApps& operator=(const TcpApps&) = delete;

  // Fills in the host collectives' results and the flows (call after the run).
  void report(ScenarioResult& result) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp::ns3adapter
