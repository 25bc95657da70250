// The process runner's rounds (process_run.h): the barrier every round of a job starts at, the
// laggards and failed jobs it stops, Autotune's next plan, and a job that re-forms without the
// workers it lost.
#include <algorithm>

#include "atp/control/control.h"
#include "process_run.h"

namespace atp {

using processes::Child;
using processes::Clock;

Clock::time_point ProcessRun::fail_barrier_laggards(std::size_t job) {
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

void ProcessRun::stop_failed_job(std::size_t job) {
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

void ProcessRun::release_barrier(std::size_t job) {
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

std::string ProcessRun::tune(std::size_t job) {
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

void ProcessRun::reform(std::size_t job) {
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

}  // namespace atp
