// The "atp" backend's settings from the ATP_* environment variables (docs/pytorch.md): which
// algorithm a group runs and, for each kind of algorithm, what it needs. Every bad setting is one
// sentence through TORCH_CHECK, said before the rank talks to anyone.
#pragma once

#include <cstdint>
#include <string>

#include "atp/cluster/cluster_job.h"
#include "atp/plink/aggregation.h"
#include "atp/scenario/algorithm.h"
#include "atp/time.h"

namespace atp::torch_backend {

// An environment variable, or "" when unset.
std::string env(const char* name);

// ATP_BIND: where the ranks' sockets bind. Unset: with running switches (ATP_SWITCH: ranks on
// hosts of their own, maybe), the address this host reaches MASTER_ADDR from, when that is an
// IPv4 address; else 127.0.0.1.
std::uint32_t bind_ip_from_environment();

// ATP_ALGORITHM: one a group runs (an in-network protocol, or a host collective's schedule), atp
// (the default algorithm) when unset.
const Algorithm& algorithm_from_environment();

// ClusterJobOptions from ATP_TESTBED and ATP_HOST, ATP_LOCAL, ATP_TOPOLOGY, ATP_SWITCH, ATP_PS,
// ATP_SWITCHES, ATP_BIND, ATP_ALGORITHM, ATP_VALUES_PER_PACKET, ATP_SCALE, ATP_RTO_MS; the timeout
// is init_process_group's.
ClusterJobOptions options_from_environment(Duration timeout);

// What a host collective (an algorithm without a protocol: ring, halving_doubling, hierarchical,
// plink, plink_fa) takes from the environment.
struct HostCollectiveOptions {
  std::uint32_t bind_ip = 0;  // ATP_BIND (bind_ip_from_environment), where the ranks listen
  // ATP_GROUPING=probe (plink): the ranks' groups from PLink's probes; else from `rack`.
  bool probe_groups = false;
  // This rank's rack, by a name the ranks of one rack share: ATP_RACK, else ATP_SWITCH; "all" for
  // an algorithm that does not follow racks. Unset (empty) with probe_groups.
  std::string rack;
  int connections = plink::kDefaultLanes;  // ATP_CONNECTIONS: TCP connections per pair of ranks (PLink's lanes)
};

// ATP_BIND, ATP_GROUPING, ATP_CONNECTIONS and ATP_RACK (or ATP_SWITCH) for `algorithm`, checked.
HostCollectiveOptions host_collective_options_from_environment(const Algorithm& algorithm);

}  // namespace atp::torch_backend
