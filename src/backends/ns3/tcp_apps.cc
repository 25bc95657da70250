// Host collectives' ranks (ring, halving-doubling) and background flows as ns-3 TCP applications
// (tcp_apps.h).
#include "tcp_apps.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <vector>

// Single headers, not *-module.h (see ns3_network.cc).
#include <ns3/inet-socket-address.h>
#include <ns3/nstime.h>
#include <ns3/packet.h>
#include <ns3/simulator.h>
#include <ns3/socket.h>
#include <ns3/string.h>
#include <ns3/tcp-bbr.h>
#include <ns3/tcp-cubic.h>
#include <ns3/tcp-linux-reno.h>
#include <ns3/tcp-socket-base.h>
#include <ns3/tcp-socket-factory.h>
#include <ns3/tcp-socket-state.h>
#include <ns3/uinteger.h>

#include "atp/plink/aggregation.h"
#include "atp/plink/autotune.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/timeline.h"
#include "atp/schedule/executor.h"
#include "tcp_timers.h"

namespace atp::ns3adapter {
namespace {

// Listening ports: a host collective's is kCollectivePortBase + its job id, a background flow's
// kFlowPortBase + its index, while those stay below the next base (ids below 10000, indices below
// 15536); any other takes the next free port from kSparePortBase up, below both ranges (and below
// ns-3's ephemeral ports, 49152 up). So no two listeners share a port and none overflows 16 bits,
// and the ports (so the traces) of the usual scenarios stay what they always were.
constexpr std::uint32_t kCollectivePortBase = 40000;
constexpr std::uint32_t kFlowPortBase = 50000;
constexpr std::uint32_t kPortEnd = 65536;
constexpr std::uint32_t kSparePortBase = 1024;  // up to kCollectivePortBase
// An offset that no base has room for: listening_port() then gives a spare port (extra lanes).
constexpr std::uint64_t kNoOffset = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint32_t kMaxSend = 64 << 10;  // bytes per Send() call
// Goodput samples of background flows when no series interval is given.
constexpr Duration kDefaultFlowInterval = std::chrono::milliseconds(1);

Time now() { return time_from_ns(ns3::Simulator::Now().GetNanoSeconds()); }
double seconds_of(Duration d) { return static_cast<double>(d.count()) / 1e9; }

// Sends up to `limit` more bytes on `socket` as far as its buffer allows. Returns bytes sent.
std::uint64_t fill(ns3::Ptr<ns3::Socket> socket, std::uint64_t limit) {
  std::uint64_t sent = 0;
  while (sent < limit) {
    const auto n = static_cast<std::uint32_t>(
        std::min<std::uint64_t>({limit - sent, socket->GetTxAvailable(), std::uint64_t{kMaxSend}}));
    if (n == 0) break;
    const int r = socket->Send(ns3::Create<ns3::Packet>(n));
    if (r <= 0) break;
    sent += static_cast<std::uint64_t>(r);
  }
  return sent;
}

// One rank of a host collective: its connections (one per channel it sends on, which it opened;
// one per channel it receives on, which it accepted; a channel is a peer and a lane, schedule.h),
// its buffer and this round's executor.
struct CollectiveRank {
  ns3::Ptr<ns3::Node> node;
  std::vector<ns3::Ptr<ns3::Socket>> listeners;   // one per lane, on the job's port for it
  std::map<int, ns3::Ptr<ns3::Socket>> to, from;  // by channel
  std::set<int> connected;                        // channels whose `to` connection is up
  Schedule schedule;                              // for the job's element count
  std::vector<int> channels;                      // the schedule's, ascending
  std::vector<float> buffer;
  std::unique_ptr<ScheduleExecutor> executor;  // this round's, while it runs
  // Algorithm::timed_calls (probe): this round's calls, the one running, when it started, and the
  // times of every call so far ([round][call], seconds). An allreduce runs `schedule` instead.
  std::vector<Schedule> calls;
  std::size_t call = 0;
  Time call_start{};
  std::vector<std::vector<double>> call_seconds;
  // Autotune: each connection it opened (by channel) as TCP sees it (PLink reads the same from the OS): its
  // window and smoothed round trip, and this round's samples of their ratio, the rate TCP allows.
  struct Sending {
    double window_bytes = 0, round_trip_s = 0;
    double rate_sum = 0;  // bytes per second
    std::uint64_t samples = 0;
  };
  std::map<int, Sending> sending;
  // Its connections' retransmission timeouts and fast recoveries (ns-3's congestion states entered:
  // CA_LOSS, CA_RECOVERY), as a job's timeouts and fast_retransmits are counted.
  std::uint64_t timeouts = 0, recoveries = 0;
  std::uint32_t rounds_done = 0;
  bool running = false;  // inside a round
  bool failed = false;   // a connection failed
  std::string error;     // a wrong result, or a connection from a host that is no rank of the job
};

// A host collective (ring, halving-doubling): its schedule run by the executor over ns-3's TCP with
// real values, checked every round as the worker processes check theirs.
struct CollectiveJob {
  const ScenarioJob* job = nullptr;
  std::size_t file_index = 0;
  std::vector<CollectiveRank> ranks;
  std::map<Address, int> rank_of;  // a rank's host address -> the rank
  // The answer of each round some rank is in, made once for the job, and how many ranks checked
  // their result against it: dropped once all have.
  std::map<std::uint32_t, std::pair<scenario_inputs::RoundReference, std::size_t>> references;
  std::uint64_t wrong_values = 0;
  RoundTimes times;
  // PLink's Autotune (autotune: true): the groups, master shares and D(i, j) of the running plan,
  // the loop, the ranks done with the running round (all wait for the last, which replans), and
  // when the round started.
  std::optional<plink::Autotune> autotune;
  RankGroups groups;
  plink::MasterShares shares;
  Eigen::MatrixXd bytes;
  std::size_t ranks_done = 0;
  Time round_start{};
  std::uint32_t replans = 0;
};

struct Flow {
  const BackgroundFlow* spec = nullptr;
  ns3::Ptr<ns3::Socket> sender, listener;
  std::uint16_t port = 0;  // the listener's
  bool started = false, stopped = false;
  std::uint64_t received = 0, sampled = 0;  // bytes
  std::optional<Time> first_byte, last_byte;
  std::vector<double> goodput_mbps;
};

}  // namespace

struct TcpApps::Impl {
  Impl(const Scenario& s, Ns3Network& n, SimulatedScenario& r)
      : scenario(s), network(n), run(r), timers(tcp_timers(s)) {}

