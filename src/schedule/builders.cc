// The allreduce schedule builders of builders.h. Dependencies come from schedule_append (the data
// hazards), so a builder only lists its steps in an order that matches its peers' streams.
#include "atp/schedule/builders.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace atp {
namespace {

ElementRange whole(std::size_t count) { return {0, count}; }

// The ring among `members` (ranks, in ring order) as seen by members[index], over `range` of the buffer.
void append_ring(Schedule& s, const std::vector<int>& members, std::size_t index, ElementRange range) {
  const std::size_t n = members.size();
  if (n < 2) return;
  const int next = members[(index + 1) % n];
  const int prev = members[(index + n - 1) % n];
  const auto chunk = [&](std::size_t c) {
    return ElementRange{range.begin + range.size() * c / n, range.begin + range.size() * (c + 1) / n};
  };
  for (std::size_t t = 0; t < 2 * (n - 1); ++t) {
    schedule_append(s, StepKind::kSend, next, chunk((index + 2 * n - t) % n));
    schedule_append(s, t < n - 1 ? StepKind::kReceiveAdd : StepKind::kReceiveCopy, prev,
                    chunk((index + 2 * n - t - 1) % n));
  }
}

}  // namespace

Schedule empty_schedule(std::string_view what, int rank, int size, std::size_t count) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(rank) + " is not in [0, " +
                                std::to_string(size) + "); size must be at least 1");
  return Schedule{.rank = rank, .size = size, .count = count, .lanes = 1, .steps = {}};
}

std::vector<int> group_of_rank(std::string_view what, const RankGroups& groups, int size) {
  const std::string prefix = std::string(what) + ": ";
  if (groups.empty()) throw std::invalid_argument(prefix + "no groups; the groups must partition the ranks");
  std::vector<int> group_of(static_cast<std::size_t>(size), -1);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) throw std::invalid_argument(prefix + "group " + std::to_string(g) + " is empty");
    for (const int r : groups[g]) {
      if (r < 0 || r >= size)
        throw std::invalid_argument(prefix + "rank " + std::to_string(r) + " of group " + std::to_string(g) +
                                    " is not in [0, " + std::to_string(size) + ")");
      if (const int first = group_of[static_cast<std::size_t>(r)]; first != -1)
        throw std::invalid_argument(prefix + "rank " + std::to_string(r) + " is in group " + std::to_string(first) +
                                    " and again in group " + std::to_string(g) +
                                    "; the groups must partition the ranks");
      group_of[static_cast<std::size_t>(r)] = static_cast<int>(g);
    }
  }
  for (int r = 0; r < size; ++r)
    if (group_of[static_cast<std::size_t>(r)] == -1)
      throw std::invalid_argument(prefix + "rank " + std::to_string(r) +
                                  " is in no group; the groups must partition the ranks");
  return group_of;
}

Schedule ring_allreduce_schedule(int rank, int size, std::size_t count) {
  Schedule s = empty_schedule("ring allreduce schedule", rank, size, count);
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) members[static_cast<std::size_t>(i)] = i;
  append_ring(s, members, static_cast<std::size_t>(rank), whole(count));
  return s;
}

