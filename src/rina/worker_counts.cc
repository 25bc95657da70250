// What RinaWorker tells the hosts that run it about its job and its counters (endpoint.h): read
// from its config and stats alone.
#include "atp/rina/worker.h"

namespace atp {

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