  ns3::Ptr<ns3::Socket> tcp_socket(const ns3::Ptr<ns3::Node>& node) const {
    ns3::Ptr<ns3::Socket> s = ns3::Socket::CreateSocket(node, ns3::TcpSocketFactory::GetTypeId());
    use_timers(s, timers);
    return s;
  }

  bool jobs_running() const {
    if (run.jobs_running()) return true;
    for (const CollectiveJob& j : collectives) {
      for (const CollectiveRank& r : j.ranks) {
        if (!r.failed && r.error.empty() && r.rounds_done < j.job->rounds) return true;
      }
    }
    return false;
  }

  // --- host collectives

  void start_round(CollectiveJob& job, std::size_t i) {
    CollectiveRank& r = job.ranks[i];
    if (r.failed) return;
    const ScenarioJob& spec = *job.job;
    const std::uint32_t round = r.rounds_done;
    if (spec.algorithm->timed_calls != nullptr) {
      r.calls =
          spec.algorithm->timed_calls(static_cast<int>(i), static_cast<int>(job.ranks.size()), spec.elements, round);
      r.call = 0;
      r.call_start = now();
      r.call_seconds.emplace_back();
      r.executor = std::make_unique<ScheduleExecutor>(r.calls[0], r.buffer);
    } else {
      scenario_inputs::generate_input(scenario_inputs::input_seed(scenario.seed, spec.spec.id, i, round),
                                      spec.magnitude, r.buffer);
      if (const auto [it, fresh] = job.references.try_emplace(round); fresh) {
        scenario_inputs::make_reference(scenario.seed, spec.spec.id, job.ranks.size(), round, spec.elements,
                                        spec.magnitude, spec.spec.scale, 0, it->second.first);
      }
      r.executor = std::make_unique<ScheduleExecutor>(r.schedule, r.buffer);
    }
    r.running = true;
    job.times.started(now());
    pump(job, i);
  }

