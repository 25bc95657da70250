// 2LHA as a schedule (include/atp/plink/aggregation.h). schedule_append gives each step exactly
// its data hazards, so one chunk's steps never wait for another's; the order of the list is what
// the streams between ranks follow (see two_level_schedule).
#include "atp/plink/aggregation.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace atp::plink {

namespace {

// With enough chunks every rank meets every other on every lane (masters go round); with fewer,
// or none, some pairs exchange nothing. A transport connects the channels of the schedule without
// elements (schedule.h), so every lane to every other rank is named, by an empty step each way
// where no chunk names it: each way, as every channel that carries a chunk does (a member's send
// to its LM comes back from it on the chunk's lane, an LM's to the GM too), since a transport
// may frame each direction that has a step, empty or not.
void name_every_channel(Schedule& s, int rank, int size, int lanes) {
  const std::vector<int> named = schedule_channels(s);
  for (int l = 0; l < lanes; ++l) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank && !std::binary_search(named.begin(), named.end(), channel(s, peer, l))) {
        schedule_append(s, StepKind::kSend, peer, ElementRange{}, l);
        schedule_append(s, StepKind::kReceiveCopy, peer, ElementRange{}, l);
      }
    }
  }
}

}  // namespace

Schedule two_level_schedule(int rank, int size, std::size_t count, const RankGroups& groups, std::size_t chunk_elements,
                            int lanes) {
  return two_level_schedule(rank, size, count, groups, equal_shares(size), chunk_elements, lanes);
}

Schedule two_level_schedule(int rank, int size, std::size_t count, const RankGroups& groups, const MasterShares& shares,
                            std::size_t chunk_elements, int lanes) {
  constexpr const char* kWhat = "PLink two-level schedule";
  Schedule s = empty_schedule(kWhat, rank, size, count);
  const std::vector<int> group_of = group_of_rank(kWhat, groups, size);
  if (chunk_elements == 0) throw std::invalid_argument(std::string(kWhat) + ": chunks must hold at least 1 element");
  if (lanes < 1 || lanes > kMaxLanes)
    throw std::invalid_argument(std::string(kWhat) + ": " + std::to_string(lanes) +
                                " connections per pair is not in [1, " + std::to_string(kMaxLanes) + "]");
  s.lanes = lanes;
  RankGroups members = groups;
  for (auto& g : members) std::sort(g.begin(), g.end());
  const auto mine = static_cast<std::size_t>(group_of[static_cast<std::size_t>(rank)]);

  // Phase by phase, chunk by chunk within a phase. Between two ranks the messages then go in
  // (phase, chunk) order at both ends. Chunk by chunk with the phases inside (the order the DAG
  // suggests) put a master's broadcast of chunk c ahead of its contributions to chunks c' > c in
  // the same stream, where it waited for chunk c's sum: every stream stalled in turn, and the plan
  // ran at a third of the ring's speed on the same links (netns, 8 workers). Phase by phase, the
  // contributions, which are ready at once, go first and keep every link busy.
  const std::size_t chunks = (count + chunk_elements - 1) / chunk_elements;
  const auto range = [&](std::size_t c) {
    return ElementRange{c * chunk_elements, std::min(count, (c + 1) * chunk_elements)};
  };
  const auto lane = [&](std::size_t c) { return static_cast<int>(c % static_cast<std::size_t>(lanes)); };
  const auto append = [&](StepKind kind, int peer, std::size_t c) {
    schedule_append(s, kind, peer, range(c), lane(c));
  };
  const MasterAssignment masters = assign_masters(groups, shares, chunks);
  const auto gm = [&](std::size_t c) { return masters.gm[c]; };
  const auto lm = [&](std::size_t h, std::size_t c) { return masters.lm[c][h]; };
  // 1. Local reduce: every member to its group's LM, which adds its members' values.
  for (std::size_t c = 0; c < chunks; ++c) {
    if (rank != lm(mine, c)) {
      append(StepKind::kSend, lm(mine, c), c);
    } else {
      for (const int m : members[mine])
        if (m != rank) append(StepKind::kReceiveAdd, m, c);
    }
  }
  // 2. Global reduce: the LMs to the GM, which adds the groups' sums.
  for (std::size_t c = 0; c < chunks; ++c) {
    if (rank == gm(c)) {
      for (std::size_t h = 0; h < members.size(); ++h)
        if (h != mine) append(StepKind::kReceiveAdd, lm(h, c), c);
    } else if (rank == lm(mine, c)) {
      append(StepKind::kSend, gm(c), c);
    }
  }
  // 3. Global broadcast: the sum from the GM to the other groups' LMs.
  for (std::size_t c = 0; c < chunks; ++c) {
    if (rank == gm(c)) {
      for (std::size_t h = 0; h < members.size(); ++h)
        if (h != mine) append(StepKind::kSend, lm(h, c), c);
    } else if (rank == lm(mine, c)) {
      append(StepKind::kReceiveCopy, gm(c), c);
    }
  }
  // 4. Local broadcast: from each LM to its group.
  for (std::size_t c = 0; c < chunks; ++c) {
    if (rank == lm(mine, c)) {
      for (const int m : members[mine])
        if (m != rank) append(StepKind::kSend, m, c);
    } else {
      append(StepKind::kReceiveCopy, lm(mine, c), c);
    }
  }
  name_every_channel(s, rank, size, lanes);
  return s;
}

RankGroups one_group(int size) {
  RankGroups one(1);
  for (int r = 0; r < size; ++r) one[0].push_back(r);
  return one;
}

Schedule flat_aggregation_schedule(int rank, int size, std::size_t count, std::size_t chunk_elements, int lanes) {
  return two_level_schedule(rank, size, count, one_group(size), chunk_elements, lanes);
}

}  // namespace atp::plink
