// PLink's AggEngine plan (PLink, MLSys'20, §4.2; docs/plink.md) as a schedule (atp/schedule/):
// two-level hierarchical aggregation (2LHA). The buffer is cut into chunks; each chunk has one
// global master (GM) and, in every group, one local master (LM; in the GM's group, the GM). For a
// chunk, every node sends it to its group's LM, which adds them up (local reduce); each LM sends
// that to the GM, which adds them up (global reduce) and sends the sum back to the LMs (global
// broadcast), which send it to their groups (local broadcast). Masters go round (assign_masters,
// autotune.h) so that by default every node is the GM of 1/n of the chunks (each group hosts them
// in proportion to its size) and the LM duties of a group go round its members; Autotune's shares
// move them. Flat aggregation (FA) is the same plan with one group:
// every node the master of 1/n of the chunks.
//
// What the schedule form gives the paper's engine: the DAG of its Fetch / SendTo / ReceiveFrom /
// Deliver is the steps with their exact data dependencies (chunks never wait for each other), its
// streaming merge is the executor's element-by-element add, and its chunk id is the stream order
// (each ordered pair of nodes carries a chunk's message at most once each way, in chunk order), so
// nothing but the values travels and nothing is acknowledged. Several connections per pair: chunk c
// travels on lane c mod lanes (schedule.h), the paper's load-balanced map from chunks to
// connections, so a chunk that waits for its sum holds back only the chunks of its own lane.
#pragma once

#include <cstddef>

#include "atp/plink/masters.h"
#include "atp/schedule/builders.h"
#include "atp/schedule/schedule.h"

namespace atp::plink {

// The default chunk: 64 KiB of float32 (the paper's range is 16-64 KiB).
inline constexpr std::size_t kDefaultChunkElements = 16384;
// Connections per pair of nodes by default (`connections:` of a scenario's job). The paper used 4
// "to fully utilize VM bandwidth" where its clouds capped each flow; on the netns testbed, which
// caps none, 4 were 0-9% slower than 1 (docs/plink.md), so one.
inline constexpr int kDefaultLanes = 1;

// Rank `rank`'s part of 2LHA over `groups` (a partition of [0, size) into non-empty groups; the
// ranks of a group in any order) for a buffer of `count` elements cut into chunks of
// `chunk_elements` (the last one shorter) over `lanes` connections per pair, every rank taking an
// equal share of the masters. Throws std::invalid_argument (one sentence) for a rank outside
// [0, size), groups that do not partition the ranks, chunks of 0 elements, or lanes outside
// [1, kMaxLanes].
Schedule two_level_schedule(int rank, int size, std::size_t count, const RankGroups& groups,
                            std::size_t chunk_elements = kDefaultChunkElements, int lanes = kDefaultLanes);
// The same with the masters in proportion to `shares` (assign_masters, autotune.h: Autotune's
// plans); throws as assign_masters does for shares that do not fit.
Schedule two_level_schedule(int rank, int size, std::size_t count, const RankGroups& groups, const MasterShares& shares,
                            std::size_t chunk_elements = kDefaultChunkElements, int lanes = kDefaultLanes);

// FA's groups: one, of every rank in order.
RankGroups one_group(int size);

// FA: two_level_schedule with every rank in one group.
Schedule flat_aggregation_schedule(int rank, int size, std::size_t count,
                                   std::size_t chunk_elements = kDefaultChunkElements, int lanes = kDefaultLanes);

}  // namespace atp::plink