  // Moves what the executor allows on every connection of rank i (a receive may unlock sends, a
  // send a receive), until nothing moves; then checks whether its round is complete.
  void pump(CollectiveJob& job, std::size_t i) {
    CollectiveRank& r = job.ranks[i];
    if (!r.running) return;
    const auto try_send = [&r](int channel, std::span<const std::byte> out) -> std::size_t {
      const auto it = r.to.find(channel);
      if (it == r.to.end() || !r.connected.contains(channel)) return 0;
      const ns3::Ptr<ns3::Socket>& socket = it->second;
      const auto n = static_cast<std::uint32_t>(
          std::min<std::uint64_t>({out.size(), socket->GetTxAvailable(), std::uint64_t{kMaxSend}}));
      if (n == 0) return 0;
      const int k = socket->Send(reinterpret_cast<const std::uint8_t*>(out.data()), n, 0);
      return k <= 0 ? 0 : static_cast<std::size_t>(k);
    };
    const auto try_receive = [&r](int channel, std::span<std::byte> into) -> std::size_t {
      const auto it = r.from.find(channel);
      if (it == r.from.end() || it->second->GetRxAvailable() == 0) return 0;
      const ns3::Ptr<ns3::Packet> p = it->second->Recv(static_cast<std::uint32_t>(into.size()), 0);
      if (!p || p->GetSize() == 0) return 0;
      return p->CopyData(reinterpret_cast<std::uint8_t*>(into.data()), p->GetSize());
    };
    move_bytes(*r.executor, r.channels, try_send, try_receive);
    if (!r.executor->done()) return;
    run.saw_activity(now());
    if (!r.calls.empty()) {
      // A timed call is done: its time, and the next call (a round of calls ends with its last).
      r.call_seconds.back().push_back(seconds_of(now() - r.call_start));
      if (++r.call < r.calls.size()) {
        r.call_start = now();
        r.executor = std::make_unique<ScheduleExecutor>(r.calls[r.call], r.buffer);
        pump(job, i);
        return;
      }
      r.calls.clear();
      r.running = false;
      r.executor.reset();
      finish_round(job, i);
      return;
    }
    r.running = false;
    r.executor.reset();
    const std::uint32_t round = r.rounds_done;
    auto ref = job.references.find(round);
    // The float32 sum in the schedule's order, held to the float path's rounding bound.
    const std::string wrong =
        scenario_inputs::check_result(ref->second.first, r.buffer, {}, 0, nullptr, true, &job.wrong_values);
    if (++ref->second.second == job.ranks.size()) job.references.erase(ref);
    if (!wrong.empty()) {
      r.error = "round " + std::to_string(round) + ": " + wrong;
      return;
    }
    finish_round(job, i);
  }

  // Rank i completed its round: counted, and the next one started after the compute time.
  void finish_round(CollectiveJob& job, std::size_t i) {
    CollectiveRank& r = job.ranks[i];
    job.times.completed(r.rounds_done++, now());
    if (job.autotune) {
      if (++job.ranks_done == job.ranks.size()) replan(job);
      return;
    }
    if (r.rounds_done < job.job->rounds) {
      ns3::Simulator::Schedule(to_ns3(job.job->compute_time), [this, &job, i] { start_round(job, i); });
    }
  }

  // Autotune between rounds, once every rank is done with one (PLink's central daemon, which sees
  // every connection): each ordered pair's bytes in the plan, its connections' mean rates over the
  // round (window / round trip at each change of either) summed over its lanes and their longest
  // round trip, and the round's time;
  // the next round starts on every rank together, with the plan the loop gives.
  void replan(CollectiveJob& job) {
    const std::size_t n = job.ranks.size();
    const auto e = static_cast<Eigen::Index>(n);
    plink::LinkMeasurements m{job.bytes, Eigen::MatrixXd::Zero(e, e), Eigen::MatrixXd::Zero(e, e)};
    for (std::size_t j = 0; j < n; ++j) {
      for (auto& [channel, c] : job.ranks[j].sending) {
        const auto at =
            std::pair{static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(channel % static_cast<int>(n))};
        if (c.samples > 0) m.bytes_per_second(at.first, at.second) += c.rate_sum / static_cast<double>(c.samples);
        m.round_trip_s(at.first, at.second) = std::max(m.round_trip_s(at.first, at.second), c.round_trip_s);
        c.rate_sum = 0;
        c.samples = 0;
      }
    }
    if (const auto next = job.autotune->after_iteration(seconds_of(now() - job.round_start), job.shares, m)) {
      job.shares = *next;
      job.bytes = plink::plan_bytes(job.groups, job.shares, job.job->elements);
      ++job.replans;
      for (std::size_t j = 0; j < n; ++j) {
        job.ranks[j].schedule =
            plink::two_level_schedule(static_cast<int>(j), static_cast<int>(n), job.job->elements, job.groups,
                                      job.shares, plink::kDefaultChunkElements, job.job->connections);
      }
    }
    job.ranks_done = 0;
    if (job.ranks.front().rounds_done >= job.job->rounds) return;
    job.round_start = now() + job.job->compute_time;
    for (std::size_t j = 0; j < n; ++j) {
      ns3::Simulator::Schedule(to_ns3(job.job->compute_time), [this, &job, j] { start_round(job, j); });
    }
  }

