// The scenario runner over a simulated network: switch and host nodes around the protocol core,
// round drivers with seeded inputs and exact checks, faults, reports (atp/backends/simulated.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <variant>

#include "atp/backends/simulated.h"
#include "atp/cluster/protocols.h"
#include "atp/fixed_point.h"
#include "atp/io/machine.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"
#include "atp/sim/inproc_network.h"

namespace atp {
namespace {

using sim::NodeId;

using scenario_inputs::generate_input;
using scenario_inputs::input_seed;

double to_seconds(Duration d) { return static_cast<double>(d.count()) / 1e9; }

// --- nodes

// A host's single uplink: whatever an endpoint sends leaves on port 0.
class HostUplink final : public PacketSink {
 public:
  explicit HostUplink(PortSink& ports) : ports_(ports) {}
  void send(std::span<const std::uint8_t> packet) override { ports_.send(0, packet); }

 private:
  PortSink& ports_;
};

// The simulated time of the last packet or timer any node handled: when the run really ended
// (Network::run_until leaves its clock at the limit).
struct Activity {
  Time last{};
  void saw(Time now) { last = std::max(last, now); }
};

// A switch's control-plane state (routes, multicast groups, job entries) in the order it was
// installed, kept so that a restarted switch can be given the same state again.
struct SwitchSetup {
  struct Job {
    Address group = 0;
    std::vector<PortId> multicast_ports;
    SwitchJobEntry entry;
  };
  std::vector<std::pair<Address, PortId>> routes;
  std::vector<Job> jobs;

  void install(SwitchPipeline& pipeline) const {
    for (const auto& [dst, port] : routes) pipeline.add_route(dst, port);
    for (const Job& job : jobs) {
      pipeline.add_multicast_group(job.group, job.multicast_ports);
      pipeline.install_job(job.entry);
    }
  }
};

// A switch process: its pipeline, and what a restart (Scenario::restarts) does to it. While down
// it drops every packet that arrives; packets it had already sent stay in its egress queues and
// on the links and are still delivered (they left the switch before its process died).
class SwitchNode final : public sim::Node {
 public:
  SwitchNode(const SwitchConfig& config, Activity& activity)
      : pipeline_(std::make_unique<SwitchPipeline>(config)), activity_(activity) {}
  void on_packet(PortId port, std::span<std::uint8_t> packet, Time now, PortSink& out) override {
    activity_.saw(now);
    if (state_ == State::kDown) return;
    if (noise_ports.contains(port)) ++noise_received;
    pipeline_->process(port, packet, now, out);
  }
  void on_timeout(Time now, PortSink& out) override {
    activity_.saw(now);
    pipeline_->on_timeout(now, out);
  }
  Time next_deadline() const override { return state_ == State::kDown ? kNever : pipeline_->next_deadline(); }

  // The process dies at `now` with all its state and stays down until now + down, then comes back
  // with a fresh pipeline given `setup` again (by restart() itself when down is zero, else by
  // come_back(), which the caller schedules). A restart while down extends the down time.
  void restart(Time now, Duration down) {
    retired_counters_ += pipeline_->counters();
    for (const auto& [job, c] : pipeline_->all_job_counters()) retired_job_counters_[job] += c;
    pipeline_ = std::make_unique<SwitchPipeline>(pipeline_->config());
    state_ = State::kDown;
    down_until_ = std::max(down_until_, now + down);
    come_back(now);
  }
  void come_back(Time now) {
    if (state_ != State::kDown || now < down_until_) return;
    setup.install(*pipeline_);
    state_ = State::kUp;
  }

  SwitchPipeline& pipeline() { return *pipeline_; }
  // Counters over the switch's whole life: the running pipeline's plus those restarts threw away.
  SwitchCounters counters() const {
    SwitchCounters sum = retired_counters_;
    sum += pipeline_->counters();
    return sum;
  }
  SwitchJobCounters job_counters(JobId job) const {
    SwitchJobCounters sum = pipeline_->job_counters(job);
    const auto it = retired_job_counters_.find(job);
    if (it != retired_job_counters_.end()) sum += it->second;
    return sum;
  }

  SwitchSetup setup;
  // Ports of noise hosts, and the packets that arrived on them while the switch was up: the
  // noise that reached a running switch (ScenarioResult::noise_packets_received).
  std::set<PortId> noise_ports;
  std::uint64_t noise_received = 0;

 private:
  enum class State { kUp, kDown };

  std::unique_ptr<SwitchPipeline> pipeline_;
  Activity& activity_;
  State state_ = State::kUp;
  Time down_until_{};
  SwitchCounters retired_counters_;
  std::map<JobId, SwitchJobCounters> retired_job_counters_;
};

// A noise source (Scenario::noise): bad packets at a fixed rate from `from` until `until`, or
// until no job is running any more, so that it cannot keep the simulation alive on its own.
class NoiseSender {
 public:
  NoiseSender(const NoiseSource& source, std::uint64_t seed, scenario_inputs::NoiseTargets targets,
              std::function<bool()> jobs_running)
      : source_(source), seed_(seed), targets_(std::move(targets)), jobs_running_(std::move(jobs_running)) {}

