// `atp testbed FILE -- COMMAND`: the netns testbed of a scenario file, with the user's command as
// each worker host's process instead of `atp worker`. The network side (daemons, fault windows,
// restarts, background flows) is ProcessNetwork's, as for `atp run --backend netns`; the ranks'
// jobs are installed when their rank 0 asks (TestbedController).
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include "atp/backends/processes.h"
#include "atp/io/netns.h"
#include "placement.h"
#include "process_network.h"
#include "testbed.h"
#include "testbed_controller.h"

namespace atp {
namespace {

using processes::Child;
using processes::Clock;

// How long ranks that are being stopped (another failed, or the time limit) have after SIGTERM.
constexpr auto kStopGrace = std::chrono::seconds(5);
// The port torch's rendezvous (MASTER_PORT) listens on, in rank 0's own namespace.
constexpr const char* kMasterPort = "29500";

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

class TestbedRun {
 public:
  TestbedRun(const Scenario& scenario, std::string binary, std::vector<std::string> command,
             const TestbedOptions& options)
      : s_(scenario),
        net_(scenario, std::move(binary), namespace_placement()),
        command_(std::move(command)),
        options_(options),
        out_(options.out != nullptr ? *options.out : std::cout) {}

  int run() {
    net_.plan();
    std::set<std::string> ps_hosts;
    for (const ScenarioJob& job : s_.jobs) ps_hosts.insert(job.spec.ps.begin(), job.spec.ps.end());
    net_.start(ps_hosts);
    controller_ = std::make_unique<TestbedController>(
        s_, net_.orchestrator(), orchestrator_mutex_, (net_.dir() / "testbed.sock").string(),
        [](const std::string& sentence) { std::cerr << "atp testbed: " << sentence << std::endl; });
    start_ranks();
    net_.begin();
    drive(fault_timeline(s_));
    net_.finish_flows();
    report_network();
    return failure_.value_or(0);
  }

 private:
  struct Rank {
    std::string host, job;
    std::size_t rank = 0;
    Child* child = nullptr;
    bool done = false;  // exited and its output read
  };

  // Torch's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and the atp
  // backend's (ATP_TESTBED and ATP_HOST: where rank 0 asks for the job and which host each rank
  // is; ATP_BIND, ATP_RACK and GLOO_SOCKET_IFNAME: the host's address, switch and interface).
  void start_ranks() {
    const NetworkPlan& network = net_.network();
    for (const ScenarioJob& job : s_.jobs) {
      const std::string master = format_address(network.host_address.at(job.spec.workers.front()));
      for (std::size_t r = 0; r < job.spec.workers.size(); ++r) {
        const std::string& host = job.spec.workers[r];
        processes::Command command{command_, {}};
        auto set = [&](const std::string& key, const std::string& value) {
          command.environment.emplace_back(key, value);
        };
        set("RANK", std::to_string(r));
        set("WORLD_SIZE", std::to_string(job.spec.workers.size()));
        set("LOCAL_RANK", "0");
        set("LOCAL_WORLD_SIZE", "1");
        set("MASTER_ADDR", master);
        set("MASTER_PORT", kMasterPort);
        set("ATP_TESTBED", controller_->path());
        set("ATP_HOST", host);
        set("ATP_JOB", job.spec.name);
        set("ATP_BIND", format_address(network.host_address.at(host)));
        set("ATP_RACK", switch_of(host));
        set("GLOO_SOCKET_IFNAME", netns::kHostInterface);
        // The file's algorithm unless the caller's environment names one.
        if (std::getenv("ATP_ALGORITHM") == nullptr) set("ATP_ALGORITHM", std::string(job.algorithm->name));
        // Python's output goes to a pipe here: unbuffered, so that lines come as they are printed.
        if (std::getenv("PYTHONUNBUFFERED") == nullptr) set("PYTHONUNBUFFERED", "1");
        Rank rank{host, job.spec.name, r, nullptr, false};
        rank.child = &net_.children().start_command(host, command, net_.namespace_of(host));
        ranks_.push_back(rank);
      }
    }
  }

  std::string switch_of(const std::string& host) const {
    for (const HostSpec& h : s_.topology.hosts) {
      if (h.name == host) return h.switch_name;
    }
    return "";
  }

  void print(const Rank& rank, const std::string& line) { out_ << "[" << rank.host << "] " << line << std::endl; }