  // Keeps `c` up to date with the socket's congestion window and smoothed round trip (ns-3's trace
  // sources), sampling their ratio at each change while the window has data in flight.
  static void watch_connection(const ns3::Ptr<ns3::Socket>& s, CollectiveRank::Sending& c) {
    const auto sample = [&c] {
      if (c.round_trip_s > 0 && c.window_bytes > 0) {
        c.rate_sum += c.window_bytes / c.round_trip_s;
        ++c.samples;
      }
    };
    s->TraceConnectWithoutContext("CongestionWindow", ns3::Callback<void, std::uint32_t, std::uint32_t>(
                                                          [&c, sample](std::uint32_t, std::uint32_t w) {
                                                            c.window_bytes = w;
                                                            sample();
                                                          }));
    s->TraceConnectWithoutContext("RTT",
                                  ns3::Callback<void, ns3::Time, ns3::Time>([&c, sample](ns3::Time, ns3::Time t) {
                                    c.round_trip_s = t.GetSeconds();
                                    sample();
                                  }));
  }

  static void count_losses(const ns3::Ptr<ns3::Socket>& s, CollectiveRank& r) {
    using State = ns3::TcpSocketState::TcpCongState_t;
    s->TraceConnectWithoutContext("CongState", ns3::Callback<void, State, State>([&r](State, State entered) {
                                    if (entered == ns3::TcpSocketState::CA_LOSS) ++r.timeouts;
                                    if (entered == ns3::TcpSocketState::CA_RECOVERY) ++r.recoveries;
                                  }));
  }

  void install_collective(const ScenarioJob& spec, std::size_t file_index) {
    CollectiveJob& job = collectives.emplace_back();
    job.job = &spec;
    job.file_index = file_index;
    const std::size_t n = spec.spec.workers.size();
    job.ranks.resize(n);
    const RankGroups racks = job_groups(scenario, spec);
    if (spec.autotune) {
      job.groups = racks;
      job.shares = plink::equal_shares(static_cast<int>(n));
      job.bytes = plink::plan_bytes(job.groups, job.shares, spec.elements);
      job.autotune.emplace(job.groups,
                           (spec.elements + plink::kDefaultChunkElements - 1) / plink::kDefaultChunkElements);
      job.round_start = Time(spec.start_time);
    }
    // A port per lane: the job's own for lane 0 (kCollectivePortBase), spare ones for the others,
    // so that an accepted connection's lane is the port it came in on and its peer the host.
    std::vector<std::uint16_t> ports;
    for (int lane = 0; lane < spec.connections; ++lane)
      ports.push_back(listening_port(kCollectivePortBase, lane == 0 ? spec.spec.id : kNoOffset,
                                     "jobs[" + std::to_string(file_index) + "]"));
    for (std::size_t i = 0; i < n; ++i) {
      CollectiveRank& r = job.ranks[i];
      r.node = network.ns3_node(run.node_id(spec.spec.workers[i]));
      r.schedule =
          spec.algorithm->schedule(static_cast<int>(i), static_cast<int>(n), spec.elements, racks, spec.connections);
      r.channels = schedule_channels(r.schedule);
      r.buffer.resize(spec.elements);
      job.rank_of[run.address_of(spec.spec.workers[i])] = static_cast<int>(i);
      if (n == 1) continue;
      listen(job, i, ports);
    }
    for (std::size_t i = 0; i < n && n > 1; ++i) connect(job, i, ports);
    for (std::size_t i = 0; i < n; ++i) {
      ns3::Simulator::Schedule(to_ns3(spec.start_time), [this, &job, i] { start_round(job, i); });
    }
  }

