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
    for (const EndpointCounter& c : e->job_.communicator().counters()) d[pybind11::str(std::string(c.name))] = c.value;
    groups.append(d);
  }
  return groups;
}

}  // namespace atp::torch_backend
