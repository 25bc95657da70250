// The masters of PLink's 2LHA plan (aggregation.h; docs/plink.md): how much master work each rank
// takes, as weights, and which rank masters each chunk under them. Autotune (autotune.h) moves the
// weights; the runners send them between rounds (no Eigen here, so any layer can carry a plan).
#pragma once

#include <cstddef>
#include <vector>

#include "atp/schedule/builders.h"

namespace atp::plink {

// How much master work each rank takes, as weights: gm[r] its part of the chunks' global masters
// (against every rank's), lm[r] its part of its group's local-master duties (against its group's
// members'). Non-negative and finite; every group needs a member with a positive lm weight and
// some rank a positive gm weight.
struct MasterShares {
  std::vector<double> gm, lm;
  friend bool operator==(const MasterShares&, const MasterShares&) = default;
};

// Every rank the same weight: the plan of two_level_schedule without shares.
MasterShares equal_shares(int size);

// Which rank masters each chunk: its GM, and per group its LM (in the GM's group, the GM).
struct MasterAssignment {
  std::vector<int> gm;               // [chunk]
  std::vector<std::vector<int>> lm;  // [chunk][group], groups in the order given
};

// The masters of `chunks` chunks by smooth weighted round robin (each pick goes to the rank
// furthest behind its share, ties to the first in group order): a rank of weight w gets
// w / total of the chunks, give or take one, spread evenly through them rather than in a block,
// so every rank's master work runs at once. The GMs are drawn over the ranks in group order (each
// group's members ascending), each group's LMs over its members for every chunk. Equal weights
// give the GMs in group order by turns and each group's LMs by turns. Throws std::invalid_argument
// (one sentence) for shares that do not fit the groups.
MasterAssignment assign_masters(const RankGroups& groups, const MasterShares& shares, std::size_t chunks);

}  // namespace atp::plink