  // Rank i's listeners, a port per lane: an accepted connection's lane is the port it came in on
  // and its peer the host.
  void listen(CollectiveJob& job, std::size_t i, const std::vector<std::uint16_t>& ports) {
    CollectiveRank& r = job.ranks[i];
    const ScenarioJob& spec = *job.job;
    for (int lane = 0; lane < spec.connections; ++lane) {
      ns3::Ptr<ns3::Socket> listener = r.listeners.emplace_back(tcp_socket(r.node));
      listener->Bind(ns3::InetSocketAddress(ns3::Ipv4Address::GetAny(), ports[static_cast<std::size_t>(lane)]));
      listener->Listen();
      listener->SetAcceptCallback(
          ns3::MakeNullCallback<bool, ns3::Ptr<ns3::Socket>, const ns3::Address&>(),
          ns3::Callback<void, ns3::Ptr<ns3::Socket>, const ns3::Address&>(
              [this, &job, i, lane](ns3::Ptr<ns3::Socket> s, const ns3::Address& from) {
                use_timers(s, timers);  // as the listener's, said again rather than relied on through ns-3's Fork
                const ns3::Ipv4Address ip = ns3::InetSocketAddress::ConvertFrom(from).GetIpv4();
                const auto peer = job.rank_of.find(ip.Get());
                if (peer == job.rank_of.end()) {
                  // Not thrown: an exception must not unwind through ns-3's callbacks. Recorded
                  // instead, and reported as this rank's error.
                  std::ostringstream what;
                  what << "accepted a connection from " << ip << ", which is no host of this job";
                  if (job.ranks[i].error.empty()) job.ranks[i].error = what.str();
                  s->Close();
                  return;
                }
                job.ranks[i].from[channel(job.ranks[i].schedule, peer->second, lane)] = s;
                s->SetRecvCallback(ns3::Callback<void, ns3::Ptr<ns3::Socket>>([this, &job, i](ns3::Ptr<ns3::Socket>) {
                  run.saw_activity(now());
                  pump(job, i);
                }));
              }));
    }
  }

  // Rank i's connections to the peers it sends to, one per channel.
  void connect(CollectiveJob& job, std::size_t i, const std::vector<std::uint16_t>& ports) {
    CollectiveRank& r = job.ranks[i];
    const ScenarioJob& spec = *job.job;
    for (const ScheduleStep& step : r.schedule.steps) {
      const int c = channel(r.schedule, step.peer, step.lane);
      if (step.kind != StepKind::kSend || r.to.contains(c)) continue;
      ns3::Ptr<ns3::Socket> s = tcp_socket(r.node);
      s->Bind();
      s->SetConnectCallback(
          ns3::Callback<void, ns3::Ptr<ns3::Socket>>([this, &job, i, c](ns3::Ptr<ns3::Socket>) {
            job.ranks[i].connected.insert(c);
            pump(job, i);
          }),
          ns3::Callback<void, ns3::Ptr<ns3::Socket>>([&job, i](ns3::Ptr<ns3::Socket>) { job.ranks[i].failed = true; }));
      s->SetSendCallback(ns3::Callback<void, ns3::Ptr<ns3::Socket>, std::uint32_t>(
          [this, &job, i](ns3::Ptr<ns3::Socket>, std::uint32_t) { pump(job, i); }));
      const Address to = run.address_of(spec.spec.workers[static_cast<std::size_t>(step.peer)]);
      if (spec.autotune) watch_connection(s, job.ranks[i].sending[c]);
      count_losses(s, job.ranks[i]);
      s->Connect(ns3::InetSocketAddress(ns3::Ipv4Address(to), ports[static_cast<std::size_t>(step.lane)]));
      r.to[c] = s;
    }
  }

