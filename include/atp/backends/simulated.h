// Runs a scenario's ATP jobs on a simulated network (the in-process one or ns-3): plans the
// jobs, builds switch and host nodes around the protocol core, drives rounds with seeded inputs,
// applies faults, checks every result exactly and reports. The network only moves packets and time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atp/backends/backend.h"
#include "atp/scenario/scenario.h"
#include "atp/sim/simulated_network.h"

namespace atp {

// The inproc backend: the scenario on the deterministic in-process network (inproc::Network),
// simulated time. ATP's protocol only (no TCP: no ring or Gloo jobs, no background flows).
const Backend& inproc_backend();
// inproc_backend().run(scenario, options)
ScenarioResult run_inproc(const Scenario& scenario, const RunOptions& options = {});

// When a simulated job's rounds began and ended (each the earliest start or the latest
// completion over its workers), and the job's timing from that.
class RoundTimes {
 public:
  void started(Time t);
  void completed(std::uint32_t round, Time t);  // `round` is 0-based
  // seconds: from the end of the warm-up rounds (or the first start) to the last completion;
  // warmup_rounds (at most the completed rounds) and round_end_seconds. Needs completed_rounds.
  void report(JobResult& r, std::uint32_t warmup_rounds) const;

 private:
  std::optional<Time> first_start_, last_end_;
  std::vector<Time> round_end_;
};

class SimulatedScenario {
 public:
  // Plans the scenario and builds it on `network`, which must be empty. Jobs whose algorithm
  // does not use ATP's protocol (ring, gloo) get no endpoints here: a network with TCP runs them
  // itself, the others refuse such scenarios before. Throws ScenarioError for a topology or job
  // that cannot be planned, std::invalid_argument (from the network) for link settings it
  // cannot model.
  SimulatedScenario(const Scenario& scenario, sim::Network& network);
  ~SimulatedScenario();
  SimulatedScenario(const SimulatedScenario&) = delete;
  SimulatedScenario& operator=(const SimulatedScenario&) = delete;

  sim::NodeId node_id(const std::string& name) const;  // a host or switch of the topology
  Address address_of(const std::string& host) const;
  // Whether some ATP job still has a worker with rounds to run (not crashed, not failed).
  bool jobs_running() const;
  // Something the caller runs (a TCP collective, a background flow) acted at `now`: the run's
  // simulated_seconds covers it.
  void saw_activity(Time now);
  // Samples every ATP job's progress every `interval` while jobs run (ScenarioResult::series).
  // Call before run().
  void record_series(Duration interval);

  // Runs until nothing is left to do or the scenario's time limit, then reports (once). Jobs
  // are in file order; those this class did not run have only their name, algorithm, rounds,
  // workers and tensor_bytes filled in.
  ScenarioResult run(const std::string& backend);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What both simulated backends cannot run, or "": a job that puts a PS shard on one of its
// workers' hosts (simulated hosts have no kernel to loop the PS's multicast back to the worker).
// `network` names the backend in the sentence. (They ignore RunOptions' process options.)
std::string simulated_cannot_run(const Scenario& scenario, const std::string& network);

}  // namespace atp
