// The runner's side of TestbedClient (include/atp/cluster/testbed_client.h): a thread that plans
// and installs the jobs that the ranks of `atp testbed`'s command ask for, over the testbed's
// network, and removes each when the connection that asked for it closes (rank 0 closed its
// process group, or died).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "atp/cluster/orchestrator.h"
#include "atp/cluster/testbed_client.h"
#include "atp/io/line_socket.h"
#include "atp/scenario/scenario.h"

namespace atp {

class TestbedController {
 public:
  // Serves on a Unix socket at `socket_path`. `orchestrator` holds the testbed's daemons; every
  // use of it, here and by the caller, holds `orchestrator_mutex`. Throws std::runtime_error when
  // it cannot listen.
  // `report` gets one sentence per job when it ends: its hosts and what each switch aggregated.
  TestbedController(const Scenario& scenario, Orchestrator& orchestrator, std::mutex& orchestrator_mutex,
                    std::string socket_path, std::function<void(const std::string&)> report);
  ~TestbedController();  // stops serving and removes the jobs still installed
  TestbedController(const TestbedController&) = delete;
  TestbedController& operator=(const TestbedController&) = delete;

  const std::string& path() const { return listener_.path(); }

 private:
  struct Connection {
    LineSocket socket;
    std::vector<JobId> jobs;  // installed on its requests: removed when it closes
  };
  void serve();
  std::string answer(const std::string& line, Connection& connection);
  TestbedJob install(const TestbedJobRequest& request);
  std::map<std::string, SwitchJobCounters> counters(JobId job);  // per switch; holding the mutex
  void remove(JobId job);

  const Scenario& s_;
  Orchestrator& orchestrator_;
  std::mutex& mutex_;
  LineListener listener_;
  std::function<void(const std::string&)> report_;
  std::map<JobId, std::vector<std::string>> ps_of_;     // each installed ATP job's PS hosts
  std::map<JobId, std::vector<std::string>> hosts_of_;  // each installed job's ranks' hosts
  int wake_[2] = {-1, -1};                              // the destructor writes here to stop serve()
  std::thread thread_;
};

}  // namespace atp
