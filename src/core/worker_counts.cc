// What WorkerEndpoint tells the hosts that run it about its job and its counters (endpoint.h):
// read from its config and stats alone.
#include "atp/worker.h"

namespace atp {

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