  // The time of the next packet; kNever once the source has stopped.
  Time next_deadline() const {
    if (stopped_) return kNever;
    const Time next = send_time(sent_);
    return source_.until && next >= Time(*source_.until) ? kNever : next;
  }
  // Sends the packets due at `now`. Returns whether it sent any.
  bool on_timeout(Time now, PacketSink& out) {
    bool sent_any = false;
    while (next_deadline() <= now) {
      if (!jobs_running_()) {
        stopped_ = true;
        break;
      }
      out.send(scenario_inputs::noise_packet(seed_, sent_, targets_));
      ++sent_;
      sent_any = true;
    }
    return sent_any;
  }
  std::uint64_t sent() const { return sent_; }

 private:
  // Packet n leaves at from + n / rate: computed from n rather than accumulated, so no drift.
  Time send_time(std::uint64_t n) const {
    return Time(source_.from) + Duration(static_cast<Duration::rep>(std::llround(n * 1e9 / source_.rate_pps)));
  }

  const NoiseSource& source_;
  std::uint64_t seed_;
  scenario_inputs::NoiseTargets targets_;
  std::function<bool()> jobs_running_;
  std::uint64_t sent_ = 0;
  bool stopped_ = false;
};

class RoundDriver;

// One end host: the worker and PS endpoints of every job placed on it. Parameter packets and
// Rina's packets go to the job's worker, gradient packets to the job's PS. A host may also be a noise source. A
// crashed host ignores everything and sends nothing.
class HostNode final : public sim::Node {
 public:
  HostNode(std::string host_name, Activity& activity) : name(std::move(host_name)), activity_(activity) {}

  void on_packet(PortId, std::span<std::uint8_t> packet, Time now, PortSink& out) override;
  void on_timeout(Time now, PortSink& out) override;
  Time next_deadline() const override;
  // Its NIC's queue refused a packet: every worker here with fragments in flight slows down, as
  // a worker process on a real host does when its socket's send fails (the host's link is a
  // bottleneck that no switch marks).
  void on_egress_full(Time now) override;

  struct LocalWorker {
    std::unique_ptr<Endpoint> endpoint;
    RoundDriver* driver;
  };
  std::string name;
  std::map<JobId, LocalWorker> workers;
  std::map<JobId, PsEndpoint> ps;
  std::vector<NoiseSender> noise;
  bool crashed = false;
  Time crash_time{};
  // What the control plane does when this host crashes (a Rina job's ring re-forms without it),
  // run right after the crash: it sees the process gone at once, as a launcher sees its child exit.
  std::vector<std::function<void(Time)>> on_crash;
  std::optional<std::uint32_t> crash_round;  // crash when a worker here would start this round
  std::uint64_t dropped = 0;                 // undecodable, or for a job with no endpoint here

 private:
  Activity& activity_;
};

// --- the run

struct JobRuntime;

// Starts a worker's rounds one after another (after the job's compute time), checks each result.
class RoundDriver {
 public:
  RoundDriver(JobRuntime& job, std::size_t index, HostNode& host, NodeId node)
      : job_(job), index_(index), host_(host), node_(node) {}

  void start_round(Time now);
  // start_round at `at`, unless restart() comes first.
  void schedule_start(Time at);
  // Called after every call into the endpoint: notices completion and failure.
  void after_endpoint_call(Time now);
  // Its job's ring re-formed (a worker gone, Rina): from `round` on again, at once, with the
  // endpoint the host now has. A start scheduled before is void.
  void restart(std::uint32_t round, Time now);
  // Stops it for good with `why` as its error.
  void fail(std::string why) {
    running = false;
    stopped = true;
    if (error.empty()) error = std::move(why);
  }

  Endpoint& endpoint() { return *host_.workers.at(job_id()).endpoint; }
  void replace_endpoint(std::unique_ptr<Endpoint> e) { host_.workers.at(job_id()).endpoint = std::move(e); }
  JobId job_id() const;
  std::uint32_t rounds_completed = 0;
  bool running = false;
  bool stopped = false;            // failed or crashed: no more rounds
  bool mismatch = false;           // some round's result was not exact
  std::uint64_t wrong_values = 0;  // in the rounds it checked
  std::string error;
  const HostNode& host() const { return host_; }

 private:
  void verify();

  JobRuntime& job_;
  std::size_t index_;
  HostNode& host_;
  NodeId node_;
  std::uint32_t round_ = 0;  // the round running or next to start
  std::uint32_t epoch_ = 0;  // restarts so far: a start scheduled in an earlier epoch is void
  std::vector<float> input_;
};

// The exact answer of one round, computed when its first worker completes it, and how many
// workers still have to check against it.
struct RoundReference : scenario_inputs::RoundReference {
  std::size_t checks_left = 0;
};

struct JobRuntime {
  const ScenarioJob* job = nullptr;
  std::size_t file_index = 0;
  const Protocol* protocol = nullptr;  // its algorithm's (atp/cluster/protocols.h)
  EndpointJobPlan plan;
  std::uint16_t values_per_packet = 0;
  const std::map<std::string, SwitchJobPlan>& switch_plans() const { return plan.switches; }
  sim::Network* network = nullptr;
  std::uint64_t seed = 0;
  std::vector<std::unique_ptr<RoundDriver>> drivers;
  std::vector<HostNode*> ps_hosts;
  // Re-forming (Rina's): the workers (indices into drivers) the job went on without, and when;
  // the switches its earlier plans used (for the report).
  std::vector<std::uint32_t> excluded;
  std::vector<ExcludedWorker> excluded_workers;
  std::set<std::string> earlier_switches;
  std::map<std::uint32_t, RoundReference> references;
  // Float32-path fragments per round (every worker gets the same set), counted when the round's
  // first worker completes it; the report sums the rounds every worker completed, like `fragments`.
  std::vector<std::uint64_t> float_fragments_by_round;
  RoundTimes times;

