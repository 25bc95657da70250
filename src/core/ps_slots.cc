// The PS's slots: which workers a packet speaks for and which a slot holds, the pool of slots
// by sequence number, and forgetting the slots every worker has the result of.
#include <algorithm>
#include <bit>

#include "ps_impl.h"

namespace atp {

bool PsEndpoint::Impl::decode_contributors(const Header& h, Contributors& c) const {
  if (h.node == 0 || h.node >= nodes.size()) return false;
  const TreeNode& n = nodes[h.node];
  c.run_count = 0;
  c.worker_count = 0;
  if (n.children.empty()) {  // a worker's own packet
    if (h.bitmap != 1 || h.fan_in != 1) return false;
    c.runs[c.run_count++] = {n.first_worker, 1};
    c.worker_count = 1;
    return true;
  }
  if (h.fan_in != n.children.size() || h.bitmap == 0 || (h.bitmap & ~whole_bitmap(h.fan_in)) != 0) return false;
  for (std::uint32_t rest = h.bitmap; rest != 0; rest &= rest - 1) {
    const TreeNode& child = nodes[n.children[static_cast<std::size_t>(std::countr_zero(rest))]];
    c.runs[c.run_count++] = {child.first_worker, child.workers};
    c.worker_count += child.workers;
  }
  return true;
}

namespace {

// Calls f(word index, mask) for the words of `bits` that ids [first, first + count) fall in.
template <class F>
void for_words(std::uint32_t first, std::uint32_t count, F f) {
  const std::uint32_t end = first + count;
  for (std::uint32_t i = first; i < end;) {
    const std::uint32_t word = i / 64, low = i % 64;
    const std::uint32_t take = std::min<std::uint32_t>(64 - low, end - i);
    const std::uint64_t mask = (take == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << take) - 1)) << low;
    f(word, mask);
    i += take;
  }
}

}  // namespace

bool PsEndpoint::Impl::overlaps(const Slot& slot, const Contributors& c) const {
  bool any = false;
  for (std::size_t r = 0; r < c.run_count && !any; ++r) {
    for_words(c.runs[r].first, c.runs[r].second,
              [&](std::uint32_t word, std::uint64_t mask) { any = any || (slot.members[word] & mask) != 0; });
  }
  return any;
}

void PsEndpoint::Impl::merge_members(Slot& slot, const Contributors& c) {
  for (std::size_t r = 0; r < c.run_count; ++r) {
    for_words(c.runs[r].first, c.runs[r].second,
              [&](std::uint32_t word, std::uint64_t mask) { slot.members[word] |= mask; });
  }
  slot.missing_workers -= c.worker_count;  // overlap was ruled out first: cannot underflow
}

void PsEndpoint::Impl::note_worker_seen(std::uint32_t worker, Seq seq) {
  if (!worker_seen[worker]) {
    worker_seen[worker] = 1;
    highest_seen[worker] = seq;
    ++workers_seen;
    highest_changed = true;
  } else if (seq_before(highest_seen[worker], seq)) {
    highest_seen[worker] = seq;
    highest_changed = true;
  }
}

// Every contributor of a packet has sent `seq`, so it holds the results of every seq before
// seq - window: the evidence that lets the PS forget old slots.
void PsEndpoint::Impl::note_seen(Seq seq, const Contributors& c) {
  for (std::size_t r = 0; r < c.run_count; ++r) {
    for (std::uint32_t w = c.runs[r].first; w < c.runs[r].first + c.runs[r].second; ++w) note_worker_seen(w, seq);
  }
}

ps_detail::Slot* PsEndpoint::Impl::find_slot(Seq seq) {
  const std::uint32_t index = ring[seq & (ring.size() - 1)];
  return index == kNoSlot ? nullptr : &pool[index];
}

// Takes a pooled slot (allocating only while the pool grows towards its bound of 2 x window + 1).
ps_detail::Slot& PsEndpoint::Impl::create_slot(Seq seq, std::uint32_t aggregator_index, std::uint16_t round_shape,
                                               std::int16_t scale_exponent) {
  std::uint32_t index;
  if (!free_slots.empty()) {
    index = free_slots.back();
    free_slots.pop_back();
  } else {
    index = static_cast<std::uint32_t>(pool.size());
    Slot& fresh = pool.emplace_back();  // within the capacity reserved: never reallocates
    fresh.members.resize(ps_detail::words_for(num_workers));
    fresh.sums.resize(config.values_per_packet);
  }
  Slot& slot = pool[index];
  slot.seq = seq;
  slot.state = SlotState::kAggregating;
  slot.ecn = false;
  slot.recovered = false;
  slot.collision = false;
  slot.saturated = false;
  slot.float_result = false;
  slot.round_shape = round_shape;
  slot.scale_exponent = scale_exponent;
  slot.exponent_mismatch = false;
  slot.magnitude = kNoMagnitude;
  slot.aggregator_index = aggregator_index;
  slot.collided_index = 0;
  slot.offered_aggregator = 0;
  slot.missing_workers = num_workers;
  slot.opened = now;
  slot.requested = kNever;
  std::fill(slot.members.begin(), slot.members.end(), std::uint64_t{0});
  std::fill(slot.sums.begin(), slot.sums.end(), std::int64_t{0});
  ring[seq & (ring.size() - 1)] = index;
  ++live_slots;
  return slot;
}

// Recomputes min over workers(highest seen) - window. False while some worker was never seen
// (nothing can be complete then, so nothing may be forgotten).
bool PsEndpoint::Impl::refresh_forget_limit() {
  if (num_workers == 0 || workers_seen < num_workers) return false;
  if (!have_forget_limit || highest_changed) {
    Seq lowest = highest_seen[0];
    for (const Seq highest : highest_seen) {
      if (seq_before(highest, lowest)) lowest = highest;
    }
    forget_limit = lowest - window;
    have_forget_limit = true;
    highest_changed = false;
  }
  return true;
}

// Moves `base` over sequence numbers every worker already has the result of: completed slots
// (released to the pool) and positions never used (e.g. fragments of another PS shard). Stops
// at the first fragment still in progress, so memory is bounded by the window even when a
// worker stalls. The limit only moves forward, so a cached one is re-read (O(workers), at most
// once per packet) only when it blocks.
void PsEndpoint::Impl::forget_old_slots() {
  const std::size_t mask = ring.size() - 1;
  for (;;) {
    const std::uint32_t index = ring[base & mask];
    if (index != kNoSlot && pool[index].state != SlotState::kComplete) return;
    if (!(have_forget_limit && seq_before(base, forget_limit))) {
      if (!refresh_forget_limit() || !seq_before(base, forget_limit)) return;
    }
    if (index != kNoSlot) {
      ring[base & mask] = kNoSlot;
      free_slots.push_back(index);
      --live_slots;
    }
    ++base;
  }
}

}  // namespace atp
