// ClusterJob: the rendezvous of a job's ranks through a Store, rank 0's planning and installing
// of the job over the daemons' HTTP control planes, and its removal at the end.
#include "atp/cluster/cluster_job.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "atp/control/control.h"
#include "atp/control/control_client.h"
#include "atp/daemons/ps_daemon.h"
#include "atp/daemons/switch_daemon.h"
#include "atp/plan/plan.h"

namespace atp {
namespace {

using nlohmann::json;

constexpr int kJobIdAttempts = 64;
constexpr Duration kSetupMargin = std::chrono::seconds(30);
// A failed rank 0 waits at most this long (or its timeout) for the others to read its error.
constexpr Duration kErrorReadWait = std::chrono::seconds(5);
constexpr const char* kErrorReadKey = "config/error_read";

// One HTTP request to a daemon's control plane; a daemon that does not answer is a ClusterJobError.
struct Reply {
  int status = 0;
  json body;
};

Reply request(const SocketAddress& control, const control::ClientAccess& access, const char* method,
              const std::string& path, const std::string& body = "") {
  const std::string where = control.to_string();
  httplib::Client client = control::client(control, access);
  httplib::Result r = std::string(method) == "GET"    ? client.Get(path)
                      : std::string(method) == "POST" ? client.Post(path, body, "application/json")
                                                      : client.Delete(path);
  if (!r) {
    throw ClusterJobError(std::string(method) + (access.tls_ca.empty() ? " http://" : " https://") + where + path +
                          " failed (" + httplib::to_string(r.error()) + "): is the daemon running there?");
  }
  Reply reply{r->status, json::parse(r->body, nullptr, false)};
  if (reply.body.is_discarded()) reply.body = json::object();
  return reply;
}

// The answer's body, or a ClusterJobError with the daemon's own error sentence.
json expect_ok(const Reply& reply, const std::string& what) {
  if (reply.status / 100 == 2) return reply.body;
  const std::string error = reply.body.is_object() && reply.body.contains("error") && reply.body["error"].is_string()
                                ? reply.body["error"].get<std::string>()
                                : "HTTP " + std::to_string(reply.status);
  throw ClusterJobError(what + ": " + error);
}

SocketAddress endpoint_field(const json& doc, const char* key, const std::string& who) {
  try {
    return SocketAddress::parse(doc.at(key).get<std::string>());
  } catch (const std::exception&) {
    throw ClusterJobError(who + " did not say its data address (\"" + key + "\" in GET /stats): is it an atp daemon?");
  }
}

struct Attachment {
  HostAttachment host;
  SwitchSpec tor;  // the switch as its answer describes it: name, ATP-capable or not, its table
};

// Attaches `peer` to the switch, hung on `lease` (0: none).
Attachment attach(const SocketAddress& switch_control, const control::ClientAccess& access, LeaseTable::Id lease,
                  const SocketAddress& peer, const std::string& who) {
  const std::string path = lease == 0 ? "/hosts" : "/hosts?lease=" + std::to_string(lease);
  const json reply = expect_ok(request(switch_control, access, "POST", path, control::host_to_json(peer)),
                               "the switch at " + switch_control.to_string() + " refused to attach " + who);
  try {
    Attachment a;
    a.host.address = control::parse_address(reply.at("address").get<std::string>());
    a.host.port = reply.at("port").get<PortId>();
    const json& sw = reply.at("switch");
    a.tor.name = sw.at("name").get<std::string>();
    a.tor.config.atp_capable = sw.at("atp_capable").get<bool>();
    a.tor.config.num_aggregators = sw.at("aggregators").get<std::uint32_t>();
    a.tor.config.aggregator_width = sw.at("aggregator_width").get<std::uint16_t>();
    return a;
  } catch (const std::exception& e) {
    throw ClusterJobError("the switch at " + switch_control.to_string() + " answered POST /hosts with " + reply.dump() +
                          ": " + e.what());
  }
}

// A switch and a PS as threads of this process (ClusterJobOptions::local), with a token of their
// own: only this process talks to them.
struct LocalCluster {
  std::string token = control::random_token();
  std::unique_ptr<SwitchDaemon> switch_daemon;
  std::unique_ptr<PsDaemon> ps_daemon;

