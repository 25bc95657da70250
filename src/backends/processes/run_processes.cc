// The process backends of `atp run`: a scenario as real processes (one `atp switch` per switch,
// one `atp ps` per PS host, one `atp worker` per worker host), with the scenario's faults applied
// while it runs: link settings through the switches' ports (also in time windows), host crashes
// and switch restarts as SIGKILL, noise from this process, background TCP flows (netns). Where
// the processes run (127.0.0.1, or network namespaces joined by veth links) is placement.h's;
// this file is the run itself, written once for both.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include "atp/backends/processes.h"
#include "atp/cluster/daemon_processes.h"
#include "atp/cluster/orchestrator.h"
#include "atp/cluster/protocols.h"
#include "atp/control/control.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/stats.h"
#include "atp/control/switch_config.h"
#include "atp/io/netns.h"
#include "atp/io/processes.h"
#include "atp/io/udp_socket.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"
#include "placement.h"
#include "process_network.h"
#include "tcp_flow.h"
#include "tuning.h"
#include "worker_process.h"

namespace atp {
namespace {

using nlohmann::json;
using processes::Child;
using processes::Clock;

// How long one call of send_noise may send before the runner reads the workers' lines again.
constexpr auto kNoiseTurn = std::chrono::milliseconds(1);

// --- one run

class ProcessRun {
 public:
  ProcessRun(const Scenario& scenario, std::string binary, const RoundCallback& on_round,
             std::unique_ptr<Placement> placement)
      : s_(scenario),
        on_round_(on_round),
        net_(scenario, std::move(binary), std::move(placement)),
        where_(&net_.placement()),
        children_(net_.children()) {}

  ScenarioResult run() {
    plan();
    net_.start(ps_hosts_);
    // Fresh daemons have no job yet: no id can be taken.
    for (const EndpointJobPlan& plan : plans_) {
      if (!plan.workers.empty() && net_.orchestrator().install(plan) != control::Install::kInstalled) {
        throw std::logic_error("a fresh daemon had job " + std::to_string(plan.job) + " already");
      }
    }
    start_workers();
    drive();
    return collect();
  }

 private:
  struct Worker {
    std::size_t job = 0, index = 0;
    std::string host;
    Child* child = nullptr;
    std::uint32_t rounds_done = 0;  // from its "round" lines
    bool finished = false;          // result line read, or killed
    worker_process::WorkerResult result;
    bool reported = false;                 // it printed its result line
    std::optional<std::uint32_t> waiting;  // the round it waits to start (a "wait" line), until "go"
    Clock::time_point waiting_since;       // when its "wait" line came
    Clock::time_point heard;               // when its last line came (its "alive" lines too)
    bool stopped = false;                  // killed by the runner because its job had already failed
    std::optional<std::uint32_t> failed;  // re-forming: the round it failed (a "failed" line), until "reform" or "stop"
    Seq next_seq = 0;                     // re-forming: from its last "wait" or "failed" line
    std::vector<TcpScheduleAllreduce::LinkSample> links;  // Autotune: its connections in its last round
  };
  std::string namespace_of(const std::string& node) const { return net_.namespace_of(node); }
  // The protocol of job `job`'s algorithm (atp/cluster/protocols.h); nullptr for a TCP collective.
  const Protocol* protocol_of(std::size_t job) const {
    const std::string_view name = s_.jobs[job].algorithm->protocol;
    return name.empty() ? nullptr : &protocol(name);
  }
  // Whether job `job`'s protocol goes on without workers that are gone (Rina's).
  bool reforms(std::size_t job) const { return protocol_of(job) != nullptr && protocol_of(job)->reformed != nullptr; }

