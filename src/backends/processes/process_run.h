// One scenario run as real processes, the process backends' runner (run_processes.cc): one `atp
// switch` per switch, one `atp ps` per PS host, one `atp worker` per worker host, with the
// scenario's faults applied while it runs (link settings through the switches' ports, host
// crashes and switch restarts as SIGKILL, noise from this process, background TCP flows). Its
// parts: plan, start and drive (process_run.cc), the barrier of each round and a job's re-forming
// (process_barrier.cc), the results (process_results.cc). Where the processes run (127.0.0.1, or
// network namespaces joined by veth links) is placement.h's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "atp/backends/processes.h"
#include "atp/cluster/protocols.h"
#include "atp/io/processes.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"
#include "placement.h"
#include "process_network.h"
#include "tuning.h"
#include "worker_process.h"

namespace atp {

// One run of `scenario`: run() plans it, starts the daemons and workers, drives it until every
// worker is done or the time limit passes, and collects every job's result.
class ProcessRun {
 public:
  ProcessRun(const Scenario& scenario, std::string binary, const RoundCallback& on_round,
             std::unique_ptr<Placement> placement)
      : s_(scenario),
        on_round_(on_round),
        net_(scenario, std::move(binary), std::move(placement)),
        where_(&net_.placement()),
        children_(net_.children()) {}

  ScenarioResult run();

 private:
  struct Worker {
    std::size_t job = 0, index = 0;
    std::string host;
    processes::Child* child = nullptr;
    std::uint32_t rounds_done = 0;  // from its "round" lines
    bool finished = false;          // result line read, or killed
    worker_process::WorkerResult result;
    bool reported = false;                       // it printed its result line
    std::optional<std::uint32_t> waiting;        // the round it waits to start (a "wait" line), until "go"
    processes::Clock::time_point waiting_since;  // when its "wait" line came
    processes::Clock::time_point heard;          // when its last line came (its "alive" lines too)
    bool stopped = false;                        // killed by the runner because its job had already failed
    std::optional<std::uint32_t> failed;  // re-forming: the round it failed (a "failed" line), until "reform" or "stop"
    Seq next_seq = 0;                     // re-forming: from its last "wait" or "failed" line
    std::vector<TcpScheduleAllreduce::LinkSample> links;  // Autotune: its connections in its last round
  };
  std::string namespace_of(const std::string& node) const { return net_.namespace_of(node); }
  // The protocol of job `job`'s algorithm (atp/cluster/protocols.h); nullptr for a TCP collective.
  const Protocol* protocol_of(std::size_t job) const { return find_protocol(s_.jobs[job].algorithm->protocol); }
  // Whether job `job`'s protocol goes on without workers that are gone (Rina's).
  bool reforms(std::size_t job) const { return protocol_of(job) != nullptr && protocol_of(job)->reformed != nullptr; }

  void plan();

  void start_workers();

  // --- while it runs: worker lines, and the scenario's fault timeline

  void crash_host(const std::string& host, Duration at);

  // Sends the noise packets due by `elapsed`; returns when the next one is due (Duration::max: none).
  Duration send_noise(Duration elapsed);

  const scenario_inputs::NoiseTargets& noise_targets();

  void drive();

  // The round barrier has no timer of its own: when some of `job`'s live workers have waited to
  // start a round for the job's progress timeout and others never came, and the runner has not
  // heard from those for as long (a worker says it is alive while it prepares a round), those are
  // failed (they hang, or died without a word), as a worker fails when its round makes no
  // progress that long. Returns when to look again (time_point::max: nobody waits).
  processes::Clock::time_point fail_barrier_laggards(std::size_t job);

  // Once a worker of `job` has failed (not by the scenario's crash: the others then fail by
  // their own progress timeout), the job has failed: its other workers are stopped instead of
  // waited for, since one that hangs (stopped, or stuck) would hold the report back until the
  // time limit.
  void stop_failed_job(std::size_t job);

  // Once every live worker of `job` waits to start a round, all of them start it. A job that
  // re-forms (Rina's) and lost a worker re-forms instead, once every live worker waits or has
  // failed its round.
  void release_barrier(std::size_t job);