  std::uint64_t fragments_per_round() const { return fragment_count(job->elements, values_per_packet); }

  // ATP: the exponents its PS picks, which the reference works out itself. Rina: the exponents the
  // round's first finisher reports (a redo pass picks them from values the reference cannot order
  // the same way); every other worker must match its sums, and they must resolve this round's
  // values (checked in RoundDriver::verify).
  RoundReference& reference(std::uint32_t round, const Endpoint& first_finisher) {
    auto it = references.find(round);
    if (it != references.end()) return it->second;
    RoundReference& ref = references[round];
    if (first_finisher.picks_exponents()) {
      scenario_inputs::make_reference_at(seed, job->spec.id, drivers.size(), round, job->elements, job->magnitude,
                                         values_per_packet, first_finisher.result_exponents(), ref, excluded);
    } else {
      scenario_inputs::make_reference(seed, job->spec.id, drivers.size(), round, job->elements, job->magnitude,
                                      job->spec.scale, values_per_packet, ref);
    }
    ref.checks_left = drivers.size() - excluded.size();
    // Every worker gets the same set of float fragments; count them once per round.
    if (float_fragments_by_round.size() <= round) float_fragments_by_round.resize(std::size_t{round} + 1);
    float_fragments_by_round[round] = first_finisher.float_fragments().size();
    return ref;
  }
};

JobId RoundDriver::job_id() const { return job_.job->spec.id; }

bool any_job_running(const std::vector<std::unique_ptr<JobRuntime>>& jobs) {
  return std::any_of(jobs.begin(), jobs.end(), [](const auto& rt) {
    return std::any_of(rt->drivers.begin(), rt->drivers.end(), [&rt](const auto& d) {
      return !d->stopped && !d->host().crashed && d->rounds_completed < rt->job->rounds;
    });
  });
}

void HostNode::on_packet(PortId, std::span<std::uint8_t> packet, Time now, PortSink& out) {
  if (crashed) return;
  activity_.saw(now);
  Header h;
  if (decode_header(packet, h) != DecodeError::kOk) {
    ++dropped;
    return;
  }
  HostUplink uplink(out);
  if (h.is_ack || h.rina != RinaKind::kNone) {
    auto it = workers.find(h.job);
    if (it == workers.end()) {
      ++dropped;
      return;
    }
    it->second.endpoint->on_packet(packet, now, uplink);
    it->second.driver->after_endpoint_call(now);
  } else {
    auto it = ps.find(h.job);
    if (it == ps.end()) {
      ++dropped;
      return;
    }
    it->second.on_packet(packet, now, uplink);
  }
}

void HostNode::on_timeout(Time now, PortSink& out) {
  if (crashed) return;
  HostUplink uplink(out);
  // Only what happens counts as activity: a noise source that finds every job finished and stops
  // must not stretch the run's end.
  bool acted = false;
  for (NoiseSender& n : noise) {
    if (n.next_deadline() <= now) acted = n.on_timeout(now, uplink) || acted;
  }
  for (auto& [job, w] : workers) {
    if (w.endpoint->next_deadline() <= now) {
      acted = true;
      w.endpoint->on_timeout(now, uplink);
      w.driver->after_endpoint_call(now);
    }
  }
  for (auto& [job, p] : ps) {
    if (p.next_deadline() <= now) {
      acted = true;
      p.on_timeout(now, uplink);
    }
  }
  if (acted) activity_.saw(now);
}

void HostNode::on_egress_full(Time now) {
  if (crashed) return;
  for (auto& [job, w] : workers) w.endpoint->on_host_queue_full(now);
}

Time HostNode::next_deadline() const {
  if (crashed) return kNever;
  Time t = kNever;
  for (const NoiseSender& n : noise) t = std::min(t, n.next_deadline());
  for (const auto& [job, w] : workers) t = std::min(t, w.endpoint->next_deadline());
  for (const auto& [job, p] : ps) t = std::min(t, p.next_deadline());
  return t;
}

void crash_host(HostNode& host, Time now, sim::Network& network, NodeId node) {
  if (host.crashed) return;
  host.crashed = true;
  host.crash_time = now;
  network.wake(node);
  for (const auto& hook : host.on_crash) network.schedule(now, hook);
}

void RoundDriver::start_round(Time now) {
  if (stopped) return;
  if (host_.crash_round && round_ >= *host_.crash_round) crash_host(host_, now, *job_.network, node_);
  if (host_.crashed) {
    stopped = true;
    return;
  }
  input_.resize(job_.job->elements);
  generate_input(input_seed(job_.seed, job_id(), index_, round_), job_.job->magnitude, input_);
  HostUplink uplink(job_.network->sink_for(node_));
  if (!endpoint().start(input_, now, uplink)) {
    stopped = true;
    error = "worker '" + host_.name + "' could not start round " + std::to_string(round_) + " (still busy)";
    return;
  }
  job_.times.started(now);
  running = true;
  job_.network->wake(node_);
  after_endpoint_call(now);
}

void RoundDriver::after_endpoint_call(Time now) {
  if (!running) return;
  Endpoint& ep = endpoint();
  if (ep.state() == WorkerState::kFailed) {
    running = false;
    stopped = true;
    error = "worker '" + host_.name + "' failed in round " + std::to_string(round_) + ": " + ep.error();
    return;
  }
  if (ep.state() != WorkerState::kIdle) return;
  running = false;
  verify();
  ++rounds_completed;
  ++round_;
  job_.times.completed(round_ - 1, now);
  if (round_ < job_.job->rounds) schedule_start(now + job_.job->compute_time);
}

void RoundDriver::schedule_start(Time at) {
  job_.network->schedule(at, [this, epoch = epoch_](Time t) {
    if (epoch == epoch_) start_round(t);
  });
}

void RoundDriver::restart(std::uint32_t round, Time now) {
  ++epoch_;
  running = false;
  round_ = round;
  rounds_completed = std::min(rounds_completed, round);
  if (round_ < job_.job->rounds) start_round(now);
}

void RoundDriver::verify() {
  Endpoint& ep = endpoint();
  RoundReference& ref = job_.reference(round_, ep);
  const auto result = ep.result();
  std::vector<bool> is_float(job_.fragments_per_round(), false);
  std::string wrong;
  for (std::uint32_t f : ep.float_fragments()) {
    if (f >= is_float.size()) {
      if (wrong.empty()) wrong = "float fragment index " + std::to_string(f) + " is out of range";
    } else {
      is_float[f] = true;
    }
  }
  if (ep.picks_exponents() && wrong.empty()) {
    wrong = ep.result_exponents() != ref.exponents
                ? "its fragments' exponents differ from the first worker's to finish the round"
                : scenario_inputs::unresolved_fragment(ref, job_.values_per_packet);
  }
  if (wrong.empty()) {
    wrong = scenario_inputs::check_result(ref, result, is_float, job_.values_per_packet, nullptr, false, &wrong_values);
  }
  if (!wrong.empty() && !mismatch) {
    mismatch = true;
    error = "worker '" + host_.name + "' round " + std::to_string(round_) + ": " + wrong;
  }
  if (--ref.checks_left == 0) job_.references.erase(round_);
}

// The channel settings of a link direction at time `now`: its end's defaults (link_base: a host's
// NIC queue only marks where a fault says so), then every fault active at `now` on that
// direction, in file order.
sim::ChannelConfig channel_settings(const Scenario& s, const std::vector<std::size_t>& faults, bool from_host,
                                    Time now) {
  return link_settings(s, faults, now.time_since_epoch(), link_base(s, from_host));
}

struct Channel {
  std::size_t id = 0;
  std::string from, to;
  std::vector<std::size_t> faults;  // indices into Scenario::link_faults
  bool from_host = false;           // a host's NIC queue, else a switch port
};

}  // namespace

void RoundTimes::started(Time t) {
  if (!first_start_ || t < *first_start_) first_start_ = t;
}

void RoundTimes::completed(std::uint32_t round, Time t) {
  if (!last_end_ || t > *last_end_) last_end_ = t;
  if (round_end_.size() <= round) round_end_.resize(std::size_t{round} + 1);
  round_end_[round] = std::max(round_end_[round], t);
}

void RoundTimes::report(JobResult& r, std::uint32_t warmup_rounds) const {
  r.warmup_rounds = std::min(warmup_rounds, r.completed_rounds);
  const std::optional<Time> timed_from =
      r.warmup_rounds > 0 ? std::optional(round_end_[r.warmup_rounds - 1]) : first_start_;
  if (timed_from && last_end_) r.seconds = to_seconds(*last_end_ - *timed_from);
  r.round_end_seconds.clear();
  for (std::uint32_t k = 0; k < r.completed_rounds; ++k) {
    r.round_end_seconds.push_back(to_seconds(round_end_[k].time_since_epoch()));  // from the run's start
  }
}

struct SimulatedScenario::Impl {
  Impl(const Scenario& s, sim::Network& n) : scenario(s), network(n) {}