Schedule halving_doubling_allreduce_schedule(int rank, int size, std::size_t count) {
  Schedule s = empty_schedule("halving-doubling allreduce schedule", rank, size, count);
  int p = 1;
  while (p * 2 <= size) p *= 2;
  const int extra = size - p;
  // The first 2*extra ranks pair up: the even one folds into the odd one and waits for the sum.
  if (rank < 2 * extra && rank % 2 == 0) {
    schedule_append(s, StepKind::kSend, rank + 1, whole(count));
    schedule_append(s, StepKind::kReceiveCopy, rank + 1, whole(count));
    return s;
  }
  if (rank < 2 * extra) schedule_append(s, StepKind::kReceiveAdd, rank - 1, whole(count));
  const int me = rank < 2 * extra ? rank / 2 : rank - extra;  // index among the p taking part
  const auto real = [extra](int index) { return index < extra ? 2 * index + 1 : index + extra; };

  // Reduce-scatter by recursive halving: each round keeps half of the range and adds the partner's
  // copy of it, giving the other half away; the range before each round is kept for the allgather.
  ElementRange mine = whole(count);
  std::vector<ElementRange> before;
  for (int distance = p / 2; distance >= 1; distance /= 2) {
    const int partner = real(me ^ distance);
    const std::size_t middle = mine.begin + mine.size() / 2;
    const ElementRange lower{mine.begin, middle}, upper{middle, mine.end};
    const bool keep_upper = (me & distance) != 0;
    schedule_append(s, StepKind::kSend, partner, keep_upper ? lower : upper);
    schedule_append(s, StepKind::kReceiveAdd, partner, keep_upper ? upper : lower);
    before.push_back(mine);
    mine = keep_upper ? upper : lower;
  }
  // Allgather by recursive doubling, the rounds in reverse: swap halves with the same partner.
  for (int distance = 1; distance < p; distance *= 2) {
    const int partner = real(me ^ distance);
    const ElementRange parent = before.back();
    before.pop_back();
    const ElementRange theirs =
        mine.begin == parent.begin ? ElementRange{mine.end, parent.end} : ElementRange{parent.begin, mine.begin};
    schedule_append(s, StepKind::kSend, partner, mine);
    schedule_append(s, StepKind::kReceiveCopy, partner, theirs);
    mine = parent;
  }
  if (rank < 2 * extra) schedule_append(s, StepKind::kSend, rank - 1, whole(count));
  return s;
}

Schedule hierarchical_allreduce_schedule(int rank, int size, std::size_t count, const RankGroups& racks) {
  Schedule s = empty_schedule("hierarchical allreduce schedule", rank, size, count);
  const std::vector<int> rack_of = group_of_rank("hierarchical allreduce schedule", racks, size);
  const std::vector<int>& rack = racks[static_cast<std::size_t>(rack_of[static_cast<std::size_t>(rank)])];
  const std::size_t local = static_cast<std::size_t>(std::find(rack.begin(), rack.end(), rank) - rack.begin());

  // The buffer is cut into as many slots as the largest rack has members. In a rack of L members,
  // slot i is in class i mod L; the ring's reduce-scatter leaves member j with class (j+1) mod L
  // summed over the rack (one slot each where racks are equal in size, as Horovod and NCCL have it).
  std::size_t slots = 0;
  for (const auto& r : racks) slots = std::max(slots, r.size());
  const auto slot = [&](std::size_t i) { return ElementRange{count * i / slots, count * (i + 1) / slots}; };
  const std::size_t l = rack.size();
  const auto each_in_class = [&](std::size_t c, auto f) {
    for (std::size_t i = c % l; i < slots; i += l) f(slot(i));
  };
  const auto holder = [](const std::vector<int>& members, std::size_t i) {
    const std::size_t n = members.size();
    return members[(i % n + n - 1) % n];
  };
  const int next = rack[(local + 1) % l], prev = rack[(local + l - 1) % l];

  // 1. Reduce-scatter inside the rack: the ring over the classes.
  for (std::size_t t = 0; l > 1 && t < l - 1; ++t) {
    each_in_class(local + 2 * l - t, [&](ElementRange r) { schedule_append(s, StepKind::kSend, next, r); });
    each_in_class(local + 2 * l - t - 1, [&](ElementRange r) { schedule_append(s, StepKind::kReceiveAdd, prev, r); });
  }
  // 2. Allreduce across racks: each slot's holders, one per rack in rack order, run the ring over it.
  const std::size_t my_rack = static_cast<std::size_t>(rack_of[static_cast<std::size_t>(rank)]);
  for (std::size_t i = (local + 1) % l; i < slots; i += l) {
    std::vector<int> holders;
    for (const auto& r : racks) holders.push_back(holder(r, i));
    append_ring(s, holders, my_rack, slot(i));
  }
  // 3. Allgather inside the rack: the ring again, copying the finished classes.
  for (std::size_t t = 0; l > 1 && t < l - 1; ++t) {
    each_in_class(local + 1 + 2 * l - t, [&](ElementRange r) { schedule_append(s, StepKind::kSend, next, r); });
    each_in_class(local + 2 * l - t, [&](ElementRange r) { schedule_append(s, StepKind::kReceiveCopy, prev, r); });
  }
  return s;
}

}  // namespace atp
