// ProcessNetwork: a scenario's daemons as child processes, and its network timeline.
#include "process_network.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "atp/cluster/daemon_processes.h"
#include "atp/control/control.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/switch_config.h"
#include "tcp_flow.h"

namespace atp {
namespace {

using nlohmann::json;
using processes::Child;
using processes::Clock;

// How long the runner waits for a background flow's receiver to report after its sender stopped.
constexpr auto kFlowReportTimeout = std::chrono::seconds(5);

bool is_plain(const EgressConfig& c) {
  return c.rate_gbps == 0 && c.buffer_packets == 0 && c.ecn_threshold_packets == 0 && c.delay == Duration::zero() &&
         c.loss == 0 && c.duplicate == 0 && c.reorder == 0;
}

// What a switch's counters say it rejected (malformed, unknown job, not admitted).
std::uint64_t rejected_in(const control::SwitchStats& stats) {
  // malformed_frames: frames to the ATP port an interface-port switch could not even parse
  return stats.pipeline.malformed + stats.ethernet.malformed_frames + stats.pipeline.unknown_job +
         stats.pipeline.not_admitted;
}

// The config directory's prefix; directories a SIGKILLed run left under it are removed first.
std::string fresh_temp_prefix(const Placement& placement) {
  const std::string prefix = placement.temp_prefix();
  processes::TempDir::remove_stale(prefix);
  return prefix;
}

}  // namespace

std::string daemon_binary(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ignored;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ignored).string();
  return self.empty() ? "/proc/self/exe" : self;
}

ProcessNetwork::ProcessNetwork(const Scenario& scenario, std::string binary, std::unique_ptr<Placement> placement)
    : s_(scenario),
      binary_(std::move(binary)),
      where_(std::move(placement)),
      dir_(fresh_temp_prefix(*where_)),
      access_{control::random_token(), ""},
      flows_(scenario.background.size()),
      flow_results_(scenario.background.size()) {
  // The daemons this run starts answer only to it: a token of its own, in a private file.
  processes::write_private_file(token_file(), access_.token + "\n");
}

ProcessNetwork::~ProcessNetwork() = default;

