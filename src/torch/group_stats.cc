#include "group_stats.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace atp::torch_backend {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<const GroupStatsEntry*>& registry() {  // under registry_mutex()
  static std::vector<const GroupStatsEntry*> entries;
  return entries;
}

template <class Stats>
using Field = std::pair<const char*, std::uint64_t Stats::*>;

constexpr Field<WorkerStats> kWorkerFields[] = {
    {"gradient_packets_sent", &WorkerStats::gradient_packets_sent},
    {"retransmissions", &WorkerStats::retransmissions},
    {"fast_retransmits", &WorkerStats::fast_retransmits},
    {"tail_probes", &WorkerStats::tail_probes},
    {"timeouts", &WorkerStats::timeouts},
    {"undone_cuts", &WorkerStats::undone_cuts},
    {"host_queue_full", &WorkerStats::host_queue_full},
    {"float_resends", &WorkerStats::float_resends},
    {"requested_resends", &WorkerStats::requested_resends},
    {"resend_requests_ignored", &WorkerStats::resend_requests_ignored},
    {"parameters_received", &WorkerStats::parameters_received},
    {"duplicate_parameters", &WorkerStats::duplicate_parameters},
    {"ecn_parameters", &WorkerStats::ecn_parameters},
    {"remaps", &WorkerStats::remaps},
    {"dropped", &WorkerStats::dropped},
    {"rounds_completed", &WorkerStats::rounds_completed},
};

constexpr Field<RinaStats> kRinaFields[] = {
    {"packets_sent", &RinaStats::packets_sent},
    {"contributions_sent", &RinaStats::contributions_sent},
    {"gathers_sent", &RinaStats::gathers_sent},
    {"retransmissions", &RinaStats::retransmissions},
    {"fast_retransmits", &RinaStats::fast_retransmits},
    {"tail_probes", &RinaStats::tail_probes},
    {"host_queue_full", &RinaStats::host_queue_full},
    {"timeouts", &RinaStats::timeouts},
    {"requests_sent", &RinaStats::requests_sent},
    {"merges", &RinaStats::merges},
    {"overlaps_dropped", &RinaStats::overlaps_dropped},
    {"duplicates", &RinaStats::duplicates},
    {"redone_fragments", &RinaStats::redone_fragments},
    {"early_kept", &RinaStats::early_kept},
    {"dropped", &RinaStats::dropped},
    {"rounds_completed", &RinaStats::rounds_completed},
    {"final_values", &RinaStats::final_values},
};

template <class Stats, std::size_t N>
void put(pybind11::dict& d, const Stats& stats, const Field<Stats> (&fields)[N]) {
  for (const auto& [name, member] : fields) d[name] = stats.*member;
}

}  // namespace

GroupStatsEntry::GroupStatsEntry(ClusterJob& job, std::string algorithm, int rank)
    : job_(job), algorithm_(std::move(algorithm)), rank_(rank) {
  const std::lock_guard lock(registry_mutex());
  registry().push_back(this);
}

GroupStatsEntry::~GroupStatsEntry() {
  const std::lock_guard lock(registry_mutex());
  std::erase(registry(), this);
}

pybind11::list group_stats() {
  pybind11::list groups;
  const std::lock_guard lock(registry_mutex());
  for (const GroupStatsEntry* e : registry()) {
    pybind11::dict d;
    d["algorithm"] = e->algorithm_;
    d["job"] = e->job_.job();
    d["rank"] = e->rank_;
    Communicator& c = e->job_.communicator();
    if (c.algorithm() == "rina") {
      put(d, c.rina_stats(), kRinaFields);
    } else {
      put(d, c.stats(), kWorkerFields);
    }
    groups.append(d);
  }
  return groups;
}

}  // namespace atp::torch_backend
