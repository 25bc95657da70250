// TestbedController: the job requests of `atp testbed`'s ranks.
#include "testbed_controller.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <list>

#include "atp/cluster/protocols.h"
#include "atp/control/daemon_clients.h"
#include "atp/io/log.h"
#include "process_network.h"

namespace atp {

TestbedController::TestbedController(const Scenario& scenario, Orchestrator& orchestrator,
                                     std::mutex& orchestrator_mutex, std::string socket_path,
                                     std::function<void(const std::string&)> report)
    : s_(scenario),
      orchestrator_(orchestrator),
      mutex_(orchestrator_mutex),
      listener_(std::move(socket_path)),
      report_(std::move(report)) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe for the testbed's controller");
  thread_ = std::thread([this] { serve(); });
}

TestbedController::~TestbedController() {
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
  thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TestbedController::serve() {
  std::list<Connection> connections;
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    for (const Connection& c : connections) fds.push_back({c.socket.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
    if (fds[0].revents != 0) break;
    if (fds[1].revents != 0) {
      while (auto socket = listener_.accept()) connections.push_back({std::move(*socket), {}});
    }
    for (auto it = connections.begin(); it != connections.end();) {
      for (const std::string& line : it->socket.read_ready()) it->socket.send_line(answer(line, *it));
      if (!it->socket.closed()) {
        ++it;
        continue;
      }
      for (const JobId job : it->jobs) remove(job);
      it = connections.erase(it);
    }
  }
  for (const Connection& c : connections) {
    for (const JobId job : c.jobs) remove(job);
  }
}

std::string TestbedController::answer(const std::string& line, Connection& connection) {
  try {
    const TestbedRequest request = testbed_request_from_json(line);
    if (request.kind == TestbedRequest::Kind::kAggregations) {
      const std::lock_guard lock(mutex_);
      std::map<std::string, std::uint64_t> aggregations;
      for (const auto& [name, c] : counters(request.job)) aggregations[name] = c.aggregations;
      return aggregations_to_json(aggregations);
    }
    TestbedJob job = install(request.install);
    connection.jobs.push_back(job.job);
    return to_json(job);
  } catch (const std::exception& e) {
    return testbed_error_to_json(e.what());
  }
}

TestbedJob TestbedController::install(const TestbedJobRequest& request) {
  if (request.hosts.empty()) throw std::runtime_error("the testbed got a job of no hosts");
  // The scenario's job whose workers the ranks are (all of them, or some: a subgroup) gives the PS.
  const auto of_job = std::find_if(s_.jobs.begin(), s_.jobs.end(), [&](const ScenarioJob& j) {
    return std::all_of(request.hosts.begin(), request.hosts.end(), [&](const std::string& h) {
      return std::find(j.spec.workers.begin(), j.spec.workers.end(), h) != j.spec.workers.end();
    });
  });
  if (of_job == s_.jobs.end()) {
    std::string hosts;
    for (const std::string& h : request.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
    throw std::runtime_error("the ranks' hosts (" + hosts + ") are not workers of one job of the testbed's file");
  }
  JobSpec spec = of_job->spec;
  spec.workers = request.hosts;
  spec.id = 0;
  spec.values_per_packet = request.values_per_packet;
  spec.scale = request.scale;
  spec.in_network_aggregation = request.in_network_aggregation;
  if (request.retransmit_timeout > Duration::zero()) spec.retransmit_timeout = request.retransmit_timeout;
  if (request.progress_timeout > Duration::zero()) spec.progress_timeout = request.progress_timeout;
  const std::lock_guard lock(mutex_);
  TestbedJob job;
  try {
    const EndpointJobPlan plan = orchestrator_.install_with_free_id(protocol(request.protocol), spec);
    job.job = plan.job;
    job.configs = plan.workers;
    if (!plan.ps.empty()) ps_of_[job.job] = spec.ps;
  } catch (const PlanError& e) {
    throw std::runtime_error("the testbed cannot plan the job: " + std::string(e.what()));
  }
  hosts_of_[job.job] = request.hosts;
  return job;
}

std::map<std::string, SwitchJobCounters> TestbedController::counters(JobId job) {
  std::map<std::string, SwitchJobCounters> counts;
  for (const SwitchSpec& sw : orchestrator_.topology().switches) {
    const auto stats = stats_or_none(orchestrator_.switch_client(sw.name));
    if (!stats) continue;  // down (a restart in the scenario)
    SwitchJobCounters& n = counts[sw.name];
    for (const control::SwitchJobStats& j : stats->jobs) {
      if (j.job == job) n += j.counters;
    }
  }
  return counts;
}

void TestbedController::remove(JobId job) {
  const std::lock_guard lock(mutex_);
  try {
    std::string hosts, counts, reclaimed;
    for (const std::string& h : hosts_of_[job]) hosts += (hosts.empty() ? "" : ", ") + h;
    for (const auto& [name, c] : counters(job)) {
      counts += (counts.empty() ? "" : ", ") + name + " " + std::to_string(c.aggregations);
      // Aggregators a reclaim timeout freed: a rank later than the timeout, or a lost packet.
      if (c.reclaimed > 0) reclaimed += (reclaimed.empty() ? "" : ", ") + name + " " + std::to_string(c.reclaimed);
    }
    if (!reclaimed.empty()) counts += "; aggregators reclaimed by timeout: " + reclaimed;
    hosts_of_.erase(job);
    report_("job " + std::to_string(job) + " of " + hosts + " ended; packets aggregated by switch: " + counts);
    orchestrator_.remove_from_switches(job);
    if (const auto it = ps_of_.find(job); it != ps_of_.end()) {
      for (const std::string& host : it->second) orchestrator_.ps_client(host).remove_job(job);
      ps_of_.erase(it);
    }
  } catch (const std::exception& e) {
    log::warn("testbed: job " + std::to_string(job) + " could not be removed: " + e.what());
  }
}

}  // namespace atp