void ProcessNetwork::plan() {
  try {
    orchestrator_ = std::make_unique<Orchestrator>(s_.topology, where_->mtu(s_));
    network_ = &orchestrator_->network();
  } catch (const PlanError& e) {
    throw ScenarioError(std::string("topology: ") + e.what());
  }
  for (const PlannedLink& l : network_->links) {
    for (const auto& [self, other] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
      if (network_->switch_port_count.contains(self.node))
        switches_[self.node].ports.push_back({other.node, self.port});
    }
  }
  for (auto& [name, sw] : switches_) {
    std::sort(sw.ports.begin(), sw.ports.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  }
}

void ProcessNetwork::start(const std::set<std::string>& ps_hosts) {
  where_->prepare(s_, *network_);
  for (const auto& sw : s_.topology.switches) start_switch(sw.name, Duration::zero(), false);
  std::vector<std::string> names;
  for (const auto& [name, sw] : switches_) names.push_back(name);
  read_control(names);
  start_ps(ps_hosts);
}

// The `atp switch --config` file of switch `name` with the settings active at `t`.
std::string ProcessNetwork::switch_config(const std::string& name, Duration t) const {
  const SwitchSpec& sw = *std::find_if(s_.topology.switches.begin(), s_.topology.switches.end(),
                                       [&](const SwitchSpec& x) { return x.name == name; });
  control::SwitchDaemonConfig c;
  c.name = name;
  c.pipeline = sw.config;
  c.pipeline.reclaim_timeout = std::max(sw.config.reclaim_timeout, Duration::zero());
  if (const auto listen = where_->switch_listen(name)) c.listen = *listen;
  c.seed = s_.seed;
  for (const auto& [peer, port] : switches_.at(name).ports) {
    control::SwitchPortConfig p;
    p.egress = direction_settings(s_, name, peer, t);
    const Placement::PortEndpoint endpoint = where_->port_endpoint(port, peer);
    if (endpoint.peer) {
      p.peer = *endpoint.peer;
    } else {
      p.interface = endpoint.interface;
      if (switches_.contains(peer)) p.neighbour = peer;  // the link's other end, for anyone planning over it
    }
    // Host -> switch is this port's ingress; switch -> switch is the other switch's egress.
    if (!switches_.contains(peer)) {
      const EgressConfig in = host_ingress(peer, name, t);
      if (!is_plain(in)) p.ingress = in;
    }
    c.ports.push_back(p);
  }
  for (const auto& [dst, port] : network_->routes.at(name)) c.routes.emplace_back(dst, port);
  return control::to_yaml(c);
}

// The host -> switch direction as the switch's ingress queue applies it.
EgressConfig ProcessNetwork::host_ingress(const std::string& host, const std::string& sw, Duration t) const {
  return where_->host_ingress(direction_settings(s_, host, sw, t));
}

// Starts the switch process with the settings active at `t`; with `wait`, also reads its control
// address (else start() does, for all at once).
void ProcessNetwork::start_switch(const std::string& name, Duration t, bool wait) {
  const auto path = dir_.path() / (name + ".yaml");
  processes::write_file(path, switch_config(name, t));
  Switch& sw = switches_[name];
  sw.child = &start_switch_process(children_, binary_, name, path.string(), token_file().string(), namespace_of(name));
  if (wait) read_control({name});
}

void ProcessNetwork::read_control(const std::vector<std::string>& names) {
  std::vector<Child*> started;
  for (const std::string& n : names) started.push_back(switches_[n].child);
  const auto controls = control_addresses(children_, started, Clock::now() + processes::kStartupTimeout);
  for (std::size_t i = 0; i < names.size(); ++i) {
    orchestrator_->set_switch(names[i],
                              control::SwitchClient(started[i]->name, controls[i], access_, namespace_of(names[i])));
    switches_[names[i]].up = true;
  }
}

void ProcessNetwork::start_ps(const std::set<std::string>& hosts) {
  std::vector<Child*> started;
  std::vector<std::string> names;
  for (const std::string& host : hosts) {
    PsProcessOptions options = where_->ps_options(host);
    options.address = format_address(network_->host_address.at(host));
    started.push_back(&start_ps_process(children_, binary_, host, options, token_file().string(), namespace_of(host)));
    names.push_back(host);
  }
  const auto controls = control_addresses(children_, started, Clock::now() + processes::kStartupTimeout);
  for (std::size_t i = 0; i < started.size(); ++i) {
    ps_[names[i]] = started[i];
    orchestrator_->set_ps(names[i], control::PsClient(started[i]->name, controls[i], access_, namespace_of(names[i])));
  }
}

void ProcessNetwork::kill_ps(const std::string& host) {
  if (ps_.contains(host)) children_.kill(*ps_[host]);
}

bool ProcessNetwork::apply(const TimedFault& fault) {
  switch (fault.kind) {
    case TimedFault::Kind::kHostCrash:
      return false;
    case TimedFault::Kind::kSwitchDown:
      stop_switch(s_.restarts[fault.index].switch_name);
      break;
    case TimedFault::Kind::kSwitchUp: {
      const std::string& name = s_.restarts[fault.index].switch_name;
      start_switch(name, fault.at, true);
      orchestrator_->reinstall(name);
      count_restart_rejections(name);
      break;
    }
    case TimedFault::Kind::kLinkSettings:
      apply_link_settings(fault.at);
      break;
    case TimedFault::Kind::kFlowStart:
      start_flow(fault.index);
      break;
    case TimedFault::Kind::kFlowStop:
      stop_flow(fault.index);
      break;
  }
  return true;
}

// A restart is a crash of the switch process: its last counters are scraped first (as a
// monitoring system would have), so the report still has them.
void ProcessNetwork::stop_switch(const std::string& name) {
  Switch& sw = switches_.at(name);
  if (!sw.up) return;
  if (const auto last = stats_or_none(orchestrator_->switch_client(name))) sw.retired += *last;
  children_.kill(*sw.child);
  sw.up = false;
}

// Noise packets that reached the pipeline of switch `name` by its counters `stats`: what its
// noise hosts' ports received, less what their ingress queues lost, dropped or still hold, plus
// the copies they made.
std::uint64_t ProcessNetwork::noise_received_in(const std::string& name, const control::SwitchStats& stats) const {
  std::int64_t n = 0;
  for (const auto& [peer, port] : switches_.at(name).ports) {
    const bool noisy =
        std::any_of(s_.noise.begin(), s_.noise.end(), [&](const NoiseSource& src) { return src.host == peer; });
    if (!noisy) continue;
    for (const control::SwitchPortStats& p : stats.ports) {
      if (p.port != port) continue;
      auto v = [](std::uint64_t counter) { return static_cast<std::int64_t>(counter); };
      n +=
          v(p.rx_packets) - v(p.ingress.lost) - v(p.ingress.queue_drops) + v(p.ingress.duplicated) - v(p.ingress.depth);
    }
  }
  return static_cast<std::uint64_t>(std::max<std::int64_t>(n, 0));
}

// Right after a restarted switch got its jobs again: everything it rejected so far that was not
// noise was a job's packet arriving before its job was installed (counted apart, so that
// rejected_packets == noise_packets_received + restart_rejected_packets stays exact).
void ProcessNetwork::count_restart_rejections(const std::string& name) {
  Switch& sw = switches_.at(name);
  const std::optional<control::SwitchStats> stats = stats_or_none(orchestrator_->switch_client(name));
  if (!stats) return;
  const std::uint64_t rejected = rejected_in(*stats), noise = noise_received_in(name, *stats);
  sw.restart_rejected += rejected > noise ? rejected - noise : 0;
}

void ProcessNetwork::apply_link_settings(Duration t) {
  for (const auto& [name, sw] : switches_) {
    if (!sw.up) continue;  // it gets the settings of its restart time when it comes back
    for (const auto& [peer, port] : sw.ports) {
      control::PortSettings settings{direction_settings(s_, name, peer, t), std::nullopt};
      if (!switches_.contains(peer)) settings.ingress = host_ingress(peer, name, t);
      orchestrator_->switch_client(name).set_port(port, settings);
    }
  }
  where_->set_host_rates(t);
}

// --- background flows (netns): a receiver in the destination's namespace, then the sender

void ProcessNetwork::start_flow(std::size_t i) {
  const BackgroundFlow& f = s_.background[i];
  const SocketAddress to{network_->host_address.at(f.to), static_cast<std::uint16_t>(tcp_flow::kPort + i)};
  Flow& flow = flows_[i];
  flow_results_[i].start_seconds = ns_to_s(std::chrono::duration_cast<Duration>(Clock::now() - start_).count());
  flow.receiver = &children_.start("flow receiver " + f.to, {binary_, "flow", "--listen", to.to_string()}, false,
                                   namespace_of(f.to));
  expect_line(*flow.receiver, "listening");
  std::vector<std::string> sender{binary_, "flow", "--connect", to.to_string(), "--congestion", f.congestion};
  if (f.ecn) sender.push_back("--ecn");
  flow.sender = &children_.start("flow sender " + f.from, sender, true, namespace_of(f.from));
  expect_line(*flow.sender, "connected");
}

void ProcessNetwork::stop_flow(std::size_t i) {
  Flow& flow = flows_[i];
  if (flow.sender == nullptr || flow.stopped) return;
  children_.close_stdin(*flow.sender);  // the sender closes the connection; the receiver reports
  flow.stopped = true;
}

void ProcessNetwork::expect_line(Child& child, const std::string& event) {
  const std::string line = children_.first_lines({&child}, Clock::now() + processes::kStartupTimeout).front();
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object() || j.value("event", "") != event) {
    throw std::runtime_error(child.name + " did not start (its first line: '" + line + "')");
  }
}

