// What runs a scenario, behind one interface: the simulated network in this process (inproc),
// ns-3 (ns3), real processes on loopback (loopback) and in network namespaces (netns). The `atp`
// command and the benchmark find them here by name; a backend says in one sentence why it cannot
// run a scenario before anything starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "atp/scenario/algorithm.h"
#include "atp/scenario/scenario.h"

namespace atp {

// A process backend's live report, for progress displays: worker `worker` (index within the job)
// of job `job` (index into Scenario::jobs) completed round `round` (0-based), `seconds` after the start.
struct RoundDone {
  std::size_t job = 0, worker = 0;
  std::uint32_t round = 0;
  double seconds = 0;
};
using RoundCallback = std::function<void(const RoundDone&)>;

struct RunOptions {
  // > 0: record ScenarioResult::series at this interval of simulated time (simulated backends).
  Duration series_interval{0};
  // Called on the calling thread as each worker completes a round (process backends).
  RoundCallback on_round;
  // The `atp` binary whose `switch`, `ps`, `worker` and `flow` subcommands the process backends
  // start; empty: this process's own executable (/proc/self/exe), which is `atp` when `atp` runs.
  std::string atp_binary;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;  // what --backend takes
  // One line for --help: where the scenario runs and what its times are.
  virtual std::string_view summary() const = 0;
  // true: simulated time, deterministic (same seed, same trace); false: real processes, wall-clock.
  virtual bool simulated() const = 0;
  // What it offers the algorithms (atp/scenario/algorithm.h): cannot_run refuses the jobs of the
  // others with the sentence the registry words from it.
  virtual AlgorithmSupport algorithm_support() const = 0;
  // "" when it can run `scenario` with `options`; else one sentence naming what it cannot run
  // (the scenario's key, or the machine's lack) and what can. Planning errors are not checked
  // here: every backend plans the same way, and run() reports them.
  virtual std::string cannot_run(const Scenario& scenario, const RunOptions& options) const = 0;
  // Throws ScenarioError when cannot_run says why, or for a topology or job that cannot be
  // planned (the key and PlanError's sentence); process backends throw std::runtime_error when a
  // process cannot be started or a signal stopped the run (everything they started is gone by then).
  virtual ScenarioResult run(const Scenario& scenario, const RunOptions& options) const = 0;
};

// The backends of this build, in the order --help lists them (ns3 only where ns-3 was found).
std::span<const Backend* const> backends();
// By name; nullptr if this build has none of that name.
const Backend* find_backend(std::string_view name);
// Why find_backend(name) is nullptr, in one sentence: a backend this build was configured
// without, or an unknown name (with the names there are).
std::string no_backend_reason(std::string_view name);
// "inproc, ns3, loopback or netns": the names, for messages.
std::string backend_names();

}  // namespace atp
