// The host collectives of the "atp" backend (ATP_ALGORITHM=ring, halving_doubling, hierarchical,
// plink, plink_fa): the ranks meet in the group's store, agree on their racks (named, or grouped
// by PLink's probes, which they run and exchange here) and join one TcpScheduleAllreduce.
#pragma once

#include <memory>

#include "atp/collectives/allreduce.h"
#include "atp/collectives/store.h"
#include "atp/scenario/algorithm.h"
#include "atp/time.h"
#include "options.h"

namespace atp::torch_backend {

// Rank `rank` of `size` joins `algorithm`'s allreduce over TCP between the ranks, set up with
// `options`, meeting the others in `store` within `timeout`. Throws CollectiveError (the store,
// the connections) or std::invalid_argument (probe times another rank sent that do not read).
std::unique_ptr<Allreduce> join_host_collective(const Algorithm& algorithm, const HostCollectiveOptions& options,
                                                Store& store, int rank, int size, Duration timeout);

}  // namespace atp::torch_backend
