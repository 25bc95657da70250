// The allreduce algorithms as schedule builders (schedule.h): one function per algorithm, each
// giving one rank's steps. Every rank of a job calls the same builder with the same size and count.
// Bad input (a rank outside [0, size), size < 1, groups that do not partition the ranks) throws
// std::invalid_argument with one sentence.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "atp/schedule/schedule.h"

namespace atp {

// The bandwidth-optimal ring (the paper's host-based baseline): chunk c is elements
// [count*c/n, count*(c+1)/n); step t (0 <= t < 2(n-1)) sends chunk (rank-t) mod n to rank+1 and
// receives chunk (rank-t-1) mod n from rank-1, added during the reduce-scatter (t < n-1) and
// copied during the allgather. Each rank sends 2(n-1) chunks, about 2(n-1)/n of the buffer.
Schedule ring_allreduce_schedule(int rank, int size, std::size_t count);

// Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by recursive
// doubling, over the largest power of two p <= size; log2(p) rounds each, about 2(p-1)/p of the
// buffer per rank. When size is no power of two, the first 2(size-p) ranks pair up first: each
// even one sends its whole buffer to the odd one after it, which takes part in its place, and
// gets the whole sum back at the end (the usual extra pre- and post-step).
Schedule halving_doubling_allreduce_schedule(int rank, int size, std::size_t count);

// Ranks in groups: a job's racks (the workers under one switch, in rank order; racks in the order
// of their first rank), or any partition of [0, size) into non-empty groups.
using RankGroups = std::vector<std::vector<int>>;

// Hierarchical allreduce (H-AR, as Horovod and NCCL run it across nodes): a ring reduce-scatter
// inside each rack, a ring allreduce across racks of each rack-summed part among the members that
// hold it (one per rack), then a ring allgather inside each rack. The buffer is cut into as many
// slots as the largest rack has members; in a rack of L members, slot i is in class i mod L and
// each member holds one class (so with equal racks of L members each sends about
// 2(L-1)/L + 2(R-1)/(R L) of the buffer for R racks). `racks` must partition [0, size).
Schedule hierarchical_allreduce_schedule(int rank, int size, std::size_t count, const RankGroups& racks);

// For builders (here and in an algorithm's own folder): a schedule with no steps yet, after
// checking rank and size; and each rank's group, after checking that `groups` partition
// [0, size) into non-empty groups. Both throw std::invalid_argument with one sentence that starts
// with `what` ("hierarchical allreduce schedule: rank 3 is in no group; ...").
Schedule empty_schedule(std::string_view what, int rank, int size, std::size_t count);
std::vector<int> group_of_rank(std::string_view what, const RankGroups& groups, int size);

}  // namespace atp