  void build();
  void reform(JobRuntime& rt, Time now);
  void sample_series(Time now);
  JobResult job_result(const JobRuntime& rt) const;

  const Scenario& scenario;
  sim::Network& network;
  NetworkPlan network_plan;
  std::vector<std::unique_ptr<JobRuntime>> jobs;  // the ATP-protocol jobs, in file order
  Activity activity;
  std::map<std::string, NodeId> node_ids;
  std::map<std::string, SwitchNode*> switches;
  std::map<std::string, HostNode*> hosts;
  std::vector<Channel> channels;

  // Series (record_series): the interval, and per job its samples and the counts at the last one.
  Duration series_interval{0};
  struct SeriesState {
    JobSeries series;
    std::uint64_t values = 0, aggregations = 0, ps_packets = 0;
  };
  std::vector<SeriesState> series;  // parallel to `jobs`
};

SimulatedScenario::SimulatedScenario(const Scenario& scenario, sim::Network& network)
    : impl_(std::make_unique<Impl>(scenario, network)) {
  impl_->build();
}

SimulatedScenario::~SimulatedScenario() = default;

void SimulatedScenario::Impl::build() {
  // Plan first: a job that cannot be set up is a bad scenario file, reported before anything runs.
  try {
    network_plan = plan_network(scenario.topology);
    network_plan.mtu_bytes = network.mtu_bytes();
  } catch (const PlanError& e) {
    throw ScenarioError(std::string("topology: ") + e.what());
  }
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    if (scenario.jobs[j].algorithm->protocol.empty()) continue;
    auto rt = std::make_unique<JobRuntime>();
    rt->job = &scenario.jobs[j];
    rt->file_index = j;
    rt->protocol = &protocol(scenario.jobs[j].algorithm->protocol);
    try {
      rt->plan = rt->protocol->plan(network_plan, scenario.jobs[j].spec);
      rt->values_per_packet = rt->plan.values_per_packet;
    } catch (const PlanError& e) {
      throw ScenarioError("jobs[" + std::to_string(j) + "]: " + e.what());
    }
    jobs.push_back(std::move(rt));
  }

