// The udp backend of `atp run`: a scenario as real processes on 127.0.0.1 (one `atp switch` per
// switch, one `atp ps` per PS host, one `atp worker` per worker host), and the worker's own body.
#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "atp/collectives/communicator.h"
#include "atp/runtime/control.h"
#include "atp/runtime/event_loop.h"
#include "atp/runtime/udp_socket.h"
#include "atp/scenario.h"
#include "inputs.h"

namespace atp {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// --- worker spec: what run_udp hands a worker process (its WorkerConfig and the job's inputs)

json worker_config_to_json(const WorkerConfig& c) {
  json ps = json::array();
  for (const PsRoute& r : c.ps) {
    ps.push_back({{"ps", r.ps},
                  {"bitmap0", r.bitmap0},
                  {"bitmap1", r.bitmap1},
                  {"fan_in0", r.fan_in0},
                  {"fan_in1", r.fan_in1},
                  {"edge_switch_identifier", r.edge_switch_identifier}});
  }
  return {{"job", c.job},
          {"self", c.self},
          {"ps", ps},
          {"values_per_packet", c.values_per_packet},
          {"scale", c.scale},
          {"num_aggregators", c.num_aggregators},
          {"index_policy", c.index_policy == IndexPolicy::kHashed ? "hashed" : "linear"},
          {"cc_enabled", c.congestion.enabled},
          {"initial_window", c.congestion.initial_window},
          {"min_window", c.congestion.min_window},
          {"max_window", c.congestion.max_window},
          {"initial_ssthresh", c.congestion.initial_ssthresh},
          {"mtu_bytes", c.congestion.mtu_bytes},
          {"retransmit_timeout_ns", c.retransmit_timeout.count()},
          {"max_retransmit_timeout_ns", c.max_retransmit_timeout.count()},
          {"progress_timeout_ns", c.progress_timeout.count()},
          {"initial_seq", c.initial_seq}};
}

WorkerConfig worker_config_from_json(const json& j) {
  WorkerConfig c;
  c.job = j.at("job").get<JobId>();
  c.self = j.at("self").get<Address>();
  for (const json& r : j.at("ps")) {
    PsRoute route;
    route.ps = r.at("ps").get<Address>();
    route.bitmap0 = r.at("bitmap0").get<std::uint32_t>();
    route.bitmap1 = r.at("bitmap1").get<std::uint32_t>();
    route.fan_in0 = r.at("fan_in0").get<std::uint8_t>();
    route.fan_in1 = r.at("fan_in1").get<std::uint8_t>();
    route.edge_switch_identifier = r.at("edge_switch_identifier").get<std::uint8_t>();
    c.ps.push_back(route);
  }
  c.values_per_packet = j.at("values_per_packet").get<std::uint16_t>();
  c.scale = j.at("scale").get<double>();
  c.num_aggregators = j.at("num_aggregators").get<std::uint32_t>();
  c.index_policy = j.at("index_policy").get<std::string>() == "hashed" ? IndexPolicy::kHashed : IndexPolicy::kLinear;
  c.congestion.enabled = j.at("cc_enabled").get<bool>();
  c.congestion.initial_window = j.at("initial_window").get<std::uint32_t>();
  c.congestion.min_window = j.at("min_window").get<std::uint32_t>();
  c.congestion.max_window = j.at("max_window").get<std::uint32_t>();
  c.congestion.initial_ssthresh = j.at("initial_ssthresh").get<std::uint32_t>();
  c.congestion.mtu_bytes = j.at("mtu_bytes").get<std::uint32_t>();
  c.retransmit_timeout = Duration(j.at("retransmit_timeout_ns").get<std::int64_t>());
  c.max_retransmit_timeout = Duration(j.at("max_retransmit_timeout_ns").get<std::int64_t>());
  c.progress_timeout = Duration(j.at("progress_timeout_ns").get<std::int64_t>());
  c.initial_seq = j.at("initial_seq").get<Seq>();
  return c;
}

// --- child processes

// SIGINT/SIGTERM while run_udp runs: the handler writes a byte here, the wait loops poll it.
int g_signal_pipe[2] = {-1, -1};
extern "C" void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

struct Child {
  std::string name;  // "switch tor0", "ps ps0", "worker w1"
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
  std::string buffer;
  bool eof = false;
};

// Every child run_udp started; the destructor stops and reaps them all (SIGTERM, then SIGKILL
// after 2 s), whatever way run_udp leaves. Children also get PR_SET_PDEATHSIG, so even a parent
// killed with SIGKILL leaves no process behind.
class Children {
 public:
  ~Children() {
    for (auto& c : children_) {
      if (c->pid > 0) ::kill(c->pid, SIGTERM);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    for (auto& child : children_) {
      Child& c = *child;
      while (c.pid > 0) {
        int status = 0;
        const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
        if (r == c.pid || (r < 0 && errno != EINTR)) {
          c.pid = -1;
        } else if (Clock::now() > deadline) {
          ::kill(c.pid, SIGKILL);
          ::waitpid(c.pid, &status, 0);
          c.pid = -1;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
      if (c.out >= 0) ::close(c.out);
    }
  }

  Child& start(const std::string& name, const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe: " + std::string(strerror(errno)));
    // argv is built before fork: between fork and exec only async-signal-safe calls.
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      throw std::runtime_error("cannot fork for " + name + ": " + strerror(errno));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
      ::dup2(fds[1], STDOUT_FILENO);
      // The parent's SIGINT handler is reset by exec; a signal mask would not be.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    children_.push_back(std::make_unique<Child>());
    Child& c = *children_.back();
    c.name = name;
    c.pid = pid;
    c.out = fds[0];
    return c;
  }

 private:
  std::vector<std::unique_ptr<Child>> children_;  // unique_ptr: callers keep Child& across start()
};

class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted by a signal; every process it started was stopped") {}
};

// Reads from the children's stdout until each of `waiting` has a complete line (or EOF), the
// deadline passes, or a stop signal arrives (throws Interrupted). Returns the lines ("" for EOF
// or timeout) in the order of `waiting`.
std::vector<std::string> read_lines(const std::vector<Child*>& waiting, Clock::time_point deadline) {
  std::vector<std::string> lines(waiting.size());
  std::vector<bool> done(waiting.size(), false);
  auto take_line = [&](std::size_t i) {
    Child& c = *waiting[i];
    const std::size_t nl = c.buffer.find('\n');
    if (nl != std::string::npos) {
      lines[i] = c.buffer.substr(0, nl);
      c.buffer.erase(0, nl + 1);
      done[i] = true;
    } else if (c.eof) {
      done[i] = true;
    }
  };
  for (std::size_t i = 0; i < waiting.size(); ++i) take_line(i);
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (done[i]) continue;
      fds.push_back({waiting[i]->out, POLLIN, 0});
      index.push_back(i);
    }
    if (fds.empty()) return lines;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return lines;
    const int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + strerror(errno));
    if (fds.back().revents & POLLIN) throw Interrupted();
    for (std::size_t k = 0; k + 1 < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *waiting[index[k]];
      char buf[4096];
      const ssize_t n = ::read(c.out, buf, sizeof buf);
      if (n > 0) {
        c.buffer.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        c.eof = true;
      }
      take_line(index[k]);
    }
  }
}

