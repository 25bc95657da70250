// What a scenario's settings mean on every backend, beyond what its file says: a job's defaults
// (scenario_job, its first RTO sized for the link), each link direction's queue at its end
// (link_base) and the faults active on it (link_settings).
#include "atp/scenario/scenario.h"

#include <algorithm>
#include <string>
#include <vector>

#include "atp/io/egress_fields.h"
#include "atp/plink/aggregation.h"
#include "atp/values_per_packet.h"

namespace atp {

ScenarioJob scenario_job(const Algorithm& algorithm, std::size_t index, std::string name) {
  ScenarioJob job;
  job.algorithm = &algorithm;
  job.spec.in_network_aggregation = algorithm.in_network_aggregation;
  job.spec.id = static_cast<JobId>(index + 1);
  job.spec.name = name.empty() ? "job" + std::to_string(job.spec.id) : std::move(name);
  job.connections = plink::kDefaultLanes;
  return job;
}

bool LinkFault::applies_to(const std::string& sender, const std::string& receiver) const {
  return (a == sender && b == receiver) || (!one_way && a == receiver && b == sender);
}

std::vector<std::size_t> link_faults_of(const Scenario& s, const std::string& from, const std::string& to) {
  std::vector<std::size_t> out;
  for (std::size_t f = 0; f < s.link_faults.size(); ++f) {
    if (s.link_faults[f].applies_to(from, to)) out.push_back(f);
  }
  return out;
}

Duration first_retransmit_timeout(double rate_gbps, std::size_t workers, const CongestionConfig& congestion) {
  const Duration paper = WorkerConfig{}.retransmit_timeout;
  if (rate_gbps <= 0) return paper;
  // In packets of the paper's width where the job names a window (a lower bound: a plan's are wider).
  const auto packet_bytes = static_cast<std::uint32_t>(packet_size(kDefaultValuesPerPacket));
  const double window_bytes = double(initial_window_packets(congestion, packet_bytes)) * packet_bytes;
  const auto crossing = Duration(static_cast<std::int64_t>(double(workers) * window_bytes * 8 / rate_gbps));
  return std::max(paper, crossing);
}

sim::ChannelConfig link_base(const Scenario& s, bool from_host) {
  sim::ChannelConfig c;
  if (!from_host) {
    const EgressConfig port = switch_port_egress(s.link.rate_gbps.value_or(0));
    c.buffer_packets = port.buffer_packets;
    c.buffer_bytes = port.buffer_bytes;
    c.ecn_threshold_packets = port.ecn_threshold_packets;
  }
  s.link.apply_to(c);
  if (from_host) {
    c.ecn_threshold_packets = 0;
    c.fair_queueing = true;
  }
  return c;
}

sim::ChannelConfig link_settings(const Scenario& s, std::span<const std::size_t> faults, Duration t,
                                 sim::ChannelConfig base) {
  for (std::size_t f : faults) {
    if (s.link_faults[f].active_at(t)) s.link_faults[f].overrides.apply_to(base);
  }
  return base;
}

void LinkOverrides::apply_to(EgressConfig& c) const {
  if (delay) c.delay = *delay;
  if (rate_gbps) c.rate_gbps = *rate_gbps;
  if (buffer_packets) c.buffer_packets = *buffer_packets;
  if (buffer_bytes) c.buffer_bytes = *buffer_bytes;
  given_buffer_replaces(c, buffer_packets.has_value(), buffer_bytes.has_value());
  if (ecn_threshold_packets) c.ecn_threshold_packets = *ecn_threshold_packets;
  if (loss) c.loss = *loss;
  if (duplicate) c.duplicate = *duplicate;
  if (reorder) c.reorder = *reorder;
}

}  // namespace atp