  void plan() {
    net_.plan();
    network_ = &net_.network();
    Orchestrator& orchestrator = net_.orchestrator();
    // Each job's plan in its protocol; a TCP collective has none: nothing for switches or PSes.
    for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
      plans_.emplace_back();
      try {
        if (const Protocol* p = protocol_of(j)) plans_.back() = orchestrator.plan(*p, s_.jobs[j].spec);
      } catch (const PlanError& e) {
        throw ScenarioError("jobs[" + std::to_string(j) + "]: " + e.what());
      }
    }
    for (const ScenarioJob& job : s_.jobs) ps_hosts_.insert(job.spec.ps.begin(), job.spec.ps.end());
  }

  void start_workers() {
    std::map<std::string, std::uint32_t> crash_round;  // host -> first round it must not start
    for (const CrashFault& c : s_.crashes) {
      if (!c.at_round) continue;
      auto [it, fresh] = crash_round.emplace(c.host, *c.at_round);
      if (!fresh) it->second = std::min(it->second, *c.at_round);
    }
    std::vector<Child*> started;
    for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
      const ScenarioJob& job = s_.jobs[j];
      const bool tcp = protocol_of(j) == nullptr;
      const std::vector<SocketAddress> ranks = tcp ? where_->tcp_ranks(job.spec.workers) : std::vector<SocketAddress>();
      if (job.autotune) tuning_[j] = std::make_unique<processes::JobTuning>(job, job_groups(s_, job));
      for (std::size_t w = 0; w < job.spec.workers.size(); ++w) {
        const std::string& host = job.spec.workers[w];
        worker_process::WorkerSpec spec;
        spec.algorithm = std::string(job.algorithm->name);
        spec.job = job.spec.id;
        spec.scale = job.spec.scale;
        if (!tcp) {
          spec.config = plans_[j].workers[w];
          where_->place_worker(host, spec);
        } else {
          spec.ranks = ranks;
          spec.racks = job_groups(s_, job);
          spec.connections = job.connections;
          spec.autotune = job.autotune;
          spec.store_dir = (net_.dir() / ("gloo-" + job.spec.name)).string();
          std::filesystem::create_directories(spec.store_dir);
        }
        spec.seed = s_.seed;
        spec.worker = w;
        spec.workers = job.spec.workers.size();
        spec.elements = job.elements;
        spec.rounds = job.rounds;
        spec.warmup_rounds = job.warmup_rounds;
        spec.magnitude = job.magnitude;
        spec.compute = job.compute_time;
        spec.start = job.start_time;
        spec.alive_every = job.spec.progress_timeout / 4;
        if (crash_round.contains(host)) spec.crash_round = crash_round[host];
        const auto path = net_.dir() / ("worker-" + host + ".json");
        processes::write_file(path, worker_process::to_json(spec));
        Worker worker;
        worker.job = j;
        worker.index = w;
        worker.host = host;
        worker.child = &children_.start("worker " + host, {net_.binary(), "worker", "--spec", path.string()}, true,
                                        namespace_of(host));
        started.push_back(worker.child);
        workers_.push_back(std::move(worker));
      }
    }
    // Everyone bound and ready, then "go" to all at once: process start-up is not measured.
    const auto lines = children_.first_lines(started, Clock::now() + processes::kStartupTimeout);
    for (std::size_t i = 0; i < started.size(); ++i) {
      if (worker_process::parse_line(lines[i]).event != "ready") {
        throw std::runtime_error(started[i]->name + " did not start (its first line: '" + lines[i] + "')");
      }
    }
    net_.begin();
    start_ = net_.start_time();
    for (Worker& w : workers_) children_.write(*w.child, "go\n");
  }

  // --- while it runs: worker lines, and the scenario's fault timeline

