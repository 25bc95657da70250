// The simulated runner's round drivers (rounds.h): starting rounds, their end, the exact check.
#include "rounds.h"

#include <algorithm>
#include <string>

namespace atp::simulated {

using scenario_inputs::generate_input;
using scenario_inputs::input_seed;

JobId RoundDriver::job_id() const { return job_.job->spec.id; }

bool any_job_running(const std::vector<std::unique_ptr<JobRuntime>>& jobs) {
  return std::any_of(jobs.begin(), jobs.end(), [](const auto& rt) {
    return std::any_of(rt->drivers.begin(), rt->drivers.end(), [&rt](const auto& d) {
      return !d->stopped && !d->host().crashed && d->rounds_completed < rt->job->rounds;
    });
  });
}

void RoundDriver::start_round(Time now) {
  if (stopped) return;
  if (host_.crash_round && round_ >= *host_.crash_round) crash_host(host_, now, *job_.network, node_);
  if (host_.crashed) {
    stopped = true;
    return;
  }
  input_.resize(job_.job->elements);
  generate_input(input_seed(job_.seed, job_id(), index_, round_), job_.job->magnitude, input_);
  HostUplink uplink(job_.network->sink_for(node_));
  if (!endpoint().start(input_, now, uplink)) {
    stopped = true;
    error = "worker '" + host_.name + "' could not start round " + std::to_string(round_) + " (still busy)";
    return;
  }
  job_.times.started(now);
  running = true;
  job_.network->wake(node_);
  after_endpoint_call(now);
}

void RoundDriver::after_endpoint_call(Time now) {
  if (!running) return;
  Endpoint& ep = endpoint();
  if (ep.state() == WorkerState::kFailed) {
    running = false;
    stopped = true;
    error = "worker '" + host_.name + "' failed in round " + std::to_string(round_) + ": " + ep.error();
    return;
  }
  if (ep.state() != WorkerState::kIdle) return;
  running = false;
  verify();
  ++rounds_completed;
  ++round_;
  job_.times.completed(round_ - 1, now);
  if (round_ < job_.job->rounds) schedule_start(now + job_.job->compute_time);
}

void RoundDriver::schedule_start(Time at) {
  job_.network->schedule(at, [this, epoch = epoch_](Time t) {
    if (epoch == epoch_) start_round(t);
  });
}

void RoundDriver::restart(std::uint32_t round, Time now) {
  ++epoch_;
  running = false;
  round_ = round;
  rounds_completed = std::min(rounds_completed, round);
  if (round_ < job_.job->rounds) start_round(now);
}

void RoundDriver::verify() {
  Endpoint& ep = endpoint();
  RoundReference& ref = job_.reference(round_, ep);
  const auto result = ep.result();
  std::vector<bool> is_float(job_.fragments_per_round(), false);
  std::string wrong;
  for (std::uint32_t f : ep.float_fragments()) {
    if (f >= is_float.size()) {
      if (wrong.empty()) wrong = "float fragment index " + std::to_string(f) + " is out of range";
    } else {
      is_float[f] = true;
    }
  }
  if (ep.picks_exponents() && wrong.empty()) {
    wrong = ep.result_exponents() != ref.exponents
                ? "its fragments' exponents differ from the first worker's to finish the round"
                : scenario_inputs::unresolved_fragment(ref, job_.values_per_packet);
  }
  if (wrong.empty()) {
    wrong = scenario_inputs::check_result(ref, result, is_float, job_.values_per_packet, nullptr, false, &wrong_values);
  }
  if (!wrong.empty() && !mismatch) {
    mismatch = true;
    error = "worker '" + host_.name + "' round " + std::to_string(round_) + ": " + wrong;
  }
  if (--ref.checks_left == 0) job_.references.erase(round_);
}

}  // namespace atp::simulated

namespace atp {

using simulated::to_seconds;

void RoundTimes::started(Time t) {
  if (!first_start_ || t < *first_start_) first_start_ = t;
}

void RoundTimes::completed(std::uint32_t round, Time t) {
  if (!last_end_ || t > *last_end_) last_end_ = t;
  if (round_end_.size() <= round) round_end_.resize(std::size_t{round} + 1);
  round_end_[round] = std::max(round_end_[round], t);
}

void RoundTimes::report(JobResult& r, std::uint32_t warmup_rounds) const {
  r.warmup_rounds = std::min(warmup_rounds, r.completed_rounds);
  const std::optional<Time> timed_from =
      r.warmup_rounds > 0 ? std::optional(round_end_[r.warmup_rounds - 1]) : first_start_;
  if (timed_from && last_end_) r.seconds = to_seconds(*last_end_ - *timed_from);
  r.round_end_seconds.clear();
  for (std::uint32_t k = 0; k < r.completed_rounds; ++k) {
    r.round_end_seconds.push_back(to_seconds(round_end_[k].time_since_epoch()));  // from the run's start
  }
}

}  // namespace atp
