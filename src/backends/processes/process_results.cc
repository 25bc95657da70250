// The process runner's results (process_run.h): every job's, from its workers' result lines, the
// switches' and PSes' counters and what the runner saw.
#include <algorithm>
#include <cmath>

#include "atp/control/stats.h"
#include "process_run.h"

namespace atp {

using processes::Child;
using processes::Clock;

ScenarioResult ProcessRun::collect() {
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
    r.excluded_workers = excluded_workers_[j];
  }
  std::vector<std::int64_t> allreduce_ns(s_.jobs.size(), 0);  // the slowest worker's time in allreduce
  std::vector<WorkerErrors> errors(s_.jobs.size());
  for (const Worker& w : workers_) add_worker(w, result.jobs[w.job], allreduce_ns[w.job], errors[w.job]);

  std::map<std::string, control::SwitchStats> stats = net_.collect(result);
  for (std::uint64_t sent : noise_sent_) result.noise_packets += sent;
  for (std::size_t j = 0; j < s_.jobs.size(); ++j) {
    JobResult& r = result.jobs[j];
    add_daemon_counts(j, stats, r);
    for (const std::string* e : {&errors[j].crash, &errors[j].other, &errors[j].stop}) {
      if (r.error.empty()) r.error = *e;
    }
    if (r.error.empty() && r.completed_rounds < r.rounds) {
      r.error = "only " + std::to_string(r.completed_rounds) + " of " + std::to_string(r.rounds) + " rounds completed";
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

void ProcessRun::add_worker(const Worker& w, JobResult& r, std::int64_t& allreduce_ns, WorkerErrors& errors) const {
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
  allreduce_ns = std::max(allreduce_ns, out.allreduce_ns);
  if (!r.call_seconds.empty()) {
    for (const auto& round : out.call_ns) {
      auto& times = r.call_seconds[w.index].emplace_back();
      for (const std::int64_t ns : round) times.push_back(ns_to_s(ns));
    }
  }
  if (left_out) return;
  if (!w.finished) {
    if (errors.other.empty()) {
      errors.other = "worker '" + w.host + "' did not finish within the time limit of " +
                     std::to_string(ns_to_s(s_.time_limit.count())) + " s (wall clock)";
    }
  } else if (out.crashed) {
    if (errors.crash.empty()) errors.crash = out.error;
  } else if (w.stopped) {
    if (errors.stop.empty()) errors.stop = out.error;  // the failure that stopped it comes first
  } else if (!out.correct && errors.other.empty()) {
    errors.other = out.error.empty() ? "worker '" + w.host + "' was not correct" : out.error;
  }
}

void ProcessRun::add_daemon_counts(std::size_t job, std::map<std::string, control::SwitchStats>& stats, JobResult& r) {
  const JobId id = s_.jobs[job].spec.id;
  std::set<std::string> parts = earlier_switches_[job];
  for (const auto& [name, plan] : plans_[job].switches) parts.insert(name);
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
  for (const std::string& host : s_.jobs[job].spec.ps) {
    const std::optional<control::PsStats> st = stats_or_none(net_.orchestrator().ps_client(host));
    if (st && st->jobs.contains(id)) r.ps_packets_received += st->jobs.at(id).packets_received;
  }
}

}  // namespace atp