  JobResult collective_result(const CollectiveJob& job) const {
    JobResult r = job_result_for(*job.job);
    r.completed_rounds = job.job->rounds;
    r.wrong_values = job.wrong_values;
    for (std::size_t i = 0; i < job.ranks.size(); ++i) {
      const CollectiveRank& rank = job.ranks[i];
      r.completed_rounds = std::min(r.completed_rounds, rank.rounds_done);
      r.timeouts += rank.timeouts;
      r.fast_retransmits += rank.recoveries;
      // The first rank's error is the job's; a rank's own error (a stray connection) even if it finished.
      if (!r.error.empty() || (rank.rounds_done == job.job->rounds && rank.error.empty())) continue;
      std::ostringstream s;
      s << job.job->algorithm->name << " rank " << i << " ('" << job.job->spec.workers[i] << "') "
        << (!rank.error.empty() ? rank.error
            : rank.failed       ? "could not connect to a peer"
                          : "did not finish round " + std::to_string(rank.rounds_done) + " within the time limit of " +
                                std::to_string(seconds_of(scenario.time_limit)) + " s (simulated)");
      r.error = s.str();
    }
    r.correct = r.error.empty();
    if (job.job->algorithm->timed_calls != nullptr) {
      for (const CollectiveRank& rank : job.ranks) r.call_seconds.push_back(rank.call_seconds);
    }
    r.replans = job.replans;
    job.times.report(r, job.job->warmup_rounds);
    derive_rates(r);
    return r;
  }

  // The listening port for `offset` above `base` (see kCollectivePortBase), marked used. Throws
  // ScenarioError naming `what` once the spare ports are used up too.
  std::uint16_t listening_port(std::uint32_t base, std::uint64_t offset, const std::string& what) {
    const std::uint32_t end = base == kCollectivePortBase ? kFlowPortBase : kPortEnd;
    if (offset < end - base && used_ports.insert(static_cast<std::uint16_t>(base + offset)).second)
      return static_cast<std::uint16_t>(base + offset);
    while (next_spare_port < kCollectivePortBase) {
      const auto port = static_cast<std::uint16_t>(next_spare_port++);
      if (used_ports.insert(port).second) return port;
    }
    throw ScenarioError(what +
                        ": no TCP port is left to listen on; the scenario has more host collectives and "
                        "background flows than ns3 has ports for");
  }

  // --- background flows

  void install_flow(const BackgroundFlow& spec, std::size_t index) {
    Flow& f = flows.emplace_back();
    f.spec = &spec;
    const std::uint16_t port = listening_port(kFlowPortBase, index, "background[" + std::to_string(index) + "]");
    f.port = port;
    f.listener = tcp_socket(network.ns3_node(run.node_id(spec.to)));
    f.listener->Bind(ns3::InetSocketAddress(ns3::Ipv4Address::GetAny(), port));
    f.listener->Listen();
    f.listener->SetAcceptCallback(
        ns3::MakeNullCallback<bool, ns3::Ptr<ns3::Socket>, const ns3::Address&>(),
        ns3::Callback<void, ns3::Ptr<ns3::Socket>, const ns3::Address&>(
            [this, &f](ns3::Ptr<ns3::Socket> s, const ns3::Address&) {
              use_timers(s, timers);
              s->SetRecvCallback(ns3::Callback<void, ns3::Ptr<ns3::Socket>>([this, &f](ns3::Ptr<ns3::Socket> s2) {
                while (ns3::Ptr<ns3::Packet> p = s2->Recv()) f.received += p->GetSize();
                const Time t = now();
                if (!f.first_byte) f.first_byte = t;
                f.last_byte = t;
                run.saw_activity(t);
              }));
            }));
  }

  // The flow starts at its time in the fault timeline, unless no job runs any more (nothing to
  // compete with).
  void start_flow(Flow& f) {
    if (!jobs_running()) return;
    const Address to = run.address_of(f.spec->to);
    f.started = true;
    f.sender = tcp_socket(network.ns3_node(run.node_id(f.spec->from)));
    // The flow's own TCP (BackgroundFlow): ns-3's counterparts of Linux's cubic, reno and bbr.
    const std::string& cc = f.spec->congestion;
    ns3::Ptr<ns3::TcpCongestionOps> ops;
    if (cc == "reno") {
      ops = ns3::CreateObject<ns3::TcpLinuxReno>();
    } else if (cc == "bbr") {
      ops = ns3::CreateObject<ns3::TcpBbr>();
    } else {
      ops = ns3::CreateObject<ns3::TcpCubic>();
    }
    ns3::DynamicCast<ns3::TcpSocketBase>(f.sender)->SetCongestionControlAlgorithm(ops);
    f.sender->SetAttribute("UseEcn", ns3::StringValue(f.spec->ecn ? "On" : "Off"));
    f.sender->Bind();
    f.sender->SetSendCallback(
        ns3::Callback<void, ns3::Ptr<ns3::Socket>, std::uint32_t>([&f](ns3::Ptr<ns3::Socket> s, std::uint32_t) {
          if (!f.stopped) fill(s, ~std::uint64_t{0});
        }));
    f.sender->Connect(ns3::InetSocketAddress(ns3::Ipv4Address(to), f.port));
    sample_flow(f);
  }