  void crash_host(const std::string& host, Duration at) {
    const std::string why = "host crashed (at_us " + std::to_string(at.count() / 1000) + ")";
    for (Worker& w : workers_) {
      if (w.host != host || w.finished) continue;
      children_.kill(*w.child);
      w.finished = true;
      w.result.crashed = true;
      w.result.completed_rounds = w.rounds_done;
      w.result.error = "worker " + std::to_string(w.index) + " of job " + s_.jobs[w.job].spec.name + ": " + why +
                       " after " + std::to_string(w.rounds_done) + " of " + std::to_string(s_.jobs[w.job].rounds) +
                       " rounds";
    }
    for (std::size_t j = 0; j < s_.jobs.size(); ++j) release_barrier(j);  // the others go on without it
    net_.kill_ps(host);
    where_->drop_noise_socket(host);
  }

  // Sends the noise packets due by `elapsed`; returns when the next one is due (Duration::max: none).
  Duration send_noise(Duration elapsed) {
    Duration next = Duration::max();
    const Clock::time_point turn_ends = Clock::now() + kNoiseTurn;
    for (std::size_t i = 0; i < s_.noise.size(); ++i) {
      const NoiseSource& n = s_.noise[i];
      UdpSocket* socket = where_->noise_socket(n.host);
      if (socket == nullptr || elapsed < n.from) {
        if (socket != nullptr) next = std::min(next, n.from);
        continue;
      }
      const Duration end = n.until ? std::min(elapsed, *n.until) : elapsed;
      const auto due = static_cast<std::uint64_t>(std::floor(n.rate_pps * ns_to_s((end - n.from).count())));
      // A runner that fell behind (a loaded machine, where a packet may take longer to send than
      // the rate allows) catches up for at most kNoiseTurn per call, then reads the workers'
      // lines: catching up in full would keep it from them, and so hold every job at its barrier,
      // for ever longer. The rest goes out later.
      std::uint64_t& sent = noise_sent_[i];
      for (std::uint64_t k = 0; sent < due && (k % 16 != 0 || Clock::now() < turn_ends); ++sent, ++k) {
        const auto packet =
            scenario_inputs::noise_packet(scenario_inputs::noise_seed(s_.seed, i), sent, noise_targets());
        socket->send_to(where_->noise_destination(n.host), packet);
      }
      if (sent < due || !n.until || elapsed < *n.until) next = std::min(next, elapsed + std::chrono::milliseconds(1));
    }
    return next;
  }