  for (const auto& s : scenario.topology.switches) {
    auto node = std::make_unique<SwitchNode>(s.config, activity);
    switches[s.name] = node.get();
    const auto routes = network_plan.routes.find(s.name);
    node_ids[s.name] = network.add_switch(
        s.name, std::move(node), routes == network_plan.routes.end() ? std::map<Address, PortId>{} : routes->second);
  }
  for (const auto& h : scenario.topology.hosts) {
    auto node = std::make_unique<HostNode>(h.name, activity);
    hosts[h.name] = node.get();
    node_ids[h.name] = network.add_host(h.name, std::move(node), network_plan.host_address.at(h.name));
  }
  for (const auto& c : scenario.crashes) {
    HostNode& host = *hosts.at(c.host);
    if (c.at_round) host.crash_round = std::min(host.crash_round.value_or(*c.at_round), *c.at_round);
    if (c.at_time) {
      const NodeId id = node_ids.at(c.host);
      network.schedule(Time(*c.at_time), [&host, this, id](Time t) { crash_host(host, t, network, id); });
    }
  }

  // Links, with the faults that apply to each direction.
  for (const auto& link : network_plan.links) {
    Channel ab{0, link.a.node, link.b.node, link_faults_of(scenario, link.a.node, link.b.node),
               hosts.count(link.a.node) > 0};
    Channel ba{0, link.b.node, link.a.node, link_faults_of(scenario, link.b.node, link.a.node),
               hosts.count(link.b.node) > 0};
    const Time start{};
    std::tie(ab.id, ba.id) = network.connect(node_ids.at(link.a.node), link.a.port, node_ids.at(link.b.node),
                                             link.b.port, channel_settings(scenario, ab.faults, ab.from_host, start),
                                             channel_settings(scenario, ba.faults, ba.from_host, start));
    channels.push_back(std::move(ab));
    channels.push_back(std::move(ba));
  }
  // Faults with a time window: recompute the affected channels at every boundary.
  for (const Channel& ch : channels) {
    for (std::size_t f : ch.faults) {
      const LinkFault& fault = scenario.link_faults[f];
      std::vector<Duration> boundaries;
      if (fault.from > Duration::zero()) boundaries.push_back(fault.from);
      if (fault.until) boundaries.push_back(*fault.until);
      for (Duration b : boundaries) {
        network.schedule(Time(b), [this, &ch](Time t) {
          network.set_channel_config(ch.id, channel_settings(scenario, ch.faults, ch.from_host, t));
        });
      }
    }
  }

  // Forwarding state of every switch: unicast routes, then each job's multicast group and entry.
  for (const auto& [name, node] : switches) {
    auto routes = network_plan.routes.find(name);
    if (routes == network_plan.routes.end()) continue;
    node->setup.routes.assign(routes->second.begin(), routes->second.end());
  }
  for (auto& rt : jobs) {
    const JobId id = rt->job->spec.id;
    for (const auto& [name, sw] : rt->switch_plans()) {
      switches.at(name)->setup.jobs.push_back(
          SwitchSetup::Job{multicast_group_address(id), sw.multicast_ports, sw.entry});
    }
  }
  for (const auto& [name, node] : switches) node->setup.install(node->pipeline());
  for (const SwitchRestart& restart : scenario.restarts) {
    SwitchNode& node = *switches.at(restart.switch_name);
    network.schedule(Time(restart.at), [&node, this, down = restart.down](Time t) {
      node.restart(t, down);
      if (down > Duration::zero()) network.schedule(t + down, [&node](Time back) { node.come_back(back); });
    });
  }

  // Endpoints and round drivers.
  for (auto& rt : jobs) {
    const ScenarioJob& job = *rt->job;
    rt->network = &network;
    rt->seed = scenario.seed;
    for (std::size_t w = 0; w < job.spec.workers.size(); ++w) {
      const std::string& host_name = job.spec.workers[w];
      HostNode& host = *hosts.at(host_name);
      const NodeId node = node_ids.at(host_name);
      rt->drivers.push_back(std::make_unique<RoundDriver>(*rt, w, host, node));
      RoundDriver* driver = rt->drivers.back().get();
      try {
        host.workers.emplace(job.spec.id, HostNode::LocalWorker{rt->protocol->endpoint(rt->plan.workers[w]), driver});
      } catch (const std::exception& e) {
        // The parser checks every setting an endpoint rejects; this only guards against a gap.
        throw ScenarioError("jobs[" + std::to_string(rt->file_index) + "]: " + e.what());
      }
      driver->schedule_start(Time(job.start_time));
      if (rt->protocol->reformed != nullptr) {
        host.on_crash.push_back([this, job_runtime = rt.get()](Time t) { reform(*job_runtime, t); });
      }
    }
    for (std::size_t p = 0; p < job.spec.ps.size(); ++p) {
      HostNode& host = *hosts.at(job.spec.ps[p]);
      host.ps.emplace(job.spec.id, PsEndpoint(rt->plan.ps[p]));
      rt->ps_hosts.push_back(&host);
    }
  }
  // Noise sources imitate every job's id and member addresses (see NoiseTargets), each from its
  // own stream: the scenario seed mixed with the source's index in the file.
  std::vector<scenario_inputs::NoiseJob> noise_jobs;
  for (const auto& rt : jobs) {
    if (!rt->plan.ps.empty()) {
      noise_jobs.push_back(scenario_inputs::noise_job(network_plan, rt->job->spec, rt->values_per_packet));
    }
  }
  const scenario_inputs::NoiseTargets noise_targets = scenario_inputs::noise_targets(noise_jobs);
  for (std::size_t i = 0; i < scenario.noise.size(); ++i) {
    const NoiseSource& source = scenario.noise[i];
    hosts.at(source.host)
        ->noise.emplace_back(source, scenario_inputs::noise_seed(scenario.seed, i), noise_targets,
                             [this] { return any_job_running(jobs); });
    for (const PlannedLink& link : network_plan.links) {
      if (link.a.node == source.host) switches.at(link.b.node)->noise_ports.insert(link.b.port);
    }
  }

