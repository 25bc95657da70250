// The scenario runner over a simulated network: builds the nodes (nodes.h) and round drivers
// (rounds.h) of a scenario, applies its fault timeline, re-forms jobs, samples series and reports
// (atp/backends/simulated.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "atp/backends/simulated.h"
#include "atp/cluster/protocols.h"
#include "atp/io/machine.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"
#include "atp/scenario/timeline.h"
#include "atp/sim/inproc_network.h"
#include "nodes.h"
#include "rounds.h"

namespace atp {
namespace {

using simulated::Activity;
using simulated::any_job_running;
using simulated::crash_host;
using simulated::HostNode;
using simulated::JobRuntime;
using simulated::NodeId;
using simulated::NoiseSender;
using simulated::RoundDriver;
using simulated::SwitchNode;
using simulated::SwitchSetup;
using simulated::to_seconds;

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

struct SimulatedScenario::Impl {
  Impl(const Scenario& s, sim::Network& n) : scenario(s), network(n) {}

  void build();
  // The steps of build(), in its order.
  void plan_jobs();
  void add_nodes();
  void connect_links();
  void install_switches();
  void schedule_faults();
  void add_endpoints();
  void add_noise();
  void apply(const TimedFault& fault, Time now);
  bool changes_at(const Channel& ch, Duration t) const;
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
  plan_jobs();
  add_nodes();
  connect_links();
  install_switches();
  schedule_faults();
  add_endpoints();
  add_noise();
  for (const auto& [name, id] : node_ids) network.wake(id);
}

void SimulatedScenario::Impl::plan_jobs() {
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
}

void SimulatedScenario::Impl::add_nodes() {
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
  }
}

void SimulatedScenario::Impl::connect_links() {
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
}

void SimulatedScenario::Impl::install_switches() {
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
}

void SimulatedScenario::Impl::schedule_faults() {
  // The fault timeline as this network's events: one per host crash and switch restart's start and
  // end, one per link direction whose settings change at a fault window's edge. Background flows
  // are ns-3's TCP applications' (tcp_apps.h), which start and stop them at their times in this
  // timeline too; inproc has none.
  for (const TimedFault& fault : fault_timeline(scenario)) {
    if (fault.kind == TimedFault::Kind::kLinkSettings) {
      for (const Channel& ch : channels) {
        if (!changes_at(ch, fault.at)) continue;
        network.schedule(Time(fault.at), [this, &ch](Time t) {
          network.set_channel_config(ch.id, channel_settings(scenario, ch.faults, ch.from_host, t));
        });
      }
    } else if (fault.kind != TimedFault::Kind::kFlowStart && fault.kind != TimedFault::Kind::kFlowStop) {
      network.schedule(Time(fault.at), [this, fault](Time t) { apply(fault, t); });
    }
  }
}

void SimulatedScenario::Impl::add_endpoints() {
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
}

void SimulatedScenario::Impl::add_noise() {
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
}

// A host crash or a switch restart's start or end of the fault timeline, at its time.
void SimulatedScenario::Impl::apply(const TimedFault& fault, Time now) {
  switch (fault.kind) {
    case TimedFault::Kind::kHostCrash: {
      const std::string& host = scenario.crashes[fault.index].host;
      crash_host(*hosts.at(host), now, network, node_ids.at(host));
      break;
    }
    case TimedFault::Kind::kSwitchDown: {
      const SwitchRestart& restart = scenario.restarts[fault.index];
      switches.at(restart.switch_name)->restart(now, restart.down);
      break;
    }
    case TimedFault::Kind::kSwitchUp:
      switches.at(scenario.restarts[fault.index].switch_name)->come_back(now);
      break;
    case TimedFault::Kind::kLinkSettings:  // per link direction (changes_at), scheduled apart
    case TimedFault::Kind::kFlowStart:
    case TimedFault::Kind::kFlowStop:
      break;
  }
}

// Whether a fault on link direction `ch` has a window that opens or closes at `t`.
bool SimulatedScenario::Impl::changes_at(const Channel& ch, Duration t) const {
  return std::any_of(ch.faults.begin(), ch.faults.end(), [&](std::size_t f) {
    const LinkFault& link = scenario.link_faults[f];
    return (link.from > Duration::zero() && link.from == t) || (link.until && *link.until == t);
  });
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
      values += d->counts().result_values;
      window += d->endpoint().window();
    }
    for (const std::string& name : rt.used_switches())
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
    const EndpointCounts counts = d->counts();
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
  for (const std::string& name : rt.used_switches()) {
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