  const scenario_inputs::NoiseTargets& noise_targets() {
    if (targets_.jobs.empty()) {
      std::vector<scenario_inputs::NoiseJob> jobs;
      for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
        if (!plans_[j].ps.empty()) {
          jobs.push_back(scenario_inputs::noise_job(*network_, s_.jobs[j].spec, plans_[j].values_per_packet));
        }
      }
      targets_ = scenario_inputs::noise_targets(jobs);
    }
    return targets_;
  }

  void drive() {
    const std::vector<TimedFault> timeline = fault_timeline(s_);
    std::size_t next_fault = 0;
    // time_limit is a wall-clock bound here.
    const Clock::time_point deadline = start_ + s_.time_limit;
    for (;;) {
      // Jobs that have failed stop here, before the workers still to wait for are listed.
      Clock::time_point barrier_wake = Clock::time_point::max();
      for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
        barrier_wake = std::min(barrier_wake, fail_barrier_laggards(j));
        stop_failed_job(j);
      }
      std::vector<Child*> running;
      for (Worker& w : workers_) {
        if (!w.finished) running.push_back(w.child);
      }
      if (running.empty()) {
        net_.finish_flows();
        return;
      }
      const Duration elapsed = std::chrono::duration_cast<Duration>(Clock::now() - start_);
      while (next_fault < timeline.size() && timeline[next_fault].at <= elapsed) {
        // The noise due before the fault goes first, as it would have on time: a runner that
        // woke late (a loaded machine) must not run a switch's stop and restart back to back
        // with none of the noise that the switch, down meanwhile, should have missed.
        const TimedFault& fault = timeline[next_fault++];
        send_noise(fault.at);
        if (!net_.apply(fault)) crash_host(s_.crashes[fault.index].host, fault.at);
      }
      Duration wake = send_noise(elapsed);
      if (next_fault < timeline.size()) wake = std::min(wake, timeline[next_fault].at);
      Clock::time_point until = deadline;
      if (wake != Duration::max()) until = std::min(until, start_ + wake);
      until = std::min(until, barrier_wake);
      if (Clock::now() >= deadline) {
        time_limit_reached_ = true;
        net_.finish_flows();
        return;
      }
      for (auto& [child, text] : children_.wait_lines(running, until)) on_worker_line(*child, text);
      for (Worker& w : workers_) {
        if (!w.finished && w.child->eof && w.child->buffer.empty()) {
          w.finished = true;  // exited without a result line (killed from outside, or a crash)
          w.result.completed_rounds = w.rounds_done;
          w.result.error = "worker '" + w.host + "' exited without reporting";
          release_barrier(w.job);
        }
      }
    }
  }

  // The round barrier has no timer of its own: when some of `job`'s live workers have waited to
  // start a round for the job's progress timeout and others never came, and the runner has not
  // heard from those for as long (a worker says it is alive while it prepares a round), those are
  // failed (they hang, or died without a word), as a worker fails when its round makes no
  // progress that long. Returns when to look again (time_point::max: nobody waits).
  Clock::time_point fail_barrier_laggards(std::size_t job) {
    std::optional<Clock::time_point> first_wait;
    for (const Worker& w : workers_) {
      if (w.job == job && !w.finished && w.waiting) {
        first_wait = std::min(first_wait.value_or(w.waiting_since), w.waiting_since);
      }
    }
    if (!first_wait) return Clock::time_point::max();
    const Duration timeout = s_.jobs[job].spec.progress_timeout;
    const auto laggard = [&](const Worker& w) { return w.job == job && !w.finished && !w.waiting && !w.failed; };
    const auto give_up = [&](const Worker& w) {
      Clock::time_point at = std::max(*first_wait, w.heard) + timeout;
      // A Rina ring that lost a worker: those still in their round fail it after their progress
      // timeout and then wait too; they have that, and as long again, from the loss.
      if (lost_since_[job]) at = std::max(at, *lost_since_[job] + 2 * timeout);
      return at;
    };
    const auto next = [&] {
      Clock::time_point at = Clock::time_point::max();
      for (const Worker& w : workers_) {
        if (laggard(w)) at = std::min(at, give_up(w));
      }
      return at;
    };
    if (const Clock::time_point at = next(); Clock::now() < at) return at;
    // What the others have written already counts first: this runner may itself have been busy
    // past the timeout (a switch restart, a loaded machine) while their lines waited in the pipes.
    std::vector<Child*> others;
    for (Worker& w : workers_) {
      if (w.job == job && !w.finished && !w.waiting) others.push_back(w.child);
    }
    for (auto& [child, text] : children_.wait_lines(others, Clock::now())) on_worker_line(*child, text);
    const bool released = std::none_of(workers_.begin(), workers_.end(),
                                       [&](const Worker& w) { return w.job == job && !w.finished && w.waiting; });
    if (released) return Clock::time_point::max();
    for (Worker& w : workers_) {
      if (!laggard(w) || Clock::now() < give_up(w)) continue;
      children_.kill(*w.child);
      w.finished = true;
      w.result.completed_rounds = w.rounds_done;
      w.result.error = "worker '" + w.host + "' did not come to start round " + std::to_string(w.rounds_done) +
                       " within the progress timeout of " + std::to_string(ns_to_s(timeout.count())) +
                       " s while the job's other workers waited for it";
    }
    return next();
  }

  // Once a worker of `job` has failed (not by the scenario's crash: the others then fail by
  // their own progress timeout), the job has failed: its other workers are stopped instead of
  // waited for, since one that hangs (stopped, or stuck) would hold the report back until the
  // time limit.
  void stop_failed_job(std::size_t job) {
    const auto failed = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& w) {
      return w.job == job && w.finished && !w.stopped && !w.result.crashed && !w.result.correct;
    });
    if (failed == workers_.end()) return;
    for (Worker& w : workers_) {
      if (w.job != job || w.finished) continue;
      children_.kill(*w.child);
      w.finished = true;
      w.stopped = true;
      w.result.completed_rounds = w.rounds_done;
      w.result.error = "worker '" + w.host + "' was stopped after " + std::to_string(w.rounds_done) + " of " +
                       std::to_string(s_.jobs[job].rounds) + " rounds: worker '" + failed->host + "' had failed";
    }
  }

  // Once every live worker of `job` waits to start a round, all of them start it. A job that
  // re-forms (Rina's) and lost a worker re-forms instead, once every live worker waits or has
  // failed its round.
  void release_barrier(std::size_t job) {
    if (reforms(job) && lost(job)) {
      if (!lost_since_[job]) lost_since_[job] = Clock::now();
      const bool all_stalled = std::all_of(workers_.begin(), workers_.end(), [&](const Worker& w) {
        return w.job != job || w.finished || w.waiting || w.failed;
      });
      if (all_stalled) reform(job);
      return;
    }
    bool any = false;
    for (const Worker& w : workers_) {
      if (w.job != job || w.finished) continue;
      if (!w.waiting) return;
      any = true;
    }
    if (!any) return;
    std::string go = "go\n";
    if (tuning_[job]) go = tune(job);
    for (Worker& w : workers_) {
      if (w.job != job || w.finished || !w.waiting) continue;
      w.waiting.reset();
      children_.write(*w.child, go);
    }
  }

  // The "go" line of an Autotune job's next round: once a round has run since the last release,
  // its time (from the release to the last worker's end) and every worker's connections go to the
  // job's tuning, which may send a new plan with it.
  std::string tune(std::size_t job) {
    const std::vector<double>& ends = round_end_[job];
    std::string go = "go\n";
    if (const auto& last = released_[job]; last && last->first < ends.size()) {
      std::vector<std::vector<TcpScheduleAllreduce::LinkSample>> links(s_.jobs[job].spec.workers.size());
      for (const Worker& w : workers_) {
        if (w.job == job) links[w.index] = w.links;
      }
      go = tuning_[job]->after_round(ends[last->first] - last->second, links);
    }
    released_[job] = {ends.size(), ns_to_s(std::chrono::duration_cast<Duration>(Clock::now() - start_).count())};
    return go;
  }

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
  void reform(std::size_t job) {
    std::vector<Worker*> left;
    std::uint32_t from_round = s_.jobs[job].rounds;
    for (Worker& w : workers_) {
      if (w.job != job || w.finished) continue;
      left.push_back(&w);
      from_round = std::min(from_round, w.rounds_done);
    }
    for (const Worker& w : workers_) {
      if (w.job == job && w.finished && w.result.crashed && !excluded(job, w.index)) {
        excluded_[job].push_back(static_cast<std::uint32_t>(w.index));
        excluded_workers_[job].push_back(ExcludedWorker{w.host, from_round});
      }
    }
    lost_since_[job].reset();
    if (left.empty()) return;
    std::vector<std::string> hosts;
    std::vector<Seq> old_ring_seqs;
    for (const Worker* w : left) {
      hosts.push_back(w->host);
      old_ring_seqs.push_back(w->next_seq);
    }
    const Protocol& protocol = *protocol_of(job);
    const JobSpec spec =
        protocol.reformed(s_.jobs[job].spec, std::move(hosts), plans_[job].values_per_packet, old_ring_seqs);
    net_.orchestrator().remove_from_switches(spec.id);
    EndpointJobPlan plan = net_.orchestrator().plan(protocol, spec);
    if (net_.orchestrator().install(plan) != control::Install::kInstalled) {
      throw std::runtime_error("job " + spec.name + ": it could not be installed again after a worker was lost");
    }
    for (const auto& [name, part] : plans_[job].switches) earlier_switches_[job].insert(name);
    for (std::size_t k = 0; k < left.size(); ++k) {
      Worker& w = *left[k];
      const worker_process::Reform r{plan.workers[k], excluded_[job], from_round};
      children_.write(*w.child, "reform " + worker_process::reform_json(r) + "\n");
      w.waiting.reset();
      w.failed.reset();
      w.rounds_done = from_round;
    }
    plans_[job] = std::move(plan);
  }

  void on_worker_line(Child& child, const std::string& text) {
    const auto it = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& w) { return w.child == &child; });
    if (it == workers_.end() || it->finished) return;
    Worker& w = *it;
    w.heard = Clock::now();
    const worker_process::WorkerLine line = worker_process::parse_line(text);
    if (line.event == "round") {
      w.rounds_done = line.round + 1;
      w.links = line.links;
      // The job's round ends when its slowest worker ends it.
      std::vector<double>& ends = round_end_[w.job];
      if (ends.size() <= line.round) ends.resize(line.round + 1, 0);
      ends[line.round] =
          std::max(ends[line.round], ns_to_s(std::chrono::duration_cast<Duration>(Clock::now() - start_).count()));
      if (on_round_) {
        on_round_(
            {w.job, w.index, line.round, ns_to_s(std::chrono::duration_cast<Duration>(Clock::now() - start_).count())});
      }
    } else if (line.event == "wait") {
      w.waiting = line.round;
      w.waiting_since = Clock::now();
      w.next_seq = line.next_seq;
      release_barrier(w.job);
    } else if (line.event == "failed") {
      // A Rina round without progress: its ring lost a worker (it waits to re-form), or it failed.
      w.next_seq = line.next_seq;
      if (lost(w.job)) {
        w.failed = line.round;
        release_barrier(w.job);
      } else {
        children_.write(*w.child, "stop\n");
      }
    } else if (line.event == "result") {
      w.result = line.result;
      w.finished = true;
      w.reported = true;
      release_barrier(w.job);
    }
  }

  // --- results

  ScenarioResult collect() {
    ScenarioResult result;
    result.backend = std::string(where_->backend());
    result.simulated_seconds = 0;  // no simulated clock: job seconds are wall-clock
    result.time_limit_reached = time_limit_reached_;
    for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
      JobResult& r = result.jobs.emplace_back(job_result_for(s_.jobs[j]));
      r.completed_rounds = r.rounds;
      r.warmup_rounds = s_.jobs[j].warmup_rounds;
      r.round_end_seconds = round_end_[j];
      if (tuning_[j]) r.replans = tuning_[j]->replans();
      if (s_.jobs[j].algorithm->timed_calls != nullptr) r.call_seconds.resize(s_.jobs[j].spec.workers.size());
    }
    std::vector<std::int64_t> allreduce_ns(s_.jobs.size(), 0);  // the slowest worker's time in allreduce
    std::vector<std::string> crash_error(s_.jobs.size()), other_error(s_.jobs.size()), stop_error(s_.jobs.size());
    for (std::size_t j = 0; j < s_.jobs.size(); ++j) result.jobs[j].excluded_workers = excluded_workers_[j];
    for (const Worker& w : workers_) {
      JobResult& r = result.jobs[w.job];
      const worker_process::WorkerResult& out = w.result;
      // A worker its ring went on without: its counts are in, its rounds and its crash are not.
      const bool left_out = excluded(w.job, w.index);
      if (!left_out) {
        r.completed_rounds = std::min(r.completed_rounds, w.finished ? out.completed_rounds : w.rounds_done);
      }
      r.retransmissions += out.retransmissions;
      r.fast_retransmits += out.fast_retransmits;
      r.requested_resends += out.requested_resends;
      r.timeouts += out.timeouts;
      r.final_requests += out.final_requests;
      r.wrong_values += out.wrong_values;
      // Every worker sees the same float fragments: take one worker's count.
      r.float_fragments = std::max(r.float_fragments, out.float_fragments);
      allreduce_ns[w.job] = std::max(allreduce_ns[w.job], out.allreduce_ns);
      if (!r.call_seconds.empty()) {
        for (const auto& round : out.call_ns) {
          auto& times = r.call_seconds[w.index].emplace_back();
          for (const std::int64_t ns : round) times.push_back(ns_to_s(ns));
        }
      }
      std::string& other = other_error[w.job];
      if (left_out) {
        continue;
      } else if (!w.finished) {
        if (other.empty()) {
          other = "worker '" + w.host + "' did not finish within the time limit of " +
                  std::to_string(ns_to_s(s_.time_limit.count())) + " s (wall clock)";
        }
      } else if (out.crashed) {
        if (crash_error[w.job].empty()) crash_error[w.job] = out.error;
      } else if (w.stopped) {
        if (stop_error[w.job].empty()) stop_error[w.job] = out.error;  // the failure that stopped it comes first
      } else if (!out.correct && other.empty()) {
        other = out.error.empty() ? "worker '" + w.host + "' was not correct" : out.error;
      }
    }

    std::map<std::string, control::SwitchStats> stats = net_.collect(result);
    for (std::uint64_t sent : noise_sent_) result.noise_packets += sent;
    for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
      JobResult& r = result.jobs[j];
      const JobId id = s_.jobs[j].spec.id;
      std::set<std::string> parts = earlier_switches_[j];
      for (const auto& [name, plan] : plans_[j].switches) parts.insert(name);
      for (const std::string& name : parts) {
        r.switch_aggregations[name] = 0;
        for (const control::SwitchJobStats& jc : stats[name].jobs) {
          if (jc.job != id) continue;
          r.switch_aggregations[name] = jc.counters.aggregations;
          r.collisions += jc.counters.collisions;
          r.table_marks += jc.counters.table_marks;
          r.reclaimed_aggregators += jc.counters.reclaimed;
        }
      }
      for (const std::string& host : s_.jobs[j].spec.ps) {
        const std::optional<control::PsStats> st = stats_or_none(net_.orchestrator().ps_client(host));
        if (st && st->jobs.contains(id)) r.ps_packets_received += st->jobs.at(id).packets_received;
      }
      for (const std::string* e : {&crash_error[j], &other_error[j], &stop_error[j]}) {
        if (r.error.empty()) r.error = *e;
      }
      if (r.error.empty() && r.completed_rounds < r.rounds) {
        r.error =
            "only " + std::to_string(r.completed_rounds) + " of " + std::to_string(r.rounds) + " rounds completed";
      }
      r.correct = r.error.empty();
      // TCP collectives have no fragments (nor PS packets, nor an in-network share).
      if (protocol_of(j) != nullptr) {
        r.values_per_packet = plans_[j].values_per_packet;
        r.fragments = fragment_count(s_.jobs[j].elements, r.values_per_packet) * r.completed_rounds;
      }
      r.seconds = ns_to_s(allreduce_ns[j]);
      derive_rates(r);
    }
    return result;
  }

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
  std::vector<std::optional<Clock::time_point>> lost_since_ =
      std::vector<std::optional<Clock::time_point>>(s_.jobs.size());
  // Switches a re-formed job had parts on before (its counts there are in its result too).
  std::vector<std::set<std::string>> earlier_switches_ = std::vector<std::set<std::string>>(s_.jobs.size());
  Clock::time_point start_;
  bool time_limit_reached_ = false;
};