  explicit LocalCluster(std::uint32_t aggregators) {
    SwitchDaemonConfig s;
    s.name = "local";
    s.pipeline.num_aggregators = aggregators;
    s.access.operator_token = token;
    switch_daemon = std::make_unique<SwitchDaemon>(s);  // no ports yet: ranks are attached (POST /hosts)
    switch_daemon->start();
    PsDaemonConfig p;
    p.data = SocketAddress::loopback(0);
    p.control = SocketAddress::loopback(0);
    p.uplink = switch_daemon->data_endpoint();
    p.access.operator_token = token;
    ps_daemon = std::make_unique<PsDaemon>(p);
    ps_daemon->start();
  }
  SocketAddress switch_control() const { return SocketAddress::parse(switch_daemon->control_endpoint()); }
  SocketAddress ps_control() const { return ps_daemon->control_endpoint(); }
};

}  // namespace

// A lease on one daemon (POST /leases) for everything a job installs there: kept alive while the
// job runs, revoked at its end, and expiring by itself if this process dies.
struct Lease {
  SocketAddress control;
  LeaseTable::Id id = 0;
};

struct ClusterJob::Coordinator {
  std::unique_ptr<LocalCluster> local;
  SocketAddress switch_control, ps_control;
  control::ClientAccess access;  // for both daemons' control planes
  Lease switch_lease, ps_lease;
  std::optional<JobId> installed;  // on both the switch and the PS

  // The keep-alive thread: every third of the lease's time to live, one request per daemon.
  std::thread keeper;
  std::mutex keeper_mutex;
  std::condition_variable keeper_wake;
  bool stopping = false;

  // Revokes the leases, which removes what plan_and_install() did; never throws.
  void uninstall() noexcept {
    {
      std::lock_guard lock(keeper_mutex);
      stopping = true;
    }
    keeper_wake.notify_all();
    if (keeper.joinable()) keeper.join();
    for (Lease* lease : {&switch_lease, &ps_lease}) {
      try {
        if (lease->id != 0) request(lease->control, access, "DELETE", "/leases/" + std::to_string(lease->id));
      } catch (const std::exception&) {  // the daemon is gone: nothing left to remove
      }
      lease->id = 0;
    }
    installed.reset();
  }

  ~Coordinator() { uninstall(); }

  Lease grant(const SocketAddress& control, Duration ttl, const std::string& who) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count();
    const json reply = expect_ok(request(control, access, "POST", "/leases", json{{"ttl_ms", ms}}.dump()),
                                 who + " at " + control.to_string() + " granted no lease");
    if (!reply.contains("lease") || !reply["lease"].is_number_unsigned()) {
      throw ClusterJobError(who + " at " + control.to_string() + " answered POST /leases with " + reply.dump());
    }
    return {control, reply["lease"].get<LeaseTable::Id>()};
  }

  // Keeps both leases alive until uninstall(). A daemon that does not answer once is asked again
  // at the next beat; a lease it no longer has means the job is gone, and the ranks' rounds fail.
  void keep_alive(Duration ttl) {
    keeper = std::thread([this, beat = ttl / 3] {
      std::unique_lock lock(keeper_mutex);
      while (!keeper_wake.wait_for(lock, beat, [this] { return stopping; })) {
        lock.unlock();  // uninstall() need not wait for a slow daemon's answer to take the lock
        for (const Lease* lease : {&switch_lease, &ps_lease}) {
          try {
            request(lease->control, access, "POST", "/leases/" + std::to_string(lease->id) + "/keepalive");
          } catch (const std::exception&) {
          }
        }
        lock.lock();
      }
    });
  }

