// The pieces of every job plan (paths.h): the port graph, the job spec's checks, the fragment width.
#include "atp/plan/paths.h"

#include <limits>
#include <optional>
#include <unordered_set>

#include "atp/values_per_packet.h"

namespace atp {

PortGraph build_port_graph(const NetworkPlan& network) {
  if (network.topology == nullptr) throw PlanError("the network plan has no topology; build it with plan_network()");
  PortGraph g;
  for (const SwitchSpec& s : network.topology->switches) g.switch_config[s.name] = &s.config;
  for (const HostSpec& h : network.topology->hosts) g.tor[h.name] = h.switch_name;
  for (const PlannedLink& link : network.links) {
    for (const auto& [from, to] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      auto& ports = g.peer[from.node];
      if (ports.size() <= from.port) ports.resize(std::size_t{from.port} + 1);
      ports[from.port] = to;
    }
  }
  return g;
}

void check_job_spec(const NetworkPlan& network, const JobSpec& job, bool needs_ps) {
  if (const std::optional<std::string> bad = job_name_error(job.name)) throw PlanError("job name " + *bad);
  const std::string name = "job " + quote(job.name);
  if (job.workers.empty()) throw PlanError(name + " has no workers");
  if (job.ps.empty() && needs_ps) throw PlanError(name + " has no parameter server");
  std::unordered_set<std::string> workers, servers;
  for (const std::string& w : job.workers) {
    if (!network.host_address.contains(w)) {
      throw PlanError(name + " names worker " + quote(w) + ", which is not a host in the topology");
    }
    if (!workers.insert(w).second) throw PlanError(name + " lists worker " + quote(w) + " twice");
  }
  for (const std::string& p : needs_ps ? job.ps : std::vector<std::string>{}) {
    if (!network.host_address.contains(p)) {
      throw PlanError(name + " names parameter server " + quote(p) + ", which is not a host in the topology");
    }
    if (!servers.insert(p).second) throw PlanError(name + " lists parameter server " + quote(p) + " twice");
    // A colocated worker's packets reach its PS without crossing a switch, so no switch could
    // aggregate them: only a job without in-network aggregation (BytePS-style N-to-N) may.
    if (workers.contains(p) && job.in_network_aggregation) {
      throw PlanError(name + " uses host " + quote(p) +
                      " as both a worker and a parameter server; only a job without in-network aggregation "
                      "(algorithm ps) may put them together");
    }
  }
  if (job.values_per_packet != 0) {  // 0: the widest that fits the path
    if (const std::optional<std::string> bad = values_per_packet_error(job.values_per_packet)) {
      throw PlanError(name + ": values_per_packet " + *bad + " (or 0 to fit the path)");
    }
  }
  if (const std::optional<std::string> bad = window_error(job.congestion)) throw PlanError(name + ": " + *bad);
  if (job.sharing_jobs > 1 && job.sharing_index >= job.sharing_jobs) {
    throw PlanError(name + " has sharing_index " + std::to_string(job.sharing_index) +
                    "; it must be below sharing_jobs (" + std::to_string(job.sharing_jobs) +
                    "), its place among the jobs that share the table");
  }
  if (!(job.scale > 0) || job.scale == std::numeric_limits<double>::infinity()) {
    throw PlanError(name + " has scale " + std::to_string(job.scale) + "; it must be a positive finite number");
  }
}

std::uint16_t job_fragment_width(const NetworkPlan& network, const JobSpec& job, std::uint16_t narrowest) {
  const std::string name = "job " + quote(job.name);
  std::uint16_t width = job.values_per_packet;
  try {
    if (width == 0) width = fragment_width(network.mtu_bytes, narrowest);
  } catch (const PlanError& e) {
    throw PlanError(name + ": " + e.what());
  }
  if (network.mtu_bytes != 0 && kIpUdpBytes + packet_size(width) > network.mtu_bytes) {
    throw PlanError(name + " uses " + std::to_string(width) + " values per packet: its " +
                    std::to_string(kIpUdpBytes + packet_size(width)) +
                    "-byte IP packets do not fit the links' MTU of " + std::to_string(network.mtu_bytes) +
                    " bytes; leave values_per_packet out to fit the path");
  }
  return width;
}

}  // namespace atp