  for (const auto& [name, id] : node_ids) network.wake(id);
}

// A worker host of a job that re-forms (Rina's) crashed: the control plane re-forms the job of the
// others in its protocol's way (Rina's ring, docs/rina.md "Failures"). The rack of a gone worker stays one member while
// two or more of the job's workers are left in it; a worker left alone in its rack is a member of its own. Every
// survivor redoes the rounds from the earliest one some survivor has not completed, so that all of them hold the same
// sums (a round some of them completed with the gone worker's values is done again without).
void SimulatedScenario::Impl::reform(JobRuntime& rt, Time now) {
  const JobId id = rt.job->spec.id;
  std::vector<RoundDriver*> survivors;
  std::vector<std::uint32_t> gone;
  std::uint32_t from_round = rt.job->rounds;
  for (std::uint32_t w = 0; w < rt.drivers.size(); ++w) {
    RoundDriver& d = *rt.drivers[w];
    if (!d.host().crashed) {
      survivors.push_back(&d);
      from_round = std::min(from_round, d.rounds_completed);
    } else if (std::find(rt.excluded.begin(), rt.excluded.end(), w) == rt.excluded.end()) {
      gone.push_back(w);
    }
  }
  // (All rounds done: nothing to go on with; the crash is reported as any.)
  if (survivors.empty() || gone.empty() || from_round >= rt.job->rounds) return;
  for (const std::uint32_t w : gone) {
    rt.excluded.push_back(w);
    rt.excluded_workers.push_back(ExcludedWorker{rt.drivers[w]->host().name, from_round});
  }
  std::vector<std::string> left;
  std::vector<Seq> old_ring_seqs;
  for (RoundDriver* d : survivors) {
    left.push_back(d->host().name);
    old_ring_seqs.push_back(d->endpoint().resume_seq());
  }
  const JobSpec spec = rt.protocol->reformed(rt.job->spec, std::move(left), rt.values_per_packet, old_ring_seqs);
  EndpointJobPlan plan;
  try {
    plan = rt.protocol->plan(network_plan, spec);
  } catch (const PlanError& e) {  // a subset of a plan that worked: not expected
    for (RoundDriver* d : survivors) d->fail(std::string("the job could not re-form: ") + e.what());
    return;
  }
  // The switches: the old plan's entries go (their aggregators freed), the new plan's come.
  const Address group = multicast_group_address(id);
  for (const auto& [name, sw] : rt.plan.switches) {
    rt.earlier_switches.insert(name);
    SwitchNode& node = *switches.at(name);
    std::erase_if(node.setup.jobs, [id](const SwitchSetup::Job& j) { return j.entry.job == id; });
    node.pipeline().remove_job(id);
    node.pipeline().remove_multicast_group(group);
  }
  for (const auto& [name, sw] : plan.switches) {
    SwitchNode& node = *switches.at(name);
    node.setup.jobs.push_back(SwitchSetup::Job{group, sw.multicast_ports, sw.entry});
    node.pipeline().add_multicast_group(group, sw.multicast_ports);
    node.pipeline().install_job(sw.entry);
  }
  // References of the rounds to redo are made again, without the gone workers' values.
  std::erase_if(rt.references, [from_round](const auto& e) { return e.first >= from_round; });
  for (std::size_t k = 0; k < survivors.size(); ++k) {
    RoundDriver& d = *survivors[k];
    d.replace_endpoint(rt.protocol->endpoint(plan.workers[k]));
  }
  rt.plan = std::move(plan);
  for (RoundDriver* d : survivors) d->restart(from_round, now);
}

sim::NodeId SimulatedScenario::node_id(const std::string& name) const { return impl_->node_ids.at(name); }
Address SimulatedScenario::address_of(const std::string& host) const {
  return impl_->network_plan.host_address.at(host);
}
bool SimulatedScenario::jobs_running() const { return any_job_running(impl_->jobs); }
void SimulatedScenario::saw_activity(Time now) { impl_->activity.saw(now); }

void SimulatedScenario::record_series(Duration interval) {
  if (interval <= Duration::zero()) throw std::invalid_argument("record_series: the interval must be positive");
  Impl& s = *impl_;
  s.series_interval = interval;
  s.series.assign(s.jobs.size(), {});
  for (std::size_t j = 0; j < s.jobs.size(); ++j) s.series[j].series.name = s.jobs[j]->job->spec.name;
  s.network.schedule(Time(interval), [&s](Time t) { s.sample_series(t); });
}

