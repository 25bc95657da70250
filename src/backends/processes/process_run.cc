// The process runner's plan, start and drive (process_run.h): each job planned in its protocol and
// installed, the workers started, their lines read and the fault timeline applied on time, noise
// sent.
#include "process_run.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "atp/control/control.h"
#include "atp/io/udp_socket.h"
#include "atp/scenario/timeline.h"

namespace atp {

using processes::Child;
using processes::Clock;

// How long one call of send_noise may send before the runner reads the workers' lines again.
constexpr auto kNoiseTurn = std::chrono::milliseconds(1);

ScenarioResult ProcessRun::run() {
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

void ProcessRun::plan() {
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

void ProcessRun::start_workers() {
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

void ProcessRun::crash_host(const std::string& host, Duration at) {
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

Duration ProcessRun::send_noise(Duration elapsed) {
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
      const auto packet = scenario_inputs::noise_packet(scenario_inputs::noise_seed(s_.seed, i), sent, noise_targets());
      socket->send_to(where_->noise_destination(n.host), packet);
    }
    if (sent < due || !n.until || elapsed < *n.until) next = std::min(next, elapsed + std::chrono::milliseconds(1));
  }
  return next;
}

const scenario_inputs::NoiseTargets& ProcessRun::noise_targets() {
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

void ProcessRun::drive() {
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

void ProcessRun::on_worker_line(Child& child, const std::string& text) {
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

}  // namespace atp
