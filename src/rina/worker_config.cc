// RinaWorker's config, and what the worker tells the hosts that run it about its job and its
// counters (endpoint.h), read from its config and stats alone.
#include <algorithm>
#include <cmath>

#include "atp/rina/worker.h"
#include "atp/values_per_packet.h"

namespace atp {

constexpr std::uint32_t kMaxMemberWorkers = 32;  // a rack's bitmap

std::optional<std::string> rina_config_error(const RinaConfig& c) {
  const std::string job = "job " + std::to_string(c.job) + ": ";
  if (c.rank >= c.workers.size()) {
    return job + "rank " + std::to_string(c.rank) + " is not one of the " + std::to_string(c.workers.size()) +
           " workers";
  }
  std::vector<int> seen(c.workers.size(), 0);
  for (const auto& member : c.members) {
    if (member.empty() || member.size() > kMaxMemberWorkers) {
      return job + "every ring member must hold 1 to 32 workers";
    }
    for (const std::uint32_t r : member) {
      if (r >= c.workers.size() || seen[r]++ != 0) {
        return job + "the ring's members must hold every rank exactly once (rank " + std::to_string(r) + ")";
      }
    }
  }
  if (std::find(seen.begin(), seen.end(), 0) != seen.end()) {
    return job + "the ring's members must hold every rank exactly once";
  }
  if (const std::optional<std::string> bad = values_per_packet_error(c.values_per_packet)) {
    return job + "values_per_packet " + *bad;
  }
  if (!(c.scale > 0.0) || !std::isfinite(c.scale)) {
    return job + "the fixed-point scale must be a positive finite number";
  }
  if (c.aggregator_slots == 0) return job + "aggregator_slots must be at least 1";
  if (c.retransmit_timeout <= Duration::zero() || c.min_retransmit_timeout <= Duration::zero() ||
      c.progress_timeout <= Duration::zero() || c.max_retransmit_timeout < c.min_retransmit_timeout) {
    return job + "the timeouts must be positive, max_retransmit_timeout at least the minimum";
  }
  return std::nullopt;
}

JobId RinaWorker::job() const { return config().job; }
Address RinaWorker::self() const { return config().workers[config().rank]; }
std::vector<Address> RinaWorker::sources() const { return config().workers; }
std::uint16_t RinaWorker::values_per_packet() const { return config().values_per_packet; }

const std::vector<std::uint32_t>& RinaWorker::float_fragments() const {
  static const std::vector<std::uint32_t> none;
  return none;
}

Linger RinaWorker::linger() const {
  const Duration progress = config().progress_timeout;
  return {progress / 4, progress};
}

EndpointCounts RinaWorker::counts() const {
  const RinaStats& s = stats();
  return {.retransmissions = s.retransmissions,
          .fast_retransmits = s.fast_retransmits,
          .timeouts = s.timeouts,
          .requested_resends = 0,
          .final_requests = s.requests_sent,
          .hop_pieces = s.merges,
          .result_values = s.final_values,
          .rounds_completed = s.rounds_completed};
}

std::vector<EndpointCounter> RinaWorker::counters() const {
  const RinaStats& s = stats();
  return {{"packets_sent", s.packets_sent},
          {"contributions_sent", s.contributions_sent},
          {"gathers_sent", s.gathers_sent},
          {"retransmissions", s.retransmissions},
          {"fast_retransmits", s.fast_retransmits},
          {"tail_probes", s.tail_probes},
          {"host_queue_full", s.host_queue_full},
          {"timeouts", s.timeouts},
          {"requests_sent", s.requests_sent},
          {"merges", s.merges},
          {"overlaps_dropped", s.overlaps_dropped},
          {"duplicates", s.duplicates},
          {"redone_fragments", s.redone_fragments},
          {"early_kept", s.early_kept},
          {"dropped", s.dropped},
          {"rounds_completed", s.rounds_completed},
          {"final_values", s.final_values}};
}

}  // namespace atp
