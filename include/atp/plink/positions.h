// The ground truth PLink's PAIA is measured against (PLink, MLSys'20, §5.5; docs/plink.md): each
// host's position, its chain of places from the widest down, as a scenario's topology gives it.
// The paper's chain is (region, datacenter, cluster, row, rack, host); here it is the switches from
// the topology's centre down to the host's ToR, then the host. No I/O.
#pragma once

#include <string>
#include <vector>

#include "atp/plan/plan.h"

namespace atp::plink {

// Per host of `topology` (host order): [centre, ..., its ToR, the host]. The centre is the switch
// whose farthest switch is nearest (ties: the first listed); the chain from it down is a
// breadth-first tree over the switch links in the order they are listed (ties: the link listed
// first, as routes take them). On a tree of switches that is the tree hung from its centre, so two
// hosts share a longer prefix the lower their lowest common switch is. Throws std::invalid_argument
// when the switches are not connected or a host names no switch of the topology.
std::vector<std::vector<std::string>> host_positions(const Topology& topology);

}  // namespace atp::plink
