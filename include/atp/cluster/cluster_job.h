// A job of ranks that meet through a rendezvous Store and run ATP allreduces on running switches
// and a PS (`atp switch`, `atp ps`), or on a switch and PS that rank 0 starts as its children:
// what the PyTorch backend is built on. Each rank names its own switch (its rack's), so a job may
// span racks. Rank 0 finds the links between the switches, plans the job and installs it
// (Orchestrator); the others get their part of the plan through the store.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atp/collectives/communicator.h"
#include "atp/collectives/store.h"
#include "atp/io/socket_address.h"
#include "atp/plan/plan.h"
#include "atp/wire.h"

namespace atp {

struct ClusterJobOptions {
  // The HTTP control addresses of this rank's switch (its rack's: ranks may name different ones)
  // and of the PS (the same on every rank; it hangs under the switch it names as --uplink). Unset
  // (both): `local` must be true. A switch on Linux interfaces (hosts cabled to a machine that
  // forwards between its NICs) reaches the rank by IP: the rank binds the host's ATP port and names
  // `bind_ip`, or when that is the loopback, the address it reaches the PS's data address from;
  // the switch's routes say where each host is and its ports' `switch:` where the links lead.
  std::optional<SocketAddress> switch_control;
  std::optional<SocketAddress> ps_control;
  // The control addresses of further running switches, the same on every rank: those that link
  // the ranks' switches to each other and to the PS's (a core switch no rank hangs under). Rank 0
  // finds the links between all the job's switches from their configs' peers (a port of one whose
  // peer is another's data address: Orchestrator::discover_links). Each switch needs a host_pool
  // of its own.
  std::vector<SocketAddress> switches;
  // Rank 0 starts a software switch and a PS on 127.0.0.1 as its child processes (`atp switch`,
  // `atp ps`), for single-machine runs; they stop when rank 0 closes the job, and die with the
  // thread that joined as rank 0 (PR_SET_PDEATHSIG) if it ends first.
  bool local = false;
  // The atp binary a local cluster is started from; "": find_atp_binary() (ATP_BINARY, or the
  // `atp` beside the PyTorch extension).
  std::string atp_binary;
  std::uint32_t local_aggregators = 4096;  // the local switch's table (aggregators of 1024 int32 values)
  // With `local`: the network rank 0 starts instead of one switch of local_aggregators, on one
  // machine: every switch of `topology` with its config, linked as its switch_links say
  // (LocalDaemons); rank r hangs under the switch of host rank_hosts[r], the PS under ps_host's.
  // What a scenario file's topology and first job give (ATP_TOPOLOGY): a multi-rack plan tried on
  // one machine before it runs on the racks.
  struct LocalNetwork {
    Topology topology;
    std::vector<std::string> rank_hosts;  // one per rank, hosts of the topology
    std::string ps_host;
  };
  std::optional<LocalNetwork> local_network;
  // The ranks run on an emulated cluster (`atp testbed`): each on its own host there, whose switch
  // is on Linux interfaces and reaches it by IP. Every rank binds the host's ATP port (kUdpPort,
  // as the testbed's own workers do) and names its host; rank 0 asks the runner, over the Unix
  // socket at `socket_path`, to plan and install the job over the testbed's network
  // (cluster/testbed_client.h). The switch, PS and local settings are then not used.
  struct Testbed {
    std::string socket_path;  // ATP_TESTBED
    std::string host;         // ATP_HOST: this rank's host in the testbed's file
  };
  std::optional<Testbed> testbed;
  std::uint32_t bind_ip = 0x7F000001;  // where every rank binds its data socket (the switch reaches it there)
  // int32 values per packet. 0: the widest the switch and the path MTU take (JobSpec).
  std::uint16_t values_per_packet = 0;
  // A fragment position's first fixed-point scale, rounded down to a power of two; later calls
  // take the exponent the PS picks per fragment (docs/protocol.md "Scale per fragment").
  double scale = 1e8;
  // The retransmission timeout before one is measured (WorkerConfig::retransmit_timeout); later
  // ones come from the round trips the ranks measure, scheduling delays included. Unset: the
  // paper's 1 ms, or on a testbed the file's (from its link rate, as `atp run` plans it).
  std::optional<Duration> retransmit_timeout;
  // The longest any rank waits: for the others in the store, and for a round that makes no progress
  // (a rank died): then it throws CollectiveError instead of hanging.
  Duration timeout = std::chrono::seconds(30);
  std::optional<JobId> job_id;  // unset: rank 0 picks one the switch and PS do not have
  // The allreduce's protocol, by its name in the protocol table (atp/cluster/protocols.h): "atp"
  // (towards the PS) or "rina" (docs/rina.md: a ring of the ranks' racks, each whose switch
  // aggregates and holds two or more ranks one member; the PS idles).
  std::string protocol = "atp";
  // ATP's protocol with the switches only forwarding and the PS adding everything: the PS
  // baseline (`algorithm: ps` in a scenario, ATP_ALGORITHM=ps).
  bool in_network_aggregation = true;
  // What rank 0 installs on running daemons hangs on a lease with this time to live, which it
  // keeps alive while the job runs: if rank 0 dies, the daemons remove the job and its hosts
  // within this much time. The daemons clamp it to [1 s, 1 h].
  Duration lease_ttl = std::chrono::seconds(10);
};

// Thrown for an impossible options set or a cluster that refuses the job (one sentence). Other
// failures (timeouts, a rank that never came) are CollectiveError, its base.
class ClusterJobError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

class ClusterJob {
 public:
  // Every rank calls it with the same options, but for its switch. Binds this rank's data socket,
  // meets the others in `store`; rank 0 attaches every rank to its switch and the PS to its own
  // (POST /hosts), plans the job and installs it on every switch on its paths and the PS. Blocks until this rank's
  // Communicator exists. Throws ClusterJobError or CollectiveError; a failure on rank 0 is reported to every rank in
  // the same words.
  static std::unique_ptr<ClusterJob> join(Store& store, int rank, int size, const ClusterJobOptions& options);
  ~ClusterJob();  // close()
  ClusterJob(const ClusterJob&) = delete;
  ClusterJob& operator=(const ClusterJob&) = delete;

  Communicator& communicator() { return *communicator_; }
  JobId job() const { return job_; }
  // Rank 0: the gradient packets each switch of the job's network has aggregated for it so far,
  // by switch name (GET /stats on each): where in-network aggregation happened. Other ranks, and
  // a closed job: empty. Throws control::DaemonError when a switch does not answer.
  std::map<std::string, std::uint64_t> switch_aggregations() const;

  // Ends the job: every rank says it is done; rank 0 waits (at most the timeout, or 10 s) for
  // all of them, then removes the job from the switch and PS, detaches the ranks from the switch
  // and stops a local cluster. Idempotent; never throws (a peer may be gone by then).
  void close();

 private:
  struct Coordinator;  // rank 0's side: the cluster it installed the job on
  ClusterJob(Store& store, int rank, int size, Duration timeout);

  Store& store_;
  int rank_, size_;
  Duration timeout_;
  JobId job_ = 0;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::unique_ptr<Communicator> communicator_;
  bool closed_ = false;
};

}  // namespace atp