void ProcessNetwork::finish_flows() {
  for (std::size_t i = 0; i < flows_.size(); ++i) stop_flow(i);
  for (std::size_t i = 0; i < flows_.size(); ++i) {
    FlowResult& r = flow_results_[i];
    r.from = s_.background[i].from;
    r.to = s_.background[i].to;
    if (flows_[i].receiver == nullptr) continue;
    const auto give_up = Clock::now() + kFlowReportTimeout;
    tcp_flow::FlowReport report;
    bool got = false;
    while (!got && Clock::now() < give_up && !flows_[i].receiver->eof) {
      for (auto& [child, line] : children_.wait_lines({flows_[i].receiver}, give_up)) {
        got = got || tcp_flow::parse_report(line, report);
      }
    }
    if (!got) continue;
    if (report.bytes > 0) {  // the samples begin at the first byte (Clock is CLOCK_MONOTONIC, as the receiver's)
      r.start_seconds = ns_to_s(report.first_ns - std::chrono::nanoseconds(start_.time_since_epoch()).count());
    }
    r.bytes = report.bytes;
    r.seconds = report.seconds;
    r.goodput_gbps = report.seconds > 0 ? static_cast<double>(report.bytes) * 8 / report.seconds / 1e9 : 0;
    r.interval_s = report.interval_s;
    r.goodput_mbps = std::move(report.mbps);
  }
}

// --- results