class ProcessBackend final : public Backend {
 public:
  // `loopback`: every process on 127.0.0.1; else in network namespaces (placement.h).
  explicit ProcessBackend(bool loopback) : loopback_(loopback) {}
  std::string_view name() const override { return loopback_ ? "loopback" : "netns"; }
  std::string_view summary() const override {
    return loopback_ ? "real processes on 127.0.0.1 (also called udp); wall-clock times"
                     : "real processes in network namespaces and veth links, switches on Ethernet ports (needs "
                       "root); wall-clock times";
  }
  bool simulated() const override { return false; }
  AlgorithmSupport algorithm_support() const override {
    return {.where = name(), .tcp = true, .real_sockets = true, .gloo_built = ATP_WITH_GLOO != 0};
  }

  std::string cannot_run(const Scenario& scenario, const RunOptions& options) const override {
    const bool loopback = loopback_;
    if (options.series_interval > Duration::zero()) {
      return "series: real processes record no series; use a simulated backend (inproc or ns3)";
    }
    if (std::string why = cannot_run_algorithms(scenario, algorithm_support()); !why.empty()) return why;
    if (loopback && !scenario.background.empty()) {
      return "background: background flows need real links; use --backend netns";
    }
    // A host runs at most one worker (of one job) and one PS (of any number of jobs). On
    // loopback a host is one UDP peer of its switch, so it runs one of the two; in namespaces
    // both can share the host's address (the worker's socket is bound to 0.0.0.0, the PS's to
    // the host's address, both with SO_REUSEADDR), as BytePS's colocated PS shards (N-to-N).
    // A PS's unicast answer to a resend, addressed to the host, reaches the PS's socket, which
    // relays it to the worker (control::PsDaemonCounters::relayed_to_local_worker).
    std::map<std::string, std::string> worker_job;  // host -> the job it is a worker of
    for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
      const JobSpec& spec = scenario.jobs[j].spec;
      for (const std::string& w : spec.workers) {
        const auto [it, fresh] = worker_job.emplace(w, spec.name);
        if (!fresh) {
          return "jobs[" + std::to_string(j) + "]: host '" + w + "' is a worker of job '" + it->second +
                 "' and of job '" + spec.name + "'; a host runs one worker (use separate hosts)";
        }
      }
    }
    for (const ScenarioJob& job : scenario.jobs) {
      for (const std::string& p : job.spec.ps) {
        if (loopback && worker_job.contains(p)) {
          return "host '" + p + "' is both a worker of job '" + worker_job.at(p) +
                 "' and a PS; the loopback backend runs one process per host (use separate hosts, or --backend netns)";
        }
      }
    }
    if (loopback) return "";
    // Connected, so as many links as switches or more close a cycle.
    if (scenario.topology.switch_links.size() >= scenario.topology.switches.size()) {
      return "topology.links: the links form a cycle, and the netns testbed's switches pass ARP and TCP by MAC "
             "learning and flooding, which loops around a cycle; give netns links that form a tree (inproc, ns3 "
             "and loopback take cycles)";
    }
    // Probing runs `ip` and `ethtool` and makes a namespace: once per process, not at every check
    // (run() checks again, and the benchmark checks each algorithm before it runs each size).
    static const std::string unavailable = netns::unavailable_reason();
    return unavailable;
  }

  ScenarioResult run(const Scenario& scenario, const RunOptions& options) const override {
    if (const std::string why = cannot_run(scenario, options); !why.empty()) throw ScenarioError(why);
    const std::string binary = daemon_binary(options.atp_binary);
    // ~ProcessRun stops and reaps every process (and, in namespaces, removes every namespace and veth).
    return ProcessRun(scenario, binary, options.on_round, loopback_ ? loopback_placement() : namespace_placement())
        .run();
  }

 private:
  bool loopback_;
};

}  // namespace

const Backend& loopback_backend() {
  static const ProcessBackend backend(true);
  return backend;
}

const Backend& netns_backend() {
  static const ProcessBackend backend(false);
  return backend;
}

ScenarioResult run_loopback(const Scenario& scenario, const RunOptions& options) {
  return loopback_backend().run(scenario, options);
}

ScenarioResult run_netns(const Scenario& scenario, const RunOptions& options) {
  return netns_backend().run(scenario, options);
}

}  // namespace atp