// "... control http://127.0.0.1:40123, ..." or "... control 127.0.0.1:40123 ...": the address.
UdpEndpoint control_from_line(const std::string& line, const std::string& who) {
  std::size_t at = line.find("control ");
  if (at == std::string::npos) throw std::runtime_error(who + " did not start (its first line: '" + line + "')");
  at += 8;
  if (line.compare(at, 7, "http://") == 0) at += 7;
  std::size_t end = at;
  while (end < line.size() &&
         (std::isdigit(static_cast<unsigned char>(line[end])) || line[end] == '.' || line[end] == ':')) {
    ++end;
  }
  return UdpEndpoint::parse(line.substr(at, end - at));
}

std::string http_host(const UdpEndpoint& e) {
  const std::string text = e.to_string();
  return text.substr(0, text.rfind(':'));
}

void post_job(const UdpEndpoint& control, const std::string& body, const std::string& who) {
  httplib::Client client(http_host(control), control.port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  const httplib::Result r = client.Post("/jobs", body, "application/json");
  if (!r) throw std::runtime_error("cannot install a job on " + who + ": " + httplib::to_string(r.error()));
  if (r->status < 200 || r->status >= 300) {
    throw std::runtime_error(who + " refused a job: HTTP " + std::to_string(r->status) + ": " + r->body);
  }
}

json get_stats(const UdpEndpoint& control) {
  httplib::Client client(http_host(control), control.port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  const httplib::Result r = client.Get("/stats");
  if (!r || r->status != 200) return json();
  return json::parse(r->body, nullptr, false);
}

// Link settings of one direction: the scenario's defaults and every fault on that direction
// that is active from the start (from_us 0). Time windows are not applied on real processes.
EgressConfig direction_settings(const Scenario& s, const std::string& from, const std::string& to) {
  EgressConfig c = s.default_link;
  for (const LinkFault& f : s.link_faults) {
    const bool forward = f.a == from && f.b == to;
    const bool backward = f.a == to && f.b == from;
    if (!(forward || (backward && !f.one_way)) || f.from > Duration::zero()) continue;
    f.overrides.apply_to(c);
  }
  return c;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

// A temporary directory for the generated configs, removed on every exit path.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "atp-udp-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// Installs the stop-signal handlers for run_udp's lifetime and restores the old ones after.
struct SignalGuard {
  struct sigaction old_int {
  }, old_term{};
  SignalGuard() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("cannot create a pipe");
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int);
    ::sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalGuard() {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
};

double ns_to_s(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

ScenarioResult run_udp(const Scenario& scenario, const std::string& atp_binary) {
  NetworkPlan network_plan;
  try {
    network_plan = plan_network(scenario.topology);
  } catch (const PlanError& e) {
    throw ScenarioError(std::string("topology: ") + e.what());
  }
  std::vector<JobPlan> plans;
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    try {
      plans.push_back(plan_job(network_plan, scenario.jobs[j].spec));
    } catch (const PlanError& e) {
      throw ScenarioError("jobs[" + std::to_string(j) + "]: " + e.what());
    }
  }
  // One UDP peer per host at its switch port, so a host runs one process: a worker of one job,
  // or a PS (of any number of jobs).
  std::map<std::string, std::string> role;  // host -> "worker of job a" / "ps"
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const JobSpec& spec = scenario.jobs[j].spec;
    auto claim = [&](const std::string& host, const std::string& what) {
      auto [it, fresh] = role.emplace(host, what);
      if (!fresh && !(it->second == "ps" && what == "ps")) {
        throw ScenarioError("jobs[" + std::to_string(j) + "]: host '" + host + "' is both " + it->second + " and " +
                            what + "; the udp backend runs one process per host (use separate hosts)");
      }
    };
    for (const std::string& w : spec.workers) claim(w, "a worker of job '" + spec.name + "'");
    for (const std::string& p : spec.ps) claim(p, "ps");
  }
  std::map<std::string, std::uint64_t> crash_round;  // host -> first round it must not start
  for (const CrashFault& c : scenario.crashes) {
    if (c.at_round) {
      auto [it, fresh] = crash_round.emplace(c.host, *c.at_round);
      if (!fresh) it->second = std::min<std::uint64_t>(it->second, *c.at_round);
    }
  }

  SignalGuard signals;
  TempDir dir;
  Children children;

  // Data ports are picked before anything starts: a switch's config lists its peers' addresses
  // and its peers (hosts, and other switches across switch links) need its address, a cycle
  // that "start and read the printed port" cannot break without a way to change a running
  // switch's ports. All sockets are held until every port is picked, so the ports are distinct;
  // the kernel hands out ephemeral ports in random order, so the short window before the
  // children bind them again is very unlikely to be hit (a child that cannot bind fails loudly).
  std::map<std::string, UdpEndpoint> data;
  {
    std::vector<UdpSocket> held;
    auto pick = [&](const std::string& node) {
      held.emplace_back(UdpEndpoint::loopback(0));
      data[node] = held.back().local_endpoint();
    };
    for (const auto& s : scenario.topology.switches) pick(s.name);
    for (const auto& h : scenario.topology.hosts) pick(h.name);
  }
  std::map<std::string, std::string> tor;
  for (const auto& h : scenario.topology.hosts) tor[h.name] = h.switch_name;

  // Switch configs: port i's peer and the egress settings of the switch -> peer direction.
  std::map<std::string, std::vector<std::pair<std::string, PortId>>> peers;  // switch -> (peer, port)
  for (const PlannedLink& l : network_plan.links) {
    for (const auto& [self, other] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
      if (network_plan.switch_port_count.contains(self.node)) peers[self.node].push_back({other.node, self.port});
    }
  }
  const auto startup_deadline = [] { return Clock::now() + std::chrono::seconds(10); };
  std::map<std::string, UdpEndpoint> switch_control;
  {
    std::vector<Child*> started;
    std::vector<std::string> names;
    for (const auto& s : scenario.topology.switches) {
      auto ports = peers[s.name];
      std::sort(ports.begin(), ports.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
      std::ostringstream y;
      y << "name: " << s.name << "\naggregators: " << s.config.num_aggregators
        << "\nwidth: " << s.config.aggregator_width
        << "\nreclaim_timeout_us: " << std::max<std::int64_t>(0, s.config.reclaim_timeout.count() / 1000)
        << "\natp_capable: " << (s.config.atp_capable ? "true" : "false") << "\nlisten: " << data[s.name].to_string()
        << "\ncontrol: 127.0.0.1:0\nseed: " << scenario.seed << "\nports:\n";
      y.precision(17);
      for (const auto& [peer, port] : ports) {
        const EgressConfig e = direction_settings(scenario, s.name, peer);
        y << "  - {peer: \"" << data[peer].to_string() << "\", rate_gbps: " << e.rate_gbps
          << ", buffer_packets: " << e.buffer_packets << ", ecn_threshold_packets: " << e.ecn_threshold_packets
          << ", delay_us: " << e.delay.count() / 1000 << ", loss: " << e.loss << ", duplicate: " << e.duplicate
          << ", reorder: " << e.reorder << "}\n";
      }
      y << "routes:\n";
      for (const auto& [dst, port] : network_plan.routes[s.name]) {
        y << "  - {dst: \"" << control::address_to_string(dst) << "\", port: " << port << "}\n";
      }
      const auto path = dir.path / (s.name + ".yaml");
      write_file(path, y.str());
      started.push_back(&children.start("switch " + s.name, {atp_binary, "switch", "--config", path.string()}));
      names.push_back(s.name);
    }
    const auto lines = read_lines(started, startup_deadline());
    for (std::size_t i = 0; i < started.size(); ++i) {
      switch_control[names[i]] = control_from_line(lines[i], "switch '" + names[i] + "'");
    }
  }

  // PS processes, one per PS host, then every job on its switches and PSes.
  std::map<std::string, UdpEndpoint> ps_control;
  {
    std::vector<Child*> started;
    std::vector<std::string> names;
    for (const auto& [host, what] : role) {
      if (what != "ps") continue;
      started.push_back(&children.start(
          "ps " + host,
          {atp_binary, "ps", "--listen", data[host].to_string(), "--control", "127.0.0.1:0", "--uplink",
           data[tor[host]].to_string(), "--address", control::address_to_string(network_plan.host_address.at(host))}));
      names.push_back(host);
    }
    const auto lines = read_lines(started, startup_deadline());
    for (std::size_t i = 0; i < started.size(); ++i) {
      ps_control[names[i]] = control_from_line(lines[i], "ps '" + names[i] + "'");
    }
  }
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    for (const auto& [name, sw] : plans[j].switches) {
      post_job(switch_control.at(name), control::to_json(sw), "switch '" + name + "'");
    }
    for (std::size_t p = 0; p < plans[j].ps.size(); ++p) {
      const std::string& host = scenario.jobs[j].spec.ps[p];
      post_job(ps_control.at(host), control::to_json(plans[j].ps[p]), "ps '" + host + "'");
    }
  }

  // Workers: each gets its WorkerConfig and what it needs to regenerate every worker's inputs.
  struct WorkerRef {
    std::size_t job, index;
    std::string host;
  };
  std::vector<Child*> workers;
  std::vector<WorkerRef> refs;
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const ScenarioJob& job = scenario.jobs[j];
    for (std::size_t w = 0; w < job.spec.workers.size(); ++w) {
      const std::string& host = job.spec.workers[w];
      json spec = {{"config", worker_config_to_json(plans[j].workers[w])},
                   {"local", data[host].to_string()},
                   {"uplink", data[tor[host]].to_string()},
                   {"seed", scenario.seed},
                   {"worker", w},
                   {"workers", job.spec.workers.size()},
                   {"elements", job.elements},
                   {"rounds", job.rounds},
                   {"magnitude", job.magnitude},
                   {"compute_ns", job.compute_time.count()},
                   {"start_ns", job.start_time.count()},
                   {"crash_round", crash_round.contains(host) ? static_cast<std::int64_t>(crash_round[host]) : -1}};
      const auto path = dir.path / ("worker-" + host + ".json");
      write_file(path, spec.dump());
      workers.push_back(&children.start("worker " + host, {atp_binary, "worker", "--spec", path.string()}));
      refs.push_back({j, w, host});
    }
  }
  // Wall-clock bound: the scenario's time limit, plus start-up.
  const auto lines = read_lines(workers, Clock::now() + scenario.time_limit + std::chrono::seconds(5));

  ScenarioResult result;
  result.backend = "udp";
  result.simulated_seconds = 0;  // no simulated clock: job seconds are wall-clock
  result.jobs.resize(scenario.jobs.size());
  std::vector<std::int64_t> first_start(scenario.jobs.size(), INT64_MAX), last_end(scenario.jobs.size(), 0);
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    JobResult& r = result.jobs[j];
    r.name = scenario.jobs[j].spec.name;
    r.rounds = scenario.jobs[j].rounds;
    r.completed_rounds = r.rounds;
    r.workers = scenario.jobs[j].spec.workers.size();
    r.tensor_bytes = scenario.jobs[j].elements * sizeof(float);
  }
  std::vector<std::string> crash_error(scenario.jobs.size()), other_error(scenario.jobs.size());
  for (std::size_t i = 0; i < workers.size(); ++i) {
    JobResult& r = result.jobs[refs[i].job];
    const json out = json::parse(lines[i], nullptr, false);
    std::string& other = other_error[refs[i].job];
    if (out.is_discarded() || !out.is_object()) {
      r.completed_rounds = 0;
      if (other.empty()) {
        other = "worker '" + refs[i].host + "' reported nothing within the time limit of " +
                std::to_string(ns_to_s(scenario.time_limit.count())) + " s (wall clock)";
        result.time_limit_reached = true;
      }
      continue;
    }
    const auto completed = out.value("completed_rounds", 0u);
    r.completed_rounds = std::min(r.completed_rounds, completed);
    r.retransmissions += out.value("retransmissions", std::uint64_t{0});
    r.fast_retransmits += out.value("fast_retransmits", std::uint64_t{0});
    r.timeouts += out.value("timeouts", std::uint64_t{0});
    // Every worker sees the same float fragments: take one worker's count.
    r.float_fragments = std::max(r.float_fragments, out.value("float_fragments", std::uint64_t{0}));
    if (out.contains("start_ns") && completed > 0) {
      first_start[refs[i].job] = std::min(first_start[refs[i].job], out["start_ns"].get<std::int64_t>());
      last_end[refs[i].job] = std::max(last_end[refs[i].job], out["end_ns"].get<std::int64_t>());
    }
    const std::string error = out.value("error", std::string());
    if (out.value("crashed", false)) {
      if (crash_error[refs[i].job].empty()) crash_error[refs[i].job] = error;
    } else if (!out.value("correct", false) && other.empty()) {
      other = error.empty() ? "worker '" + refs[i].host + "' was not correct" : error;
    }
  }

  // Counters from the daemons. Aggregators still held after the reclaim timeout are leaks, so
  // wait that long first (the switches' own timers reclaim them).
  Duration reclaim{0};
  for (const auto& s : scenario.topology.switches) reclaim = std::max(reclaim, s.config.reclaim_timeout);
  std::this_thread::sleep_for(reclaim + std::chrono::milliseconds(50));
  std::map<std::string, json> switch_stats;
  for (const auto& [name, control] : switch_control) {
    switch_stats[name] = get_stats(control);
    const json& s = switch_stats[name];
    if (s.is_object()) result.leaked_aggregators += s.value("aggregators_in_use", std::uint64_t{0});
  }
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    JobResult& r = result.jobs[j];
    const JobId id = scenario.jobs[j].spec.id;
    for (const auto& [name, sw] : plans[j].switches) {
      r.switch_aggregations[name] = 0;
      const json& s = switch_stats[name];
      if (!s.is_object() || !s.contains("jobs")) continue;
      for (const json& jc : s["jobs"]) {
        if (jc.value("job", JobId{0}) != id) continue;
        r.switch_aggregations[name] = jc.value("aggregations", std::uint64_t{0});
        r.collisions += jc.value("collisions", std::uint64_t{0});
      }
    }
    for (const std::string& host : scenario.jobs[j].spec.ps) {
      const json s = get_stats(ps_control.at(host));
      const std::string key = std::to_string(id);
      if (s.is_object() && s.contains("jobs") && s["jobs"].contains(key)) {
        r.ps_packets_received += s["jobs"][key].value("packets_received", std::uint64_t{0});
      }
    }
    for (const std::string* e : {&crash_error[j], &other_error[j]}) {
      if (r.error.empty()) r.error = *e;
    }
    if (r.error.empty() && r.completed_rounds < r.rounds) {
      r.error = "only " + std::to_string(r.completed_rounds) + " of " + std::to_string(r.rounds) + " rounds completed";
    }
    r.correct = r.error.empty();
    const std::uint64_t vpp = scenario.jobs[j].spec.values_per_packet;
    r.fragments = (scenario.jobs[j].elements + vpp - 1) / vpp * r.completed_rounds;
    if (last_end[j] > first_start[j]) r.seconds = ns_to_s(last_end[j] - first_start[j]);
    derive_rates(r);
  }

  // Links, per direction in planned-link order: a switch's egress counters for switch -> peer,
  // its ingress counters (packets, bytes; nothing is dropped there) for peer -> switch.
  auto port_stats = [&](const std::string& sw, PortId port) -> const json* {
    const auto it = switch_stats.find(sw);
    if (it == switch_stats.end() || !it->second.is_object() || !it->second.contains("ports")) return nullptr;
    for (const json& p : it->second["ports"]) {
      if (p.value("port", -1) == static_cast<int>(port)) return &p;
    }
    return nullptr;
  };
  for (const PlannedLink& l : network_plan.links) {
    for (const auto& [from, to] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
      LinkResult lr{from.node, to.node, 0, 0, 0, 0, 0};
      if (const json* p =
              network_plan.switch_port_count.contains(from.node) ? port_stats(from.node, from.port) : nullptr) {
        lr.packets = p->value("tx_packets", std::uint64_t{0});
        lr.bytes = p->value("tx_bytes", std::uint64_t{0});
        lr.lost = p->value("lost", std::uint64_t{0});
        lr.queue_drops = p->value("queue_drops", std::uint64_t{0});
        lr.ecn_marked = p->value("ecn_marked", std::uint64_t{0});
      } else if (const json* q = port_stats(to.node, to.port)) {
        lr.packets = q->value("rx_packets", std::uint64_t{0});
        lr.bytes = q->value("rx_bytes", std::uint64_t{0});
      }
      result.links.push_back(lr);
    }
  }
  return result;  // ~Children stops and reaps every process
}