std::map<std::string, control::SwitchStats> ProcessNetwork::collect(ScenarioResult& result) {
  result.flows = flow_results_;
  // Counters from the daemons, once their aggregator tables have settled (settled_stats).
  std::map<std::string, std::optional<control::SwitchStats>> settled = settled_stats();
  std::map<std::string, control::SwitchStats> stats;  // live and retired counters; a switch down now: retired only
  for (auto& [name, sw] : switches_) {
    if (settled[name]) result.leaked_aggregators += settled[name]->aggregators_in_use;
    control::SwitchStats& live = stats[name] = settled[name].value_or(control::SwitchStats{});
    live += sw.retired;
    result.rejected_packets += rejected_in(live);
    result.noise_packets_received += noise_received_in(name, live);
    result.restart_rejected_packets += sw.restart_rejected;
  }
  collect_links(result, stats);
  where_->add_host_drops(result);
  return stats;
}

// The live switches' /stats once every aggregator that will be freed has been: aggregators still
// held a whole reclaim timeout after the switch last saw a packet are leaks. Reading once, a
// reclaim timeout after the jobs ended, is not enough: a switch that was stopped or slow
// (SIGSTOP, a loaded machine) processes the packets waiting in its socket only when it runs
// again, claiming aggregators afresh that its timer frees one timeout later. So the tables are
// read until no packet arrived between two reads a timeout apart (or nothing is held), at most a
// few times.
std::map<std::string, std::optional<control::SwitchStats>> ProcessNetwork::settled_stats() {
  Duration reclaim{0};
  for (const auto& sw : s_.topology.switches) reclaim = std::max(reclaim, sw.config.reclaim_timeout);
  const Duration wait = reclaim + std::chrono::milliseconds(50);
  auto read = [this](const std::string& name) {
    return switches_.at(name).up ? stats_or_none(orchestrator_->switch_client(name)) : std::nullopt;
  };
  auto held = [](const std::optional<control::SwitchStats>& st) { return st ? st->aggregators_in_use : 0; };
  auto packets = [](const std::optional<control::SwitchStats>& st) { return st ? st->pipeline.packets : 0; };
  std::map<std::string, std::optional<control::SwitchStats>> stats;
  std::set<std::string> unsettled;
  for (const auto& [name, sw] : switches_) {
    stats[name] = read(name);  // waits for a switch that is not running right now to answer
    if (held(stats[name]) > 0) unsettled.insert(name);
  }
  constexpr int kMaxReads = 6;
  for (int k = 0; k < kMaxReads && !unsettled.empty(); ++k) {
    std::this_thread::sleep_for(wait);
    for (auto it = unsettled.begin(); it != unsettled.end();) {
      std::optional<control::SwitchStats> now = read(*it);
      const bool quiet = packets(now) == packets(stats[*it]);
      if (now) stats[*it] = std::move(now);
      it = held(stats[*it]) == 0 || quiet ? unsettled.erase(it) : std::next(it);
    }
  }
  return stats;
}

// Links, per direction in planned-link order: a switch's egress counters for switch -> peer, its
// ingress counters for host -> switch.
void ProcessNetwork::collect_links(ScenarioResult& result,
                                   const std::map<std::string, control::SwitchStats>& stats) const {
  auto port_stats = [&](const std::string& sw, PortId port) -> const control::SwitchPortStats* {
    const auto it = stats.find(sw);
    if (it == stats.end()) return nullptr;
    for (const control::SwitchPortStats& p : it->second.ports) {
      if (p.port == port) return &p;
    }
    return nullptr;
  };
  for (const PlannedLink& l : network_->links) {
    for (const auto& [from, to] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
      LinkResult lr{from.node, to.node, 0, 0, 0, 0, 0, 0};
      if (const auto* p = switches_.contains(from.node) ? port_stats(from.node, from.port) : nullptr) {
        lr.packets = p->egress.packets;
        lr.bytes = p->egress.bytes;
        lr.lost = p->egress.lost;
        lr.queue_drops = p->egress.queue_drops;
        lr.ecn_marked = p->egress.ecn_marked;
        lr.duplicated = p->egress.duplicated;
        // Switch to switch: frames the receiving switch's kernel had no buffer for.
        if (const auto* q = switches_.contains(to.node) ? port_stats(to.node, to.port) : nullptr) {
          lr.queue_drops += q->rx_kernel_drops;
        }
      } else if (const auto* q = port_stats(to.node, to.port)) {
        lr.packets = q->rx_packets;
        lr.bytes = q->rx_bytes;
        lr.lost = q->ingress.lost;
        // Frames the switch's kernel had no buffer for arrived and were lost on the way in.
        lr.queue_drops = q->ingress.queue_drops + q->rx_kernel_drops;
        lr.ecn_marked = q->ingress.ecn_marked;
        lr.duplicated = q->ingress.duplicated;
      }
      result.links.push_back(lr);
    }
  }
}

}  // namespace atp
