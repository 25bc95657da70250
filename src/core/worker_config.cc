// WorkerEndpoint's config, and what the endpoint tells the hosts that run it about its job and its
// counters (endpoint.h), read from its config and stats alone.
#include <cmath>
#include <limits>

#include "atp/values_per_packet.h"
#include "atp/worker.h"

namespace atp {

std::optional<std::string> worker_config_error(const WorkerConfig& c) {
  const std::string job = "job " + std::to_string(c.job) + ": ";
  if (c.ps.empty()) return job + "the worker has no parameter server; give it at least one";
  if (const std::optional<std::string> bad = values_per_packet_error(c.values_per_packet)) {
    return job + "values_per_packet " + *bad;
  }
  if (c.aggregators.count == 0) {
    return job + "the aggregator range must hold at least 1 aggregator";
  }
  if (c.aggregators.first > std::numeric_limits<std::uint32_t>::max() - (c.aggregators.count - 1)) {
    return job + "the aggregator range must end at index 2^32 - 1 or below";
  }
  if (!(c.scale > 0.0) || !std::isfinite(c.scale)) {
    return job + "the fixed-point scale must be a positive finite number";
  }
  if (c.retransmit_timeout <= Duration::zero() || c.min_retransmit_timeout <= Duration::zero() ||
      c.progress_timeout <= Duration::zero()) {
    return job + "retransmit_timeout, min_retransmit_timeout and progress_timeout must be positive";
  }
  if (c.max_retransmit_timeout < c.min_retransmit_timeout) {
    return job + "max_retransmit_timeout must not be below min_retransmit_timeout";
  }
  return std::nullopt;
}

JobId WorkerEndpoint::job() const { return config().job; }
Address WorkerEndpoint::self() const { return config().self; }
std::uint16_t WorkerEndpoint::values_per_packet() const { return config().values_per_packet; }

std::vector<Address> WorkerEndpoint::sources() const {
  std::vector<Address> sources;
  for (const PsRoute& route : config().ps) sources.push_back(route.ps);
  sources.push_back(config().self);  // a PS on this host relays from this host's address
  return sources;
}

EndpointCounts WorkerEndpoint::counts() const {
  const WorkerStats& s = stats();
  return {.retransmissions = s.retransmissions,
          .fast_retransmits = s.fast_retransmits,
          .timeouts = s.timeouts,
          .requested_resends = s.requested_resends,
          .final_requests = 0,
          .hop_pieces = 0,
          .result_values = (s.parameters_received - s.duplicate_parameters) * config().values_per_packet,
          .rounds_completed = s.rounds_completed};
}

std::vector<EndpointCounter> WorkerEndpoint::counters() const {
  const WorkerStats& s = stats();
  return {{"gradient_packets_sent", s.gradient_packets_sent},
          {"retransmissions", s.retransmissions},
          {"fast_retransmits", s.fast_retransmits},
          {"tail_probes", s.tail_probes},
          {"timeouts", s.timeouts},
          {"undone_cuts", s.undone_cuts},
          {"host_queue_full", s.host_queue_full},
          {"float_resends", s.float_resends},
          {"requested_resends", s.requested_resends},
          {"resend_requests_ignored", s.resend_requests_ignored},
          {"parameters_received", s.parameters_received},
          {"duplicate_parameters", s.duplicate_parameters},
          {"ecn_parameters", s.ecn_parameters},
          {"remaps", s.remaps},
          {"dropped", s.dropped},
          {"rounds_completed", s.rounds_completed}};
}

}  // namespace atp