  // Attaches the PS and every rank's data endpoint to the switch, plans the job and installs it.
  // Returns each rank's worker config and the switch's data address (the ranks' uplink).
  std::pair<std::vector<WorkerConfig>, SocketAddress> plan_and_install(const std::vector<SocketAddress>& ranks,
                                                                       const ClusterJobOptions& options) {
    const SocketAddress switch_data = endpoint_field(
        expect_ok(request(switch_control, access, "GET", "/stats"), "the switch at " + switch_control.to_string()),
        "data", "the switch at " + switch_control.to_string());
    const SocketAddress ps_data =
        endpoint_field(expect_ok(request(ps_control, access, "GET", "/stats"), "the PS at " + ps_control.to_string()),
                       "data", "the PS at " + ps_control.to_string());
    switch_lease = grant(switch_control, options.lease_ttl, "the switch");
    ps_lease = grant(ps_control, options.lease_ttl, "the PS");
    keep_alive(options.lease_ttl);
    // Not on the lease: the PS's port is shared with the other jobs that use this PS.
    const Attachment ps = attach(switch_control, access, 0, ps_data, "the PS " + ps_data.to_string());

    Topology topology;
    const SwitchSpec& tor = ps.tor;
    topology.switches.push_back(tor);
    JobSpec spec;
    spec.name = "torch";
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const std::string name = "rank" + std::to_string(r);
      const Attachment a = attach(switch_control, access, switch_lease.id, ranks[r],
                                  "rank " + std::to_string(r) + " at " + ranks[r].to_string());
      topology.hosts.push_back({name, tor.name, a.host});
      spec.workers.push_back(name);
    }
    topology.hosts.push_back({"ps", tor.name, ps.host});
    spec.ps = {"ps"};
    spec.values_per_packet = options.values_per_packet;
    spec.scale = options.scale;
    spec.retransmit_timeout = options.retransmit_timeout;
    spec.progress_timeout = options.timeout;
    NetworkPlan network = plan_network(topology);
    network.mtu_bytes = path_mtu(switch_data);  // every rank reaches the switch as this one does

    std::mt19937 random{std::random_device{}()};
    for (int attempt = 0; attempt < kJobIdAttempts; ++attempt) {
      spec.id = options.job_id ? *options.job_id : static_cast<JobId>(1 + random() % 0xFFFE);
      const JobPlan plan = plan_job(network, spec);  // PlanError: e.g. more than 32 ranks
      const std::string jobs = "/jobs?lease=";
      const Reply on_switch = request(switch_control, access, "POST", jobs + std::to_string(switch_lease.id),
                                      control::to_json(plan.switches.at(tor.name)));
      // The id is taken (by this tenant: 409, or another: 403): try another.
      if ((on_switch.status == 409 || on_switch.status == 403) && !options.job_id) continue;
      expect_ok(on_switch, "the switch refused job " + std::to_string(spec.id));
      const Reply on_ps =
          request(ps_control, access, "POST", jobs + std::to_string(ps_lease.id), control::to_json(plan.ps.front()));
      if (on_ps.status / 100 != 2) request(switch_control, access, "DELETE", "/jobs/" + std::to_string(spec.id));
      if ((on_ps.status == 409 || on_ps.status == 403) && !options.job_id) continue;
      expect_ok(on_ps, "the PS refused job " + std::to_string(spec.id));
      installed = spec.id;
      return {plan.workers, switch_data};
    }
    throw ClusterJobError("no free job id after " + std::to_string(kJobIdAttempts) +
                          " tries: the switch or PS has too many jobs installed");
  }
};

ClusterJob::ClusterJob(Store& store, int rank, int size, Duration timeout)
    : store_(store), rank_(rank), size_(size), timeout_(timeout) {}

ClusterJob::~ClusterJob() { close(); }