int run_udp_worker(const std::string& spec_path) {
  json spec;
  WorkerConfig config;
  try {
    std::ifstream f(spec_path);
    spec = json::parse(f);
    config = worker_config_from_json(spec.at("config"));
  } catch (const std::exception& e) {
    std::cerr << "atp worker: " << spec_path << ": " << e.what() << "\n";
    return 2;
  }
  const std::uint64_t seed = spec.at("seed").get<std::uint64_t>();
  const std::size_t index = spec.at("worker").get<std::size_t>();
  const std::size_t workers = spec.at("workers").get<std::size_t>();
  const std::size_t elements = spec.at("elements").get<std::size_t>();
  const std::uint32_t rounds = spec.at("rounds").get<std::uint32_t>();
  const double magnitude = spec.at("magnitude").get<double>();
  const Duration compute(spec.at("compute_ns").get<std::int64_t>());
  const std::int64_t crash_round = spec.at("crash_round").get<std::int64_t>();

  json out = {{"correct", false}, {"completed_rounds", 0}, {"retransmissions", 0}, {"fast_retransmits", 0},
              {"timeouts", 0},    {"float_fragments", 0},  {"crashed", false},     {"error", ""}};
  std::uint64_t float_fragments = 0;
  std::string error;
  bool crashed = false;
  std::uint32_t completed = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  try {
    Communicator comm(config, UdpEndpoint::parse(spec.at("local").get<std::string>()),
                      UdpEndpoint::parse(spec.at("uplink").get<std::string>()));
    std::this_thread::sleep_for(Duration(spec.at("start_ns").get<std::int64_t>()));
    std::vector<float> buffer(elements);
    for (std::uint32_t round = 0; round < rounds && error.empty(); ++round) {
      if (crash_round >= 0 && round >= crash_round) {
        crashed = true;
        error = "host crashed (at_round " + std::to_string(crash_round) + ") after " + std::to_string(completed) +
                " of " + std::to_string(rounds) + " rounds";
        break;
      }
      if (round > 0) std::this_thread::sleep_for(compute);
      scenario_inputs::generate_input(scenario_inputs::input_seed(seed, config.job, index, round), magnitude, buffer);
      const std::int64_t t0 = EventLoop::now().time_since_epoch().count();
      if (round == 0) start_ns = t0;
      comm.allreduce(buffer);
      end_ns = EventLoop::now().time_since_epoch().count();
      const auto ref =
          scenario_inputs::make_reference(seed, config.job, workers, round, elements, magnitude, config.scale);
      std::uint64_t floats = 0;
      const std::string wrong =
          scenario_inputs::check_result(ref, buffer, {}, config.values_per_packet, config.scale, &floats);
      float_fragments += floats;
      if (!wrong.empty()) error = "round " + std::to_string(round) + ": " + wrong;
      ++completed;
    }
    const WorkerStats st = comm.stats();
    out["retransmissions"] = st.retransmissions;
    out["fast_retransmits"] = st.fast_retransmits;
    out["timeouts"] = st.timeouts;
  } catch (const std::exception& e) {
    error = e.what();
  }
  out["completed_rounds"] = completed;
  out["correct"] = error.empty() && completed == rounds;
  out["crashed"] = crashed;
  out["float_fragments"] = float_fragments;
  out["start_ns"] = start_ns;
  out["end_ns"] = end_ns;
  out["seconds"] = ns_to_s(end_ns - start_ns);
  out["error"] =
      error.empty() ? "" : "worker " + std::to_string(index) + " of job " + std::to_string(config.job) + ": " + error;
  std::cout << out.dump() << std::endl;
  return error.empty() ? 0 : 1;
}

}  // namespace atp