// One sample per job: what happened since the last one. Stops once no job runs, so that it
// cannot keep the simulation alive on its own.
void SimulatedScenario::Impl::sample_series(Time now) {
  const double seconds = to_seconds(series_interval);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobRuntime& rt = *jobs[j];
    SeriesState& st = series[j];
    std::uint64_t values = 0, aggregations = 0, ps_packets = 0;  // values: the sums the workers have
    double window = 0;
    for (const auto& d : rt.drivers) {
      values += d->endpoint().counts().result_values;
      window += d->endpoint().window();
    }
    for (const auto& [name, sw] : rt.switch_plans())
      aggregations += switches.at(name)->job_counters(rt.job->spec.id).aggregations;
    for (const HostNode* h : rt.ps_hosts) ps_packets += h->ps.at(rt.job->spec.id).stats().packets_received;
    const double workers = static_cast<double>(std::max<std::size_t>(rt.drivers.size(), 1));
    const double bytes = static_cast<double>(values - st.values) / workers * 4;
    st.series.goodput_gbps.push_back(bytes * 8 / seconds / 1e9);
    st.series.window_packets.push_back(window / workers);
    st.series.switch_aggregations.push_back(aggregations - st.aggregations);
    st.series.ps_packets.push_back(ps_packets - st.ps_packets);
    st.values = values;
    st.aggregations = aggregations;
    st.ps_packets = ps_packets;
  }
  if (any_job_running(jobs)) network.schedule(now + series_interval, [this](Time t) { sample_series(t); });
}

JobResult SimulatedScenario::Impl::job_result(const JobRuntime& rt) const {
  const ScenarioJob& job = *rt.job;
  const JobId id = job.spec.id;
  JobResult r = job_result_for(job);
  r.completed_rounds = job.rounds;
  std::uint64_t hop_pieces = 0;  // Rina: hop sums (or pieces of them) its carriers received
  std::string crash_error, mismatch_error, failure_error, unfinished_error;
  r.excluded_workers = rt.excluded_workers;
  for (std::uint32_t w = 0; w < rt.drivers.size(); ++w) {
    const auto& d = rt.drivers[w];
    // A worker the ring went on without: its counts are in, its rounds and its crash are not.
    const bool excluded = std::find(rt.excluded.begin(), rt.excluded.end(), w) != rt.excluded.end();
    if (!excluded) r.completed_rounds = std::min(r.completed_rounds, d->rounds_completed);
    const EndpointCounts counts = d->endpoint().counts();
    r.retransmissions += counts.retransmissions;
    r.fast_retransmits += counts.fast_retransmits;
    r.requested_resends += counts.requested_resends;
    r.timeouts += counts.timeouts;
    r.final_requests += counts.final_requests;
    hop_pieces += counts.hop_pieces;
    r.wrong_values += d->wrong_values;
    const bool finished = d->rounds_completed == job.rounds;
    // The first reason of each kind; a crash explains the others' failures, so it wins.
    if (excluded) {
      continue;
    } else if (d->host().crashed && !finished) {
      if (crash_error.empty()) {
        std::ostringstream s;
        s << "host '" << d->host().name << "' crashed at " << to_seconds(d->host().crash_time.time_since_epoch())
          << " s (simulated) after " << d->rounds_completed << " of " << job.rounds << " rounds";
        crash_error = s.str();
      }
    } else if (d->mismatch) {
      if (mismatch_error.empty()) mismatch_error = d->error;
    } else if (!d->error.empty()) {
      if (failure_error.empty()) failure_error = d->error;
    } else if (!finished) {
      if (unfinished_error.empty()) {
        std::ostringstream s;
        s << "worker '" << d->host().name << "' did not finish round " << d->rounds_completed
          << " within the time limit of " << to_seconds(scenario.time_limit) << " s (simulated)";
        unfinished_error = s.str();
      }
    }
  }
  for (const std::string* e : {&crash_error, &mismatch_error, &failure_error, &unfinished_error}) {
    if (r.error.empty()) r.error = *e;
  }
  r.correct = r.error.empty() && r.completed_rounds == job.rounds;
  std::set<std::string> used = rt.earlier_switches;
  for (const auto& [name, sw] : rt.plan.switches) used.insert(name);
  for (const std::string& name : used) {
    const SwitchJobCounters c = switches.at(name)->job_counters(id);
    r.switch_aggregations[name] = c.aggregations;
    r.collisions += c.collisions;
    r.table_marks += c.table_marks;
    r.reclaimed_aggregators += c.reclaimed;
  }
  for (const HostNode* h : rt.ps_hosts) r.ps_packets_received += h->ps.at(id).stats().packets_received;
  for (std::uint32_t k = 0; k < r.completed_rounds && k < rt.float_fragments_by_round.size(); ++k) {
    r.float_fragments += rt.float_fragments_by_round[k];
  }
  r.values_per_packet = rt.values_per_packet;
  r.fragments = rt.fragments_per_round() * r.completed_rounds;
  rt.times.report(r, job.warmup_rounds);
  derive_rates(r);
  if (rt.plan.ring_members > 0) {
    // A ring delivers one hop sum per member and fragment at least; of the contributions beyond
    // those, the share its racks' switches absorbed (1: every rack fully aggregated in its ToR).
    const double contributions = static_cast<double>(r.fragments) * static_cast<double>(r.workers);
    const double least = static_cast<double>(r.fragments) * static_cast<double>(rt.plan.ring_members);
    r.in_network_share =
        contributions > least
            ? std::clamp((contributions - static_cast<double>(hop_pieces)) / (contributions - least), 0.0, 1.0)
            : 0.0;
  }
  return r;
}

