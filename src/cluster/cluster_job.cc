// ClusterJob: the rendezvous of a job's ranks through a Store, rank 0's planning and installing
// of the job over the daemons' HTTP control planes, and its removal at the end.
#include "atp/cluster/cluster_job.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "atp/cluster/daemon_processes.h"
#include "atp/cluster/orchestrator.h"
#include "atp/cluster/protocols.h"
#include "atp/cluster/testbed_client.h"
#include "atp/control/control.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/stats.h"
#include "atp/plan/plan.h"

namespace atp {
namespace {

using nlohmann::json;

constexpr Duration kSetupMargin = std::chrono::seconds(30);
// A failed rank 0 waits at most this long (or its timeout) for the others to read its error.
constexpr Duration kErrorReadWait = std::chrono::seconds(5);
constexpr const char* kErrorReadKey = "config/error_read";
// How the job's PS is named in the topology rank 0 plans it over (the ranks are rank0, rank1, ...).
constexpr const char* kPsHost = "ps";

// What each rank tells rank 0 (store key "endpoint/RANK"): where its data socket is, and the
// switch and PS it names.
struct RankInfo {
  SocketAddress endpoint;
  std::optional<SocketAddress> switch_control, ps_control;
  std::string host;  // on a testbed: its host there
};

std::string to_json(const RankInfo& r) {
  json doc = {{"endpoint", r.endpoint.to_string()}};
  if (r.switch_control) doc["switch"] = r.switch_control->to_string();
  if (r.ps_control) doc["ps"] = r.ps_control->to_string();
  if (!r.host.empty()) doc["host"] = r.host;
  return doc.dump();
}

RankInfo rank_info_from_json(const std::string& text) {
  const json doc = json::parse(text);
  RankInfo r{SocketAddress::parse(doc.at("endpoint").get<std::string>()), std::nullopt, std::nullopt, ""};
  if (doc.contains("switch")) r.switch_control = SocketAddress::parse(doc["switch"].get<std::string>());
  if (doc.contains("ps")) r.ps_control = SocketAddress::parse(doc["ps"].get<std::string>());
  r.host = doc.value("host", "");
  return r;
}

// The switch of `host` in a local network's topology. Throws ClusterJobError naming the host.
const std::string& switch_of(const ClusterJobOptions::LocalNetwork& network, const std::string& host) {
  for (const HostSpec& h : network.topology.hosts) {
    if (h.name == host) return h.switch_name;
  }
  throw ClusterJobError("the local network has no host '" + host + "'");
}

// A local network that cannot hold this job, as one sentence (every rank finds the same).
void check_local_network(const ClusterJobOptions& options, int size) {
  if (!options.local_network) return;
  if (!options.local) throw ClusterJobError("a local network is started by rank 0 of a local cluster: set local too");
  const ClusterJobOptions::LocalNetwork& network = *options.local_network;
  if (network.rank_hosts.size() != static_cast<std::size_t>(size)) {
    throw ClusterJobError("the local network names the hosts of " + std::to_string(network.rank_hosts.size()) +
                          " ranks, the job has " + std::to_string(size));
  }
  for (const std::string& host : network.rank_hosts) switch_of(network, host);
  switch_of(network, network.ps_host);
}

// Where this rank is when its switch (ClusterJobOptions::switch_control) is on Linux interfaces:
// a host the switches reach by IP, at its ATP port, and that IP is ATP_BIND's (bind_ip) unless it
// is the loopback, else the one its packets towards the PS's data address leave from. nullopt: the
// switch is on UDP ports (the rank attaches a socket of its own), or did not answer: rank 0 asks
// every switch again and tells every rank what failed, in the same words.
std::optional<Address> address_behind_interfaces(const ClusterJobOptions& options) {
  try {
    const control::ClientAccess access = control::client_access();
    const std::string where = options.switch_control->to_string();
    if (control::SwitchClient("the switch at " + where, *options.switch_control, access).stats().data) {
      return std::nullopt;
    }
    if (options.bind_ip >> 24 != 127) return options.bind_ip;
    return source_address_towards(
        control::PsClient("the PS at " + options.ps_control->to_string(), *options.ps_control, access).data_address());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

using NamedSwitches = std::vector<std::pair<std::string, control::SwitchClient>>;

// The switch a PS on UDP ports hangs under: the one it sends to (its --uplink). One without sends
// to whoever sent, which only a job of one switch can be sure of. Throws ClusterJobError.
std::string uplink_switch(const control::PsClient& ps, const control::PsStats& stats,
                          const std::map<std::string, SocketAddress>& data_of,
                          const std::map<std::string, std::string>& control_of) {
  for (const auto& [name, data] : data_of) {
    if (stats.uplink == data) return name;
  }
  if (!stats.uplink && control_of.size() == 1) return control_of.begin()->first;
  std::string named;
  for (const auto& [name, control] : control_of) named += (named.empty() ? "'" : ", '") + name + "' at " + control;
  throw ClusterJobError(ps.who() +
                        (stats.uplink ? " sends to " + stats.uplink->to_string() + ", which is the data address of "
                                      : " names no --uplink, so it could hang under any of ") +
                        "none of the job's switches (" + named +
                        "): name the PS's switch too (ClusterJobOptions::switches, ATP_SWITCHES)");
}

// The switch on interfaces a PS at `data` hangs under: the one whose route to its IP is a host's
// port, not a link to another switch (POST /hosts answers where). Throws ClusterJobError with each
// switch's answer.
std::string switch_with_host(const control::PsClient& ps, const SocketAddress& data, const NamedSwitches& switches) {
  std::string answers;
  for (const auto& [name, client] : switches) {
    try {
      client.attach_host(data, 0, true);
      return name;
    } catch (const control::DaemonError& e) {
      answers += (answers.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  throw ClusterJobError(ps.who() + ", whose data address is " + data.to_string() +
                        ", hangs under none of the job's switches (" + answers +
                        "): name the PS's switch too (ClusterJobOptions::switches, ATP_SWITCHES)");
}

// Refuses a rank outside the job and options that name no cluster or two kinds of one.
void check_join(int rank, int size, const ClusterJobOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ClusterJobError("rank " + std::to_string(rank) + " of " + std::to_string(size) + " is not a rank of the job");
  }
  check_local_network(options, size);
  if (options.testbed && options.local) {
    throw ClusterJobError("a job on a testbed uses its switches and PS: it starts no local cluster");
  }
  if (!options.local && !options.testbed && (!options.switch_control || !options.ps_control)) {
    throw ClusterJobError(
        "no ATP cluster given: name a running switch and PS (their control addresses), or start a local one on rank 0");
  }
}

// A rank's data socket and what it tells rank 0. On a testbed the switch reaches the rank by IP,
// at the host's ATP port, and parameter packets come to the job's multicast group (the socket is
// bound to every address for them). So are ranks behind running switches on Linux interfaces
// (hosts of a real network).
std::pair<UdpSocket, RankInfo> own_endpoint(const ClusterJobOptions& options) {
  const std::optional<Address> host_ip =
      options.local || options.testbed ? std::nullopt : address_behind_interfaces(options);
  UdpSocket socket = options.testbed || host_ip ? UdpSocket({0, kUdpPort}, host_socket_options(std::nullopt))
                                                : UdpSocket({options.bind_ip, 0});
  RankInfo me{socket.local_endpoint(), std::nullopt, std::nullopt, ""};
  if (options.testbed) {
    me.host = options.testbed->host;
  } else if (!options.local) {
    me = {host_ip ? SocketAddress{*host_ip, kUdpPort} : socket.local_endpoint(), options.switch_control,
          options.ps_control, ""};
  }
  return {std::move(socket), std::move(me)};
}

// Tells the `joined` ranks that read rank 0's verdict `why` it gave up. The store may live in
// this process (torch's TCPStore on rank 0): waits, bounded, until they have read it, or they
// would only learn that the store went away.
void tell_why(Store& store, int size, int joined, Duration timeout, const std::string& why) {
  for (int r = 1; r < size; ++r) store.set("config/" + std::to_string(r), json{{"error", why}}.dump());
  const auto until = std::chrono::steady_clock::now() + std::min<Duration>(timeout, kErrorReadWait);
  try {
    while (store.add(kErrorReadKey, 0) < joined && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    store.erase(kErrorReadKey);
  } catch (const std::exception&) {  // the store is gone: nothing more to do for the others
  }
}

}  // namespace

struct ClusterJob::Coordinator {
  std::unique_ptr<LocalDaemons> local;
  std::unique_ptr<Orchestrator> orchestrator;
  std::unique_ptr<TestbedClient> testbed;  // on a testbed: the job lives as long as this connection
  JobId installed = 0;

  ~Coordinator() {
    if (orchestrator) orchestrator->revoke_leases();  // removes the job and its ranks' ports
  }

  // The job's plan: each rank's endpoint config (its protocol's, a JSON value) and uplink (its
  // switch's data address).
  struct Placed {
    std::vector<nlohmann::json> configs;
    std::vector<std::optional<SocketAddress>> uplinks;  // none on a testbed: addressed by IP
  };

  // Rank 0's rendezvous: every rank's RankInfo, in rank order, `me` first. Every rank has the
  // options' timeout from now to show up (not each: one deadline for all). `joined`: the last
  // rank read so far, which waits for rank 0's verdict.
  static std::vector<RankInfo> gather(Store& store, int size, const RankInfo& me, const ClusterJobOptions& options,
                                      int& joined) {
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    std::vector<RankInfo> ranks{me};
    for (int r = 1; r < size; ++r) {
      const auto left = std::max<Duration>(Duration(0), deadline - std::chrono::steady_clock::now());
      ranks.push_back(rank_info_from_json(store.get("endpoint/" + std::to_string(r), left)));
      joined = r;
      if (ranks.back().ps_control != me.ps_control) {
        throw ClusterJobError("rank " + std::to_string(r) + " names " +
                              (ranks.back().ps_control ? "the PS at " + ranks.back().ps_control->to_string()
                                                       : std::string("no PS (a local cluster)")) +
                              ", rank 0 " +
                              (me.ps_control ? "the PS at " + me.ps_control->to_string() : std::string("none")) +
                              ": every rank names the same PS");
      }
    }
    return ranks;
  }

  // Places the job of `ranks` on the cluster the options name: a testbed's, a local one it
  // starts (one switch, or the options' local network), or running daemons.
  Placed place(const std::vector<RankInfo>& ranks, const ClusterJobOptions& options) {
    if (options.testbed) return install_on_testbed(ranks, options);
    std::vector<SocketAddress> endpoints, rank_switches, more_switches;
    SocketAddress ps_control;
    control::ClientAccess access;
    if (options.local_network) {
      const ClusterJobOptions::LocalNetwork& network = *options.local_network;
      local = std::make_unique<LocalDaemons>(find_atp_binary(options.atp_binary), network.topology,
                                             switch_of(network, network.ps_host));
      for (const std::string& host : network.rank_hosts) {
        rank_switches.push_back(local->switch_control(switch_of(network, host)));
      }
      more_switches = local->switch_controls();  // those no rank hangs under too
    } else if (options.local) {
      local = std::make_unique<LocalDaemons>(find_atp_binary(options.atp_binary), options.local_aggregators);
      rank_switches.assign(ranks.size(), local->switch_control("local"));
    } else {
      for (const RankInfo& r : ranks) rank_switches.push_back(*r.switch_control);
      more_switches = options.switches;
      ps_control = *options.ps_control;
      access = control::client_access();
    }
    if (local) {
      ps_control = local->ps_control();
      access = local->access();
    }
    for (const RankInfo& r : ranks) endpoints.push_back(r.endpoint);
    const control::PsClient ps("the PS at " + ps_control.to_string(), ps_control, access);
    return plan_and_install(endpoints, rank_switches, more_switches, ps, access, options);
  }

  // On a testbed: the runner plans and installs the job over its network.
  Placed install_on_testbed(const std::vector<RankInfo>& ranks, const ClusterJobOptions& options) {
    testbed = std::make_unique<TestbedClient>(options.testbed->socket_path);
    TestbedJobRequest request;
    for (const RankInfo& r : ranks) request.hosts.push_back(r.host);
    request.protocol = options.protocol;
    request.in_network_aggregation = options.in_network_aggregation;
    request.values_per_packet = options.values_per_packet;
    request.scale = options.scale;
    request.retransmit_timeout = options.retransmit_timeout.value_or(Duration::zero());  // 0: the file's
    request.progress_timeout = options.timeout;
    TestbedJob job = testbed->install(request);
    installed = job.job;
    Placed placed{std::move(job.configs), {}};
    placed.uplinks.resize(ranks.size());
    return placed;
  }

  // The job's switches as they name themselves, each once, by their control addresses.
  struct Switches {
    std::map<std::string, std::string> name_at;     // control address -> the switch's name
    std::map<std::string, SocketAddress> data_of;   // name -> data address (switches on UDP ports)
    std::map<std::string, std::string> control_of;  // name -> control address
    NamedSwitches clients;
    // Switches on Linux interfaces reach the ranks and the PS by IP (hosts on a network); those on
    // UDP ports have each attached by its socket. One job's are all of one kind.
    bool interfaces = false;
  };

  static Switches name_switches(const std::vector<SocketAddress>& controls, const control::ClientAccess& access) {
    Switches switches;
    for (const SocketAddress& control : controls) {
      const std::string where = control.to_string();
      if (switches.name_at.contains(where)) continue;
      const control::SwitchClient probe("the switch at " + where, control, access);
      const control::SwitchStats stats = probe.stats();
      if (!switches.name_at.empty() && switches.interfaces != !stats.data) {
        throw ClusterJobError("the switch at " + where + (stats.data ? " is on UDP ports" : " is on Linux interfaces") +
                              ", the switch at " + controls.front().to_string() +
                              " is not: one job's switches are all of one kind");
      }
      switches.interfaces = !stats.data;
      if (const auto other = switches.control_of.find(stats.name); other != switches.control_of.end()) {
        throw ClusterJobError("the switches at " + other->second + " and " + where + " are both named '" + stats.name +
                              "': give each its own name: in its config");
      }
      switches.name_at[where] = stats.name;
      if (stats.data) switches.data_of[stats.name] = *stats.data;
      switches.control_of[stats.name] = where;
      switches.clients.emplace_back(stats.name,
                                    control::SwitchClient("switch '" + stats.name + "' at " + where, control, access));
    }
    return switches;
  }

  // Names the switches the ranks and `more_switches` name as they name themselves, finds the
  // links between them, attaches the PS to the switch it sends to and each rank to its own, plans
  // the job and installs it, everything of the job's on a lease per daemon.
  Placed plan_and_install(const std::vector<SocketAddress>& ranks, const std::vector<SocketAddress>& rank_switches,
                          const std::vector<SocketAddress>& more_switches, const control::PsClient& ps,
                          const control::ClientAccess& access, const ClusterJobOptions& options) {
    std::vector<SocketAddress> controls = rank_switches;
    controls.insert(controls.end(), more_switches.begin(), more_switches.end());
    const Switches switches = name_switches(controls, access);
    const bool interfaces = switches.interfaces;
    const std::map<std::string, SocketAddress>& data_of = switches.data_of;
    const control::PsStats ps_stats = ps.stats();
    if (interfaces && ps_stats.data.ip == 0) {
      throw ClusterJobError(ps.who() + " listens on " + ps_stats.data.to_string() +
                            ": behind switches on interfaces it needs its host's address (atp ps --listen IP:" +
                            std::to_string(kUdpPort) + ")");
    }
    // The smallest MTU on the ranks' paths to their switches, or on interfaces, to the PS.
    std::uint32_t mtu = interfaces ? path_mtu(ps_stats.data) : 0;
    for (const auto& [name, data] : data_of) {
      const std::uint32_t m = path_mtu(data);
      mtu = mtu == 0 ? m : std::min(mtu, m);
    }
    orchestrator = std::make_unique<Orchestrator>(Topology{}, mtu);
    for (const auto& [name, client] : switches.clients) orchestrator->set_switch(name, client);
    orchestrator->set_ps(kPsHost, ps);
    orchestrator->hold_leases(options.lease_ttl);
    orchestrator->discover_links();

    // The PS hangs under the switch it sends to, or on interfaces, the one its cable is on.
    const std::string ps_switch = interfaces ? switch_with_host(ps, ps_stats.data, switches.clients)
                                             : uplink_switch(ps, ps_stats, data_of, switches.control_of);
    // Shared, not on the lease: the other jobs that use this PS, of any tenant, name its port too.
    orchestrator->attach(ps_switch, kPsHost, ps_stats.data, Orchestrator::Attach::kShared);
    JobSpec spec;
    Placed placed;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      spec.workers.push_back("rank" + std::to_string(r));
      const std::string& tor = switches.name_at.at(rank_switches[r].to_string());
      orchestrator->attach(tor, spec.workers.back(), ranks[r]);
      placed.uplinks.push_back(interfaces ? std::nullopt : std::optional(data_of.at(tor)));
    }
    spec.ps = {kPsHost};
    placed.configs = install(std::move(spec), options);
    return placed;
  }

  // Plans the job of `spec` (its hosts attached) over the orchestrator's network with the
  // options' settings and installs it under the options' job id or a free one. Returns each
  // worker's endpoint config. PlanError: e.g. more than 32 ranks under one switch.
  std::vector<nlohmann::json> install(JobSpec spec, const ClusterJobOptions& options) {
    spec.name = "torch";
    spec.in_network_aggregation = options.in_network_aggregation;
    spec.values_per_packet = options.values_per_packet;
    spec.scale = options.scale;
    spec.retransmit_timeout = options.retransmit_timeout.value_or(WorkerConfig{}.retransmit_timeout);
    spec.progress_timeout = options.timeout;
    const Protocol& protocol = atp::protocol(options.protocol);
    EndpointJobPlan plan;
    if (options.job_id) {
      spec.id = *options.job_id;
      plan = orchestrator->plan(protocol, spec);
      if (orchestrator->install(plan) == control::Install::kIdTaken) {
        throw ClusterJobError("job " + std::to_string(spec.id) + " is installed on a switch or the PS already");
      }
    } else {
      plan = orchestrator->install_with_free_id(protocol, spec);
    }
    installed = plan.job;
    return std::move(plan.workers);
  }
};

ClusterJob::ClusterJob(Store& store, int rank, int size, Duration timeout)
    : store_(store), rank_(rank), size_(size), timeout_(timeout) {}

ClusterJob::~ClusterJob() { close(); }

std::unique_ptr<ClusterJob> ClusterJob::join(Store& store, int rank, int size, const ClusterJobOptions& options) {
  check_join(rank, size, options);
  std::unique_ptr<ClusterJob> job(new ClusterJob(store, rank, size, options.timeout));
  auto [socket, me] = own_endpoint(options);
  store.set("endpoint/" + std::to_string(rank), to_json(me));

  if (rank == 0) {
    Coordinator::Placed placed;
    int joined = 0;  // other ranks whose endpoint rank 0 read: they wait for its verdict
    try {
      auto coordinator = std::make_unique<Coordinator>();
      const std::vector<RankInfo> ranks = Coordinator::gather(store, size, me, options, joined);
      // After the rendezvous, so that a rank that joined hears why rank 0 gave up, and no local
      // cluster is started for a job whose ranks never all came.
      placed = coordinator->place(ranks, options);
      job->job_ = coordinator->installed;
      job->coordinator_ = std::move(coordinator);
    } catch (const std::exception& e) {
      const std::string why = std::string("rank 0 could not set up the ATP job: ") + e.what();
      tell_why(store, size, joined, options.timeout, why);
      throw ClusterJobError(why);
    }
    const Protocol& protocol = atp::protocol(options.protocol);
    for (int r = 1; r < size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      json reply = {{"protocol", protocol.name}, {"config", placed.configs[i]}};
      if (placed.uplinks[i]) reply["uplink"] = placed.uplinks[i]->to_string();
      store.set("config/" + std::to_string(r), reply.dump());
    }
    job->communicator_ =
        std::make_unique<Communicator>(protocol.endpoint(placed.configs[0]), std::move(socket), placed.uplinks[0]);
    return job;
  }

  // Rank 0 may spend the timeout waiting for a missing rank, then a few requests to the daemons
  // (each bounded: connect 2 s, read 5 s): wait longer than that, so that its verdict arrives.
  const json reply = json::parse(store.get("config/" + std::to_string(rank), 2 * options.timeout + kSetupMargin));
  store.erase("config/" + std::to_string(rank));
  store.erase("endpoint/" + std::to_string(rank));
  if (reply.contains("error")) {
    store.add(kErrorReadKey, 1);  // rank 0 waits for this before it goes (and its store with it)
    throw ClusterJobError(reply["error"].get<std::string>());
  }
  std::optional<SocketAddress> uplink;
  if (reply.contains("uplink")) uplink = SocketAddress::parse(reply["uplink"].get<std::string>());
  std::unique_ptr<Endpoint> endpoint = protocol(reply.at("protocol").get<std::string>()).endpoint(reply.at("config"));
  job->job_ = endpoint->job();
  job->communicator_ = std::make_unique<Communicator>(std::move(endpoint), std::move(socket), uplink);
  return job;
}

std::map<std::string, std::uint64_t> ClusterJob::switch_aggregations() const {
  std::map<std::string, std::uint64_t> aggregations;
  if (coordinator_ && coordinator_->testbed) return coordinator_->testbed->aggregations(job_);
  if (!coordinator_ || !coordinator_->orchestrator) return aggregations;
  const Orchestrator& orchestrator = *coordinator_->orchestrator;
  for (const SwitchSpec& sw : orchestrator.topology().switches) {
    std::uint64_t& n = aggregations[sw.name];
    for (const control::SwitchJobStats& j : orchestrator.switch_client(sw.name).stats().jobs) {
      if (j.job == job_) n += j.counters.aggregations;
    }
  }
  return aggregations;
}

void ClusterJob::close() {
  if (closed_) return;
  closed_ = true;
  // A job that never started (join() failed on this rank) has no round for the others to finish:
  // waiting for them here only delayed join()'s error by the timeout.
  if (!communicator_) {
    coordinator_.reset();
    return;
  }
  try {
    const auto deadline = std::chrono::steady_clock::now() + std::min<Duration>(timeout_, std::chrono::seconds(10));
    // Counts this rank in `key`, then (with `wait`) waits until every rank has been counted.
    const auto count_in = [&](const std::string& key, bool wait) {
      for (std::int64_t n = store_.add(key, 1); wait && n < size_ && std::chrono::steady_clock::now() < deadline;
           n = store_.add(key, 0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    };
    if (communicator_->linger().at_most > Duration::zero()) {
      // The last sums come from the other ranks (Rina's), not from a PS that stays: a rank that
      // missed a final asks its holder. Every rank stays until all are done (each has all its
      // sums), then says it is leaving, and rank 0 removes the keys once all have.
      count_in("closed", true);
      count_in("left", rank_ == 0);
      if (rank_ == 0) store_.erase("left");
    } else {
      // Rank 0 waits for the others, so that none loses its switch and PS in the middle of a last round.
      count_in("closed", rank_ == 0);
    }
    if (rank_ == 0) {
      store_.erase("closed");
      store_.erase("endpoint/0");
    }
  } catch (const std::exception&) {  // the store is gone (rank 0 exited): nothing to wait for
  }
  communicator_.reset();
  coordinator_.reset();
}

}  // namespace atp