  // Applies the fault timeline on time (a file with host crashes is refused: the ranks are the
  // command's).
  void drive(const std::vector<TimedFault>& timeline) {
    std::size_t next_fault = 0;
    const Clock::time_point start = net_.start_time();
    std::optional<Clock::time_point> kill_at;  // once the ranks are being stopped
    for (;;) {
      std::vector<Child*> running;
      for (Rank& r : ranks_) {
        if (!r.done) running.push_back(r.child);
      }
      if (running.empty()) break;
      const Duration elapsed = std::chrono::duration_cast<Duration>(Clock::now() - start);
      while (next_fault < timeline.size() && timeline[next_fault].at <= elapsed) {
        const std::lock_guard lock(orchestrator_mutex_);
        net_.apply(timeline[next_fault++]);
      }
      if (options_.time_limit > Duration::zero() && elapsed >= options_.time_limit && !kill_at) {
        std::cerr << "atp testbed: the time limit of " << format_duration(options_.time_limit)
                  << " has passed; stopping the ranks\n";
        failure_ = failure_.value_or(124);
        kill_at = stop_all();
      }
      if (kill_at && Clock::now() >= *kill_at) {
        for (Rank& r : ranks_) net_.children().signal(*r.child, SIGKILL);
      }
      Clock::time_point until = Clock::now() + std::chrono::milliseconds(100);
      if (next_fault < timeline.size()) until = std::min(until, start + timeline[next_fault].at);
      const bool all_closed = std::all_of(running.begin(), running.end(), [](const Child* c) { return c->eof; });
      if (all_closed) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } else {
        for (auto& [child, line] : net_.children().wait_lines(running, until)) print(rank_of(*child), line);
      }
      for (Rank& r : ranks_) {
        if (r.done || !r.child->eof || !net_.children().exited(*r.child)) continue;
        if (!r.child->buffer.empty()) print(r, r.child->buffer);  // its last line had no newline
        r.child->buffer.clear();
        r.done = true;
        const int status = exit_status(r.child->status);
        if (status != 0 && !failure_) {
          failure_ = status;
          std::cerr << "atp testbed: rank " << r.rank << " of job " << r.job << " on host " << r.host
                    << " exited with status " << status << "; stopping the other ranks\n";
          kill_at = stop_all();
        }
      }
    }
  }

  // What the network did while the ranks ran, on stderr (and as atp run's JSON in --report):
  // where packets were dropped (a link's queue, the file's loss, a host's socket buffers), since
  // that is where a collective's loss recovery time goes.
  void report_network() {
    ScenarioResult result;
    result.backend = "netns";
    net_.collect(result);
    const LinkTotals t = link_totals(result.links);
    std::vector<const LinkResult*> dropping;
    for (const LinkResult& l : result.links) {
      if (l.queue_drops > 0) dropping.push_back(&l);
    }
    std::sort(dropping.begin(), dropping.end(),
              [](const LinkResult* a, const LinkResult* b) { return a->queue_drops > b->queue_drops; });
    std::ostringstream line;
    line << "atp testbed: links carried " << t.packets << " packets; " << t.queue_drops << " queue drops";
    constexpr std::size_t kShown = 3;
    for (std::size_t i = 0; i < std::min(kShown, dropping.size()); ++i) {
      line << (i == 0 ? " (" : ", ") << dropping[i]->from << "->" << dropping[i]->to << " " << dropping[i]->queue_drops;
    }
    if (dropping.size() > kShown) line << ", ...";
    if (!dropping.empty()) line << ")";
    line << ", " << t.lost << " lost to loss settings, " << t.ecn_marked
         << " ECN-marked; hosts' sockets had no buffer for " << result.host_dropped_packets;
    std::cerr << line.str() << std::endl;
    if (!options_.report.empty()) processes::write_file(options_.report, to_json(result));
  }

  // SIGTERM to every rank still running; returns when the stragglers get SIGKILL.
  Clock::time_point stop_all() {
    for (Rank& r : ranks_) {
      if (!r.done) net_.children().signal(*r.child, SIGTERM);
    }
    return Clock::now() + kStopGrace;
  }

  Rank& rank_of(const Child& child) {
    return *std::find_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.child == &child; });
  }

  const Scenario& s_;
  ProcessNetwork net_;  // stops every process (the ranks too) and removes the namespaces last
  std::vector<std::string> command_;
  const TestbedOptions& options_;
  std::ostream& out_;
  std::mutex orchestrator_mutex_;                  // the controller's thread and the timeline both use the orchestrator
  std::unique_ptr<TestbedController> controller_;  // stopped before the daemons
  std::vector<Rank> ranks_;
  std::optional<int> failure_;  // the first non-zero exit status
};

}  // namespace

int run_testbed(const Scenario& scenario, const std::vector<std::string>& command, const TestbedOptions& options) {
  if (command.empty()) throw ScenarioError("no command to run on the testbed's hosts");
  if (scenario.jobs.empty()) {
    throw ScenarioError("jobs: the file names no job, so the testbed has no host to run the command on");
  }
  if (!scenario.crashes.empty()) {
    throw ScenarioError("faults: a host crash ends a rank of the command; kill its process instead");
  }
  if (!scenario.noise.empty()) throw ScenarioError("faults: noise is not sent on a testbed (use atp run)");
  RunOptions run_options;
  if (const std::string why = netns_backend().cannot_run(scenario, run_options); !why.empty()) {
    throw ScenarioError(why);
  }
  return TestbedRun(scenario, daemon_binary(options.atp_binary), command, options).run();
}

}  // namespace atp
