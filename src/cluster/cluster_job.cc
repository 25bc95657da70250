// ClusterJob: the rendezvous of a job's ranks through a Store, rank 0's planning and installing
// of the job over the daemons' HTTP control planes, and its removal at the end.
#include "atp/cluster/cluster_job.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "atp/cluster/daemon_processes.h"
#include "atp/cluster/orchestrator.h"
#include "atp/control/control.h"
#include "atp/control/daemon_clients.h"
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

}  // namespace

struct ClusterJob::Coordinator {
  std::unique_ptr<LocalDaemons> local;
  std::unique_ptr<Orchestrator> orchestrator;
  JobId installed = 0;

  ~Coordinator() {
    if (orchestrator) orchestrator->revoke_leases();  // removes the job and its ranks' ports
  }

  // Attaches the PS and every rank's data endpoint to the switch, plans the job and installs it,
  // everything of the job's on a lease per daemon. Returns each rank's worker config and the
  // switch's data address (the ranks' uplink).
  std::pair<std::vector<WorkerConfig>, SocketAddress> plan_and_install(const control::SwitchClient& sw,
                                                                       const control::PsClient& ps,
                                                                       const std::vector<SocketAddress>& ranks,
                                                                       const ClusterJobOptions& options) {
    const SocketAddress switch_data = sw.data_address();
    const SocketAddress ps_data = ps.data_address();
    orchestrator = std::make_unique<Orchestrator>(Topology{}, path_mtu(switch_data));  // ranks reach the switch so
    const std::string tor = "tor";
    orchestrator->set_switch(tor, sw);
    orchestrator->set_ps(kPsHost, ps);
    orchestrator->hold_leases(options.lease_ttl);
    // Shared, not on the lease: the other jobs that use this PS, of any tenant, name its port too.
    orchestrator->attach(tor, kPsHost, ps_data, Orchestrator::Attach::kShared);
    JobSpec spec;
    spec.name = "torch";
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      spec.workers.push_back("rank" + std::to_string(r));
      orchestrator->attach(tor, spec.workers.back(), ranks[r]);
    }
    spec.ps = {kPsHost};
    spec.values_per_packet = options.values_per_packet;
    spec.scale = options.scale;
    spec.retransmit_timeout = options.retransmit_timeout;
    spec.progress_timeout = options.timeout;
    JobPlan plan;
    if (options.job_id) {
      spec.id = *options.job_id;
      plan = orchestrator->plan(spec);  // PlanError: e.g. more than 32 ranks
      if (orchestrator->install(plan) == control::Install::kIdTaken) {
        throw ClusterJobError("job " + std::to_string(spec.id) + " is installed on the switch or PS already");
      }
    } else {
      plan = orchestrator->install_with_free_id(spec);
    }
    installed = plan.workers.front().job;
    return {plan.workers, switch_data};
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
      // Every rank has `timeout` from now to show up (not each: one deadline for all).
      const auto deadline = std::chrono::steady_clock::now() + options.timeout;
      std::vector<SocketAddress> ranks{socket.local_endpoint()};
      for (int r = 1; r < size; ++r) {
        const auto left = std::max<Duration>(Duration(0), deadline - std::chrono::steady_clock::now());
        ranks.push_back(SocketAddress::parse(store.get("endpoint/" + std::to_string(r), left)));
        joined = r;
      }
      // After the rendezvous, so that a rank that joined hears why rank 0 gave up, and no local
      // cluster is started for a job whose ranks never all came.
      SocketAddress switch_control, ps_control;
      control::ClientAccess access;
      if (options.local) {
        coordinator->local =
            std::make_unique<LocalDaemons>(find_atp_binary(options.atp_binary), options.local_aggregators);
        switch_control = coordinator->local->switch_control();
        ps_control = coordinator->local->ps_control();
        access = coordinator->local->access();
      } else {
        switch_control = *options.switch_control;
        ps_control = *options.ps_control;
        access = control::client_access();
      }
      const control::SwitchClient sw("the switch at " + switch_control.to_string(), switch_control, access);
      const control::PsClient ps("the PS at " + ps_control.to_string(), ps_control, access);
      std::tie(configs, uplink) = coordinator->plan_and_install(sw, ps, ranks, options);
      job->job_ = coordinator->installed;
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