  // The "go" line of an Autotune job's next round: once a round has run since the last release,
  // its time (from the release to the last worker's end) and every worker's connections go to the
  // job's tuning, which may send a new plan with it.
  std::string tune(std::size_t job);

  // Whether a worker of job `job` crashed (the scenario's crash) and the job has not been
  // re-formed without it yet.
  bool lost(std::size_t job) const {
    return std::any_of(workers_.begin(), workers_.end(), [&](const Worker& w) {
      return w.job == job && w.finished && w.result.crashed && !excluded(job, w.index);
    });
  }
  bool excluded(std::size_t job, std::size_t index) const {
    return std::find(excluded_[job].begin(), excluded_[job].end(), index) != excluded_[job].end();
  }

  // Job `job` of the workers left, planned and installed anew in its protocol's way of re-forming
  // (Rina's ring: docs/rina.md "Failures"): every one of them goes on, with its part of it, from
  // the earliest round one of them has not completed, so that all hold the same sums; its seqs
  // start past the old job's.
  void reform(std::size_t job);

  void on_worker_line(processes::Child& child, const std::string& text);

  // --- results

  ScenarioResult collect();
  // The first error of each kind a job's workers reported: a crash's comes first in the job's
  // result, then any other, then the failure that stopped a worker.
  struct WorkerErrors {
    std::string crash, other, stop;
  };
  // Adds worker `w`'s counts, times and error to its job's result.
  void add_worker(const Worker& w, JobResult& r, std::int64_t& allreduce_ns, WorkerErrors& errors) const;
  // Adds job `job`'s counts on the switches (`stats`) and its PSes to its result.
  void add_daemon_counts(std::size_t job, std::map<std::string, control::SwitchStats>& stats, JobResult& r);

  const Scenario& s_;
  RoundCallback on_round_;
  ProcessNetwork net_;  // the daemons: stopped (and the namespaces removed) after every worker
  Placement* where_;
  processes::ChildSet& children_;
  const NetworkPlan* network_ = nullptr;  // the orchestrator's plan of the topology
  std::vector<EndpointJobPlan> plans_;    // each job's (empty for a TCP collective)
  std::set<std::string> ps_hosts_;        // hosts that run a PS
  std::vector<Worker> workers_;
  std::vector<std::uint64_t> noise_sent_ = std::vector<std::uint64_t>(s_.noise.size(), 0);
  scenario_inputs::NoiseTargets targets_;
  std::vector<std::vector<double>> round_end_ = std::vector<std::vector<double>>(s_.jobs.size());
  // Autotune jobs: their tuning, and the round the runner last let start with when (seconds since start_).
  std::vector<std::unique_ptr<processes::JobTuning>> tuning_ =
      std::vector<std::unique_ptr<processes::JobTuning>>(s_.jobs.size());
  std::vector<std::optional<std::pair<std::size_t, double>>> released_ =
      std::vector<std::optional<std::pair<std::size_t, double>>>(s_.jobs.size());
  // Rina jobs (docs/rina.md "Failures"): the workers (indices in the job) each ring went on
  // without, and since when a crashed worker waits to be left out (its ring re-forms once every
  // worker left waits at the barrier or has failed its round).
  std::vector<std::vector<std::uint32_t>> excluded_ = std::vector<std::vector<std::uint32_t>>(s_.jobs.size());
  std::vector<std::vector<ExcludedWorker>> excluded_workers_ = std::vector<std::vector<ExcludedWorker>>(s_.jobs.size());
  std::vector<std::optional<processes::Clock::time_point>> lost_since_ =
      std::vector<std::optional<processes::Clock::time_point>>(s_.jobs.size());
  // Switches a re-formed job had parts on before (its counts there are in its result too).
  std::vector<std::set<std::string>> earlier_switches_ = std::vector<std::set<std::string>>(s_.jobs.size());
  processes::Clock::time_point start_;
  bool time_limit_reached_ = false;
};

}  // namespace atp
