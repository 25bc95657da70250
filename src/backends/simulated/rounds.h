// The simulated runner's rounds: a driver per worker that starts its rounds one after another and
// checks each result exactly, and each job's state while it runs (its plan, its drivers, its
// rounds' references). Internal to src/backends/simulated/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "atp/backends/simulated.h"
#include "atp/cluster/protocols.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"
#include "nodes.h"

namespace atp::simulated {

inline double to_seconds(Duration d) { return static_cast<double>(d.count()) / 1e9; }

struct JobRuntime;

// Starts a worker's rounds one after another (after the job's compute time), checks each result.
class RoundDriver {
 public:
  RoundDriver(JobRuntime& job, std::size_t index, HostNode& host, NodeId node)
      : job_(job), index_(index), host_(host), node_(node) {}

  void start_round(Time now);
  // start_round at `at`, unless restart() comes first.
  void schedule_start(Time at);
  // Called after every call into the endpoint: notices completion and failure.
  void after_endpoint_call(Time now);
  // Its job's ring re-formed (a worker gone, Rina): from `round` on again, at once, with the
  // endpoint the host now has. A start scheduled before is void.
  void restart(std::uint32_t round, Time now);
  // Stops it for good with `why` as its error.
  void fail(std::string why) {
    running = false;
    stopped = true;
    if (error.empty()) error = std::move(why);
  }

  Endpoint& endpoint() { return *host_.workers.at(job_id()).endpoint; }
  // Its job re-formed: `e` takes over, and the counts of the endpoint it replaces stay this
  // worker's (as a worker process keeps its old Communicator's).
  void replace_endpoint(std::unique_ptr<Endpoint> e) {
    left_behind_ += endpoint().counts();
    host_.workers.at(job_id()).endpoint = std::move(e);
  }
  // Its counts over the run: its endpoint's and those of the endpoints it replaced.
  EndpointCounts counts() {
    EndpointCounts c = left_behind_;
    c += endpoint().counts();
    return c;
  }
  JobId job_id() const;
  std::uint32_t rounds_completed = 0;
  bool running = false;
  bool stopped = false;            // failed or crashed: no more rounds
  bool mismatch = false;           // some round's result was not exact
  std::uint64_t wrong_values = 0;  // in the rounds it checked
  std::string error;
  const HostNode& host() const { return host_; }

 private:
  void verify();

  JobRuntime& job_;
  std::size_t index_;
  HostNode& host_;
  NodeId node_;
  std::uint32_t round_ = 0;  // the round running or next to start
  std::uint32_t epoch_ = 0;  // restarts so far: a start scheduled in an earlier epoch is void
  EndpointCounts left_behind_;  // of the endpoints replace_endpoint replaced
  std::vector<float> input_;
};

// The exact answer of one round, computed when its first worker completes it, and how many
// workers still have to check against it.
struct RoundReference : scenario_inputs::RoundReference {
  std::size_t checks_left = 0;
};

struct JobRuntime {
  const ScenarioJob* job = nullptr;
  std::size_t file_index = 0;
  const Protocol* protocol = nullptr;  // its algorithm's (atp/cluster/protocols.h)
  EndpointJobPlan plan;
  std::uint16_t values_per_packet = 0;
  const std::map<std::string, SwitchJobPlan>& switch_plans() const { return plan.switches; }
  sim::Network* network = nullptr;
  std::uint64_t seed = 0;
  std::vector<std::unique_ptr<RoundDriver>> drivers;
  std::vector<HostNode*> ps_hosts;
  // Re-forming (Rina's): the workers (indices into drivers) the job went on without, and when;
  // the switches its earlier plans used (for the report).
  std::vector<std::uint32_t> excluded;
  std::vector<ExcludedWorker> excluded_workers;
  std::set<std::string> earlier_switches;
  // The switches any of its plans used: its counts there are in its result and series.
  std::set<std::string> used_switches() const {
    std::set<std::string> used = earlier_switches;
    for (const auto& [name, sw] : plan.switches) used.insert(name);
    return used;
  }
  std::map<std::uint32_t, RoundReference> references;
  // Float32-path fragments per round (every worker gets the same set), counted when the round's
  // first worker completes it; the report sums the rounds every worker completed, like `fragments`.
  std::vector<std::uint64_t> float_fragments_by_round;
  RoundTimes times;

  std::uint64_t fragments_per_round() const { return fragment_count(job->elements, values_per_packet); }

  // ATP: the exponents its PS picks, which the reference works out itself. Rina: the exponents the
  // round's first finisher reports (a redo pass picks them from values the reference cannot order
  // the same way); every other worker must match its sums, and they must resolve this round's
  // values (checked in RoundDriver::verify).
  RoundReference& reference(std::uint32_t round, const Endpoint& first_finisher) {
    auto it = references.find(round);
    if (it != references.end()) return it->second;
    RoundReference& ref = references[round];
    if (first_finisher.picks_exponents()) {
      scenario_inputs::make_reference_at(seed, job->spec.id, drivers.size(), round, job->elements, job->magnitude,
                                         values_per_packet, first_finisher.result_exponents(), ref, excluded);
    } else {
      scenario_inputs::make_reference(seed, job->spec.id, drivers.size(), round, job->elements, job->magnitude,
                                      job->spec.scale, values_per_packet, ref);
    }
    ref.checks_left = drivers.size() - excluded.size();
    // Every worker gets the same set of float fragments; count them once per round.
    if (float_fragments_by_round.size() <= round) float_fragments_by_round.resize(std::size_t{round} + 1);
    float_fragments_by_round[round] = first_finisher.float_fragments().size();
    return ref;
  }
};

// Whether any worker of `jobs` still has rounds to run.
bool any_job_running(const std::vector<std::unique_ptr<JobRuntime>>& jobs);

}  // namespace atp::simulated