ScenarioResult SimulatedScenario::run(const std::string& backend) {
  Impl& s = *impl_;
  s.network.run_until(Time(s.scenario.time_limit));
  ScenarioResult result;
  result.backend = backend;
  result.simulated_seconds = to_seconds(s.activity.last.time_since_epoch());
  result.events = s.network.events_processed();

  for (std::size_t j = 0; j < s.scenario.jobs.size(); ++j) {
    const auto rt = std::find_if(s.jobs.begin(), s.jobs.end(), [j](const auto& r) { return r->file_index == j; });
    if (rt != s.jobs.end()) {
      result.jobs.push_back(s.job_result(**rt));
      continue;
    }
    result.jobs.push_back(job_result_for(s.scenario.jobs[j]));
  }
  // A job that neither finished nor failed ran into the time limit.
  for (const auto& rt : s.jobs) {
    for (const auto& d : rt->drivers) {
      if (d->rounds_completed < rt->job->rounds && !d->stopped && !d->host().crashed && !d->mismatch &&
          d->error.empty()) {
        result.time_limit_reached = true;
      }
    }
  }

  for (const Channel& ch : s.channels) {
    const sim::ChannelCounters c = s.network.channel_counters(ch.id);
    result.links.push_back(
        LinkResult{ch.from, ch.to, c.packets, c.bytes, c.lost, c.queue_drops, c.ecn_marked, c.duplicated});
  }
  for (const auto& [name, host] : s.hosts) {
    result.host_dropped_packets += host->dropped;
    for (const NoiseSender& n : host->noise) result.noise_packets += n.sent();
  }
  for (const auto& [name, node] : s.switches) {
    const SwitchCounters c = node->counters();
    result.rejected_packets += c.malformed + c.unknown_job + c.not_admitted;
    result.noise_packets_received += node->noise_received;
  }
  if (s.series_interval > Duration::zero()) {
    result.series_interval_s = to_seconds(s.series_interval);
    for (const Impl::SeriesState& st : s.series) result.series.push_back(st.series);
  }

  // Leak check: move every switch's clock past its reclaim timeout and sweep. Whatever is still
  // held then would stay held forever. The run is over: partial sums the sweep sends go nowhere.
  struct Nowhere final : PortSink {
    void send(PortId, std::span<const std::uint8_t>) override {}
  } nowhere;
  for (const auto& [name, node] : s.switches) {
    // (A switch with reclaim disabled, timeout <= 0, keeps what it holds: that is a leak too.)
    SwitchPipeline& pipeline = node->pipeline();
    const Duration timeout = std::max(pipeline.config().reclaim_timeout, Duration::zero());
    const Time sweep = s.activity.last + timeout + std::chrono::microseconds(1);
    pipeline.on_timeout(sweep, nowhere);
    result.leaked_aggregators += pipeline.table().in_use();
  }
  return result;
}

namespace {

class InprocBackend final : public Backend {
 public:
  std::string_view name() const override { return "inproc"; }
  std::string_view summary() const override {
    return "the in-process simulated network: ATP's protocol only, simulated time, deterministic";
  }
  bool simulated() const override { return true; }
  AlgorithmSupport algorithm_support() const override { return {.where = "the in-process network"}; }

  std::string cannot_run(const Scenario& scenario, const RunOptions&) const override {
    if (std::string why = cannot_run_algorithms(scenario, algorithm_support()); !why.empty()) return why;
    if (!scenario.background.empty()) {
      return "background: background TCP flows need a TCP stack; use --backend ns3 or netns";
    }
    return simulated_cannot_run(scenario, "the in-process network");
  }

  ScenarioResult run(const Scenario& scenario, const RunOptions& options) const override {
    if (const std::string why = cannot_run(scenario, options); !why.empty()) throw ScenarioError(why);
    // A scenario built in code has not met the parser's check: refuse it before allocating.
    check_scenario_memory(scenario, physical_memory_bytes());
    inproc::Network network(scenario.seed, scenario.mtu_bytes);
    SimulatedScenario run(scenario, network);
    if (options.series_interval > Duration::zero()) run.record_series(options.series_interval);
    return run.run("inproc");
  }
};

}  // namespace

const Backend& inproc_backend() {
  static const InprocBackend backend;
  return backend;
}

ScenarioResult run_inproc(const Scenario& scenario, const RunOptions& options) {
  return inproc_backend().run(scenario, options);
}

std::string simulated_cannot_run(const Scenario& scenario, const std::string& network) {
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const JobSpec& spec = scenario.jobs[j].spec;
    for (const std::string& p : spec.ps) {
      // Simulated hosts have no kernel to loop a PS's multicast back to a worker on the same
      // host (the switch never sends a packet back out of its ingress port).
      if (std::find(spec.workers.begin(), spec.workers.end(), p) != spec.workers.end()) {
        return "jobs[" + std::to_string(j) + "].ps: host '" + p + "' is also a worker; " + network +
               " cannot run PS shards on workers' hosts (N-to-N): use --backend netns";
      }
    }
  }
  return "";
}

}  // namespace atp