  static void stop_flow(Flow& f) {
    if (f.stopped || !f.started) return;
    f.stopped = true;
    f.sender->Close();
  }

  // One goodput sample per interval from the flow's start; stops the flow once no job runs.
  void sample_flow(Flow& f) {
    ns3::Simulator::Schedule(to_ns3(interval), [this, &f] {
      f.goodput_mbps.push_back(static_cast<double>(f.received - f.sampled) * 8 / seconds_of(interval) / 1e6);
      f.sampled = f.received;
      if (!jobs_running()) stop_flow(f);
      if (!f.stopped) sample_flow(f);
    });
  }

  FlowResult flow_result(const Flow& f) const {
    FlowResult r;
    r.from = f.spec->from;
    r.to = f.spec->to;
    r.start_seconds = seconds_of(f.spec->start);
    r.bytes = f.received;
    if (f.first_byte && f.last_byte) r.seconds = seconds_of(*f.last_byte - *f.first_byte);
    if (r.seconds > 0) r.goodput_gbps = static_cast<double>(r.bytes) * 8 / r.seconds / 1e9;
    r.interval_s = seconds_of(interval);
    r.goodput_mbps = f.goodput_mbps;
    return r;
  }

  const Scenario& scenario;
  Ns3Network& network;
  SimulatedScenario& run;
  const TcpTimers timers;  // every TCP socket's
  Duration interval = kDefaultFlowInterval;
  std::vector<CollectiveJob> collectives;  // reserved up front: callbacks hold references
  std::vector<Flow> flows;                 // likewise
  std::set<std::uint16_t> used_ports;      // the listeners' (listening_port)
  std::uint32_t next_spare_port = kSparePortBase;
};

TcpApps::TcpApps(const Scenario& scenario, Ns3Network& network, SimulatedScenario& run, Duration series_interval)
    : impl_(std::make_unique<Impl>(scenario, network, run)) {
  Impl& s = *impl_;
  if (series_interval > Duration::zero()) s.interval = series_interval;
  s.collectives.reserve(scenario.jobs.size());
  s.flows.reserve(scenario.background.size());
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    if (scenario.jobs[j].algorithm->schedule != nullptr) s.install_collective(scenario.jobs[j], j);
  }
  for (std::size_t i = 0; i < scenario.background.size(); ++i) s.install_flow(scenario.background[i], i);
  // Flows start and stop at their times in the fault timeline, as on every backend.
  for (const TimedFault& fault : fault_timeline(scenario)) {
    if (fault.kind == TimedFault::Kind::kFlowStart) {
      ns3::Simulator::Schedule(to_ns3(fault.at), [&s, &f = s.flows[fault.index]] { s.start_flow(f); });
    } else if (fault.kind == TimedFault::Kind::kFlowStop) {
      ns3::Simulator::Schedule(to_ns3(fault.at), [&f = s.flows[fault.index]] { Impl::stop_flow(f); });
    }
  }
}

TcpApps::~TcpApps() = default;

void TcpApps::report(ScenarioResult& result) const {
  for (const CollectiveJob& job : impl_->collectives) {
    result.jobs.at(job.file_index) = impl_->collective_result(job);
    if (!result.jobs[job.file_index].correct) {
      const bool failed = std::any_of(job.ranks.begin(), job.ranks.end(),
                                      [](const CollectiveRank& r) { return r.failed || !r.error.empty(); });
      if (!failed) result.time_limit_reached = true;
    }
  }
  for (const Flow& f : impl_->flows) result.flows.push_back(impl_->flow_result(f));
}

}  // namespace atp::ns3adapter