std::unique_ptr<ClusterJob> ClusterJob::join(Store& store, int rank, int size, const ClusterJobOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ClusterJobError("rank " + std::to_string(rank) + " of " + std::to_string(size) + " is not a rank of the job");
  }
  if (!options.local && (!options.switch_control || !options.ps_control)) {
    throw ClusterJobError(
        "no ATP cluster given: name a running switch and PS (their control addresses), or start a local one on rank 0");
  }
  std::unique_ptr<ClusterJob> job(new ClusterJob(store, rank, size, options.timeout));
  UdpSocket socket({options.bind_ip, 0});
  store.set("endpoint/" + std::to_string(rank), socket.local_endpoint().to_string());

  if (rank == 0) {
    std::vector<WorkerConfig> configs;
    SocketAddress uplink;
    int joined = 0;  // other ranks whose endpoint rank 0 read: they wait for its verdict
    try {
      auto coordinator = std::make_unique<Coordinator>();
      if (options.local) {
        coordinator->local = std::make_unique<LocalCluster>(options.local_aggregators);
        coordinator->switch_control = coordinator->local->switch_control();
        coordinator->ps_control = coordinator->local->ps_control();
        coordinator->access = {coordinator->local->token, ""};
      } else {
        coordinator->switch_control = *options.switch_control;
        coordinator->ps_control = *options.ps_control;
      }
      // Every rank has `timeout` from now to show up (not each: one deadline for all).
      const auto deadline = std::chrono::steady_clock::now() + options.timeout;
      std::vector<SocketAddress> ranks{socket.local_endpoint()};
      for (int r = 1; r < size; ++r) {
        const auto left = std::max<Duration>(Duration(0), deadline - std::chrono::steady_clock::now());
        ranks.push_back(SocketAddress::parse(store.get("endpoint/" + std::to_string(r), left)));
        joined = r;
      }
      // After the rendezvous, so that a rank that joined hears why rank 0 gave up.
      if (!options.local) coordinator->access = control::client_access();
      std::tie(configs, uplink) = coordinator->plan_and_install(ranks, options);
      job->job_ = *coordinator->installed;
      job->coordinator_ = std::move(coordinator);
    } catch (const std::exception& e) {
      const std::string why = std::string("rank 0 could not set up the ATP job: ") + e.what();
      for (int r = 1; r < size; ++r) store.set("config/" + std::to_string(r), json{{"error", why}}.dump());
      // The store may live in this process (torch's TCPStore on rank 0): wait, bounded, until the
      // others have read why, or they would only learn that the store went away.
      const auto until = std::chrono::steady_clock::now() + std::min<Duration>(options.timeout, kErrorReadWait);
      try {
        while (store.add(kErrorReadKey, 0) < joined && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        store.erase(kErrorReadKey);
      } catch (const std::exception&) {  // the store is gone: nothing more to do for the others
      }
      throw ClusterJobError(why);
    }
    for (int r = 1; r < size; ++r) {
      const json reply = {{"config", json::parse(control::to_json(configs[static_cast<std::size_t>(r)]))},
                          {"uplink", uplink.to_string()}};
      store.set("config/" + std::to_string(r), reply.dump());
    }
    job->communicator_ = std::make_unique<Communicator>(configs[0], std::move(socket), uplink);
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
  const WorkerConfig config = control::worker_config_from_json(reply["config"].dump());
  job->job_ = config.job;
  job->communicator_ = std::make_unique<Communicator>(config, std::move(socket),
                                                      SocketAddress::parse(reply["uplink"].get<std::string>()));
  return job;
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
    const std::int64_t done = store_.add("closed", 1);
    if (rank_ == 0) {
      // Wait for the others, so that none loses its switch and PS in the middle of a last round.
      const auto deadline = std::chrono::steady_clock::now() + std::min<Duration>(timeout_, std::chrono::seconds(10));
      for (std::int64_t n = done; n < size_ && std::chrono::steady_clock::now() < deadline;
           n = store_.add("closed", 0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      store_.erase("closed");
      store_.erase("endpoint/0");
    }
  } catch (const std::exception&) {  // the store is gone (rank 0 exited): nothing to wait for
  }
  communicator_.reset();
  coordinator_.reset();
}

}  // namespace atp
