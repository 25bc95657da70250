// The ATP parameter server endpoint: a per-sequence-number store of <contributors, sums> held in
// a ring bounded by the workers' window, the int32 and float32 completion paths, and rehashing.
#include "atp/ps.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "atp/aggregator_index.h"
#include "atp/fixed_point.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

// What malloc keeps per heap block besides the bytes asked for (glibc: 8-16 B), for the bound.
constexpr std::uint64_t kHeapBlockOverhead = 16;
constexpr std::uint32_t kNoSlot = std::numeric_limits<std::uint32_t>::max();

enum class SlotState : std::uint8_t {
  kAggregating,       // collecting int32 gradients (individual or partially aggregated)
  kCollectingFloats,  // saturated: the overflow request went out, collecting float32 fragments
  kComplete,          // the result went out; kept to answer late resends until forgotten
  // Contributions with different round_shape fields: the workers all-reduce tensors of different
  // sizes. The mismatch notice went out; terminal (never completes, never forgotten, so every
  // later packet for the seq gets the notice again).
  kShapeMismatch,
};

// What the PS knows about one fragment (one sequence number). Slots are pooled: the vectors are
// sized once when the pool entry is first made and reused for every later sequence number.
struct Slot {
  Seq seq = 0;
  SlotState state = SlotState::kAggregating;
  bool ecn = false;  // OR of the ECN flags of the packets merged (copied into the result)
  // Some merged packet was a worker's retransmission (or a partial aggregate a resend flushed), or
  // one came before completion and was dropped as an overlap: the result's `resend` flag, so that
  // no worker takes its timing for a round trip (Karn's rule; a worker's wait for others is none).
  bool recovered = false;
  bool collision = false;         // some merged packet had the collision flag
  bool saturated = false;         // a contributed value was INT32_MAX or INT32_MIN
  bool float_result = false;      // kComplete via the float32 path: `sums` hold double sums
  std::uint16_t round_shape = 0;  // of the first merged packet: every other must carry the same
  // Scale per fragment: the first merged int packet's exponent (one at another, or a sum that
  // would not hold the largest value to float32's precision, sends the fragment to the float32
  // path), and the largest magnitude of any contribution (int or float32), which picks the
  // exponent of the fragment's next round.
  std::int16_t scale_exponent = 0;
  bool exponent_mismatch = false;
  std::int16_t magnitude = kNoMagnitude;
  std::uint32_t aggregator_index = 0;    // index of the first merged packet: the ack frees it
  std::uint32_t collided_index = 0;      // index of the first packet with the collision flag
  std::uint16_t offered_aggregator = 0;  // and the aggregator its switch offered (Header's)
  std::uint32_t missing_workers = 0;     // workers not yet in `members` (int or float phase)
  // When its first packet came, and when the PS last asked the missing workers for a resend
  // (kNever: not yet); see PsEndpoint::Impl::request_resends.
  Time opened{};
  Time requested = kNever;
  std::vector<std::uint64_t> members;  // a bit per worker (its id: PsEndpoint::Impl::nodes) merged so far
  // Int phase: exact sums of the quantized values. Float phase (the int sums are of no use any
  // more): the bit patterns of the double sums of the float32 values, so that a slot holds 8 B
  // per value whatever its phase (the PS's memory bound, ps_job_memory_bound, counts on it).
  std::vector<std::int64_t> sums;
};

double float_sum(const Slot& slot, std::size_t i) { return std::bit_cast<double>(slot.sums[i]); }

// A contribution that loss recovery sent: a worker's resend, or a partial aggregate a resend
// flushed from a switch. A collision's forwarded packet carries the resend flag too, but came on
// time: not recovery.
bool recovery(const Header& h) { return h.resend && !h.collision; }

// A node of the job's aggregation tree towards this PS (PsConfig::tree). Workers get ids 0..n-1
// in depth-first order, so the workers below any node are one run of ids.
struct TreeNode {
  std::vector<std::uint16_t> children;  // in slot order (increasing node id)
  std::uint32_t first_worker = 0;
  std::uint32_t workers = 0;
};

// The workers a gradient packet speaks for: one run of ids per child in its bitmap (a worker's
// own packet: one run of one).
struct Contributors {
  std::array<std::pair<std::uint32_t, std::uint32_t>, 32> runs{};  // (first id, count)
  std::size_t run_count = 0;
  std::uint32_t worker_count = 0;
};

std::uint64_t words_for(std::uint64_t workers) { return (workers + 63) / 64; }

}  // namespace

std::uint64_t ps_job_memory_bound(const PsConfig& config) {
  const std::uint64_t window = std::max<std::uint32_t>(config.max_window_seqs, 1);
  const std::uint64_t slots = 2 * window + 1;      // the pool's bound: every stored seq is in [base, base + 2 x window]
  const std::uint64_t nodes = config.tree.size();  // workers are fewer
  const std::uint64_t per_slot = sizeof(Slot) + sizeof(std::uint32_t) +                           // pool and free list
                                 words_for(nodes) * sizeof(std::uint64_t) + kHeapBlockOverhead +  // members
                                 config.values_per_packet * sizeof(std::int64_t) + kHeapBlockOverhead;  // sums
  const std::uint64_t per_worker = sizeof(Seq) + 1 + sizeof(Address);  // highest_seen, worker_seen, address
  const std::uint64_t per_node = sizeof(TreeNode) + sizeof(std::uint16_t) + kHeapBlockOverhead;  // nodes, children
  return std::bit_ceil(slots) * sizeof(std::uint32_t) + slots * per_slot + nodes * (per_worker + per_node) +
         packet_size(config.values_per_packet);
}

struct PsEndpoint::Impl {
  explicit Impl(PsConfig c) : config(std::move(c)) {
    if (const std::optional<std::string> bad = ps_config_error(config)) throw std::invalid_argument(*bad);
    nodes.resize(config.tree.size());
    for (std::size_t i = 1; i < config.tree.size(); ++i) {
      nodes[config.tree[i]].children.push_back(static_cast<std::uint16_t>(i));
    }
    // Worker ids depth first: a node's workers are the run from its first, as many as its
    // children have (parents come before their children, so a pass from the back counts them).
    for (std::size_t i = nodes.size(); i-- > 1;) {
      if (nodes[i].children.empty()) nodes[i].workers = 1;
      nodes[config.tree[i]].workers += nodes[i].workers;
    }
    // Each node's children take consecutive runs of its own, in id order (parents first).
    for (TreeNode& node : nodes) {
      std::uint32_t next = node.first_worker;
      for (const std::uint16_t child : node.children) {
        nodes[child].first_worker = next;
        next += nodes[child].workers;
      }
    }
    num_workers = nodes[0].workers;
    window = std::clamp<std::uint32_t>(config.max_window_seqs, 1, kMaxWindowSeqs);
    ring.assign(std::bit_ceil(2 * window + 1), kNoSlot);
    // Reserved whole (address space; pages are touched as slots are made), so that the pool
    // never reallocates: ps_job_memory_bound counts it at its bound, not at twice it.
    pool.reserve(2 * window + 1);
    free_slots.reserve(2 * window + 1);
    highest_seen.assign(num_workers, 0);
    worker_seen.assign(num_workers, 0);
    packet_buffer.resize(packet_size(config.values_per_packet));
    // PsConfig::workers is in the order of the workers' leaf nodes; ids go depth first.
    if (config.workers.size() == num_workers) {
      std::size_t k = 0;
      address.assign(num_workers, 0);
      for (const TreeNode& node : nodes) {
        if (&node != &nodes[0] && node.children.empty()) address[node.first_worker] = config.workers[k++];
      }
    }
    std::sort(config.workers.begin(), config.workers.end());  // for is_worker's binary search
  }

  bool is_worker(Address a) const {
    return config.workers.empty() || std::binary_search(config.workers.begin(), config.workers.end(), a);
  }

  void on_packet(const Header& h, std::span<const std::uint8_t> packet, PacketSink& out);

  bool decode_contributors(const Header& h, Contributors& c) const;
  bool overlaps(const Slot& slot, const Contributors& c) const;
  void merge_members(Slot& slot, const Contributors& c);
  void note_seen(Seq seq, const Contributors& c);
  void note_worker_seen(std::uint32_t worker, Seq seq);

  Slot* find_slot(Seq seq);
  Slot& create_slot(Seq seq, std::uint32_t aggregator_index, std::uint16_t round_shape, std::int16_t scale_exponent);
  void forget_old_slots();
  bool refresh_forget_limit();

  void merge_int(Slot& slot, const Header& h, std::span<const std::uint8_t> packet, const Contributors& c,
                 PacketSink& out);
  void merge_float(Slot& slot, const Header& h, std::span<const std::uint8_t> packet, const Contributors& c,
                   PacketSink& out);
  void complete_int(Slot& slot, PacketSink& out);
  void fail_round_shape(Slot& slot, PacketSink& out);
  void send_parameter(const Slot& slot, Address dst, PacketSink& out);
  void request_resends(Slot& slot, PacketSink& out);
  // Where a fragment that collided moves (its result's bitmap).
  std::uint32_t moved_index(const Slot& slot) const;

  PsConfig config;
  PsStats stats;

  std::vector<TreeNode> nodes;  // the tree, by node id (0: this PS)
  std::uint32_t num_workers = 0;
  std::vector<Address> address;  // by worker id; empty when PsConfig::workers does not name them all
  Time now{};                    // of the packet being handled

  std::uint32_t window = 1;  // max_window_seqs, clamped: sequence numbers
  // ring[seq % ring.size()] = index into `pool` of the slot for seq, or kNoSlot. Every stored
  // seq lies in [base, base + 2 x window], so no two share a ring entry.
  std::vector<std::uint32_t> ring;
  std::vector<Slot> pool;
  std::vector<std::uint32_t> free_slots;  // indices into `pool` ready for reuse
  std::size_t live_slots = 0;
  bool have_base = false;  // set by the first accepted packet
  Seq base = 0;            // oldest sequence number still accepted; older ones were forgotten

  // Per worker (global id): highest seq seen from it (serial order), and whether any was seen.
  std::vector<Seq> highest_seen;
  std::vector<std::uint8_t> worker_seen;
  std::uint32_t workers_seen = 0;
  bool highest_changed = false;  // since forget_limit was last computed
  bool have_forget_limit = false;
  Seq forget_limit = 0;  // min over workers of highest_seen - window: completed slots before it go

  std::vector<std::uint8_t> packet_buffer;  // parameter packets are built here (no allocation)
};

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

Slot* PsEndpoint::Impl::find_slot(Seq seq) {
  const std::uint32_t index = ring[seq & (ring.size() - 1)];
  return index == kNoSlot ? nullptr : &pool[index];
}

// Takes a pooled slot (allocating only while the pool grows towards its bound of 2 x window + 1).
Slot& PsEndpoint::Impl::create_slot(Seq seq, std::uint32_t aggregator_index, std::uint16_t round_shape,
                                    std::int16_t scale_exponent) {
  std::uint32_t index;
  if (!free_slots.empty()) {
    index = free_slots.back();
    free_slots.pop_back();
  } else {
    index = static_cast<std::uint32_t>(pool.size());
    Slot& fresh = pool.emplace_back();  // within the capacity reserved: never reallocates
    fresh.members.resize(words_for(num_workers));
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

void PsEndpoint::Impl::merge_int(Slot& slot, const Header& h, std::span<const std::uint8_t> packet,
                                 const Contributors& c, PacketSink& out) {
  // A congestion mark is never lost, even on a discarded duplicate (as the switch does, Fig. 7 box 7).
  slot.ecn = slot.ecn || h.ecn;
  // A retransmission, merged or discarded below: its sender timed out while the fragment waited
  // for others, so the result's timing is no round trip (Karn's rule).
  slot.recovered = slot.recovered || recovery(h);
  if (overlaps(slot, c)) {
    // Part of it is already in the sums and the parts cannot be separated: discard it whole.
    ++stats.overlaps_dropped;
  } else {
    const bool saturated = add_to_sums(packet, slot.sums);  // at most 1024 int32 terms: cannot overflow int64
    slot.saturated = slot.saturated || saturated;
    slot.exponent_mismatch = slot.exponent_mismatch || h.scale_exponent != slot.scale_exponent;
    slot.magnitude = std::max(slot.magnitude, h.magnitude_or_next);
    if (h.collision && !slot.collision) {
      slot.collision = true;
      slot.collided_index = h.aggregator_index;
      slot.offered_aggregator = h.offered_aggregator;
    }
    merge_members(slot, c);
    ++stats.aggregations;
  }
  if (slot.missing_workers == 0) {
    complete_int(slot, out);
  } else if (recovery(h)) {
    request_resends(slot, out);
  }
}

// A worker's retransmission came for a fragment still missing others' contributions: its
// sender timed out waiting, so the missing ones are lost, or their first copies wait somewhere
// (in an aggregator claimed after a resend flushed the fragment, behind their own earlier holes)
// until their own timeouts, which may be far off. Each missing worker is asked for a resend
// (docs/protocol.md "Resend requests"). At most once per doubling of the slot's age, so that
// the requests of a fragment that stays incomplete thin out as its resends do.
void PsEndpoint::Impl::request_resends(Slot& slot, PacketSink& out) {
  if (address.empty()) return;
  if (slot.requested != kNever && now - slot.requested < slot.requested - slot.opened) return;
  slot.requested = now;
  Header h;
  h.is_ack = true;
  h.resend_request = true;
  h.job = config.job;
  h.seq = slot.seq;
  h.allocate = config.index_policy == IndexPolicy::kAllocated;
  h.aggregator_index = slot.aggregator_index;
  h.src = config.self;
  const std::span<std::uint8_t> packet = std::span(packet_buffer).first(kHeaderBytes);
  for (std::uint32_t w = 0; w < num_workers; ++w) {
    if ((slot.members[w / 64] >> (w % 64) & 1) != 0) continue;
    h.dst = address[w];
    encode_header(h, packet);
    out.send(packet);
    ++stats.resend_requests;
  }
}

// All workers are in. Either the int32 result goes out, or (saturation somewhere, or a sum
// outside int32) the overflow request, and the fragment starts over as float32 (§3.8).
void PsEndpoint::Impl::complete_int(Slot& slot, PacketSink& out) {
  bool overflow =
      slot.saturated || slot.exponent_mismatch || !resolved(slot.magnitude, slot.scale_exponent, num_workers);
  for (const std::int64_t sum : slot.sums) {
    overflow |= sum > kSaturatedMax || sum < kSaturatedMin;
  }
  if (slot.collision) ++stats.collisions;  // counted once: the first parameter packet carries it
  if (overflow) {
    slot.state = SlotState::kCollectingFloats;
    std::fill(slot.members.begin(), slot.members.end(), std::uint64_t{0});
    slot.missing_workers = num_workers;
    std::fill(slot.sums.begin(), slot.sums.end(), std::bit_cast<std::int64_t>(0.0));  // the double sums
    ++stats.overflows;
  } else {
    slot.state = SlotState::kComplete;
    ++stats.completions;
  }
  send_parameter(slot, config.multicast_group, out);
  ++stats.parameters_sent;
}

void PsEndpoint::Impl::merge_float(Slot& slot, const Header& h, std::span<const std::uint8_t> packet,
                                   const Contributors& c, PacketSink& out) {
  slot.ecn = slot.ecn || h.ecn;
  if (overlaps(slot, c)) {
    ++stats.overlaps_dropped;
    return;
  }
  for (std::size_t i = 0; i < slot.sums.size(); ++i) {
    const double sum = float_sum(slot, i) + std::bit_cast<float>(load_value(packet, i));
    slot.sums[i] = std::bit_cast<std::int64_t>(sum);
  }
  slot.magnitude = std::max(slot.magnitude, h.magnitude_or_next);
  merge_members(slot, c);
  slot.recovered = slot.recovered || recovery(h);
  ++stats.aggregations;
  if (slot.missing_workers != 0) return;
  slot.state = SlotState::kComplete;
  slot.float_result = true;
  ++stats.completions;
  send_parameter(slot, config.multicast_group, out);
  ++stats.parameters_sent;
}

// A contribution's round_shape differs from the slot's: fragments of allreduce calls of
// different sizes met at this seq (docs/protocol.md "Round shape"). Nothing is summed any more;
// the workers learn it from the multicast notice and fail their round.
void PsEndpoint::Impl::fail_round_shape(Slot& slot, PacketSink& out) {
  slot.state = SlotState::kShapeMismatch;
  ++stats.shape_mismatches;
  send_parameter(slot, config.multicast_group, out);
  ++stats.parameters_sent;
}

std::uint32_t PsEndpoint::Impl::moved_index(const Slot& slot) const {
  if (config.index_policy != IndexPolicy::kHashedSlots) {
    return rehash_aggregator_index(slot.collided_index, config.aggregators);
  }
  // The switch's offer, the aggregator free there the longest: the fragment's slot settles where
  // no other slot of any job is at home, in one move (a rehash may land on another's place).
  const std::uint32_t offered = slot.offered_aggregator - 1u;
  if (slot.offered_aggregator != 0 && config.aggregators.contains(offered) && offered != slot.collided_index) {
    return offered;
  }
  return rehash_aggregator_index(slot.collided_index, config.aggregators, slot.seq % config.max_window_seqs + 1);
}

// The parameter packet for the slot's state: the overflow request (no values) while collecting
// floats, the round-shape mismatch notice (no values), else the result, int32 or float32 (the
// double sums rounded to float once, here).
void PsEndpoint::Impl::send_parameter(const Slot& slot, Address dst, PacketSink& out) {
  const bool overflow_request = slot.state == SlotState::kCollectingFloats;
  const bool mismatch = slot.state == SlotState::kShapeMismatch;
  Header h;
  h.is_ack = true;
  h.ecn = slot.ecn;
  // A unicast answer is to a worker's resend of a fragment already complete.
  h.resend = slot.recovered || dst != config.multicast_group;
  h.overflow = overflow_request;
  h.float_payload = !overflow_request && !mismatch && slot.float_result;
  h.job = config.job;
  h.round_shape = mismatch ? kRoundShapeMismatch : 0;
  h.value_count = overflow_request || mismatch ? 0 : static_cast<std::uint16_t>(slot.sums.size());
  h.seq = slot.seq;
  // The switches free the aggregator the gradients used; on a collision, workers move this
  // fragment's base index to the one carried in bitmap (§3.6): rehashed, or with hashed_slots the
  // aggregator the switch offered, where it is the job's and not the one that collided. An
  // allocated fragment collides only in a full table, and its index stays.
  h.collision = slot.collision && !mismatch && config.index_policy != IndexPolicy::kAllocated;
  h.allocate = config.index_policy == IndexPolicy::kAllocated;
  h.bitmap = h.collision ? moved_index(slot) : 0;
  h.aggregator_index = slot.aggregator_index;
  h.src = config.self;
  h.dst = dst;
  if (!overflow_request && !mismatch) {
    h.scale_exponent = slot.float_result ? 0 : slot.scale_exponent;
    h.magnitude_or_next = next_exponent(slot.magnitude, num_workers, slot.scale_exponent);
  }
  const std::span<std::uint8_t> packet = std::span(packet_buffer).first(packet_size(h.value_count));
  encode_header(h, packet);
  if (slot.float_result) {
    for (std::size_t i = 0; i < h.value_count; ++i) {
      store_value(packet, i, std::bit_cast<std::int32_t>(static_cast<float>(float_sum(slot, i))));
    }
  } else {
    store_sums(packet, std::span(slot.sums).first(h.value_count));  // in int32 range: checked at completion
  }
  out.send(packet);
}

void PsEndpoint::Impl::on_packet(const Header& h, std::span<const std::uint8_t> packet, PacketSink& out) {
  if (h.job != config.job || h.is_ack || h.rina != RinaKind::kNone || h.dst != config.self ||
      h.value_count != config.values_per_packet || !is_worker(h.src)) {
    ++stats.dropped;
    return;
  }
  Contributors c;
  if (!decode_contributors(h, c)) {
    ++stats.dropped;
    return;
  }
  // Float32 fragments answer an overflow request; switches never aggregate them.
  if (h.float_payload && c.worker_count != 1) {
    ++stats.dropped;
    return;
  }
  ++stats.packets_received;

  if (!have_base) {
    // Workers start within one window of each other: the first fragment of the job is at most
    // `window` before the first packet seen.
    have_base = true;
    base = h.seq - window;
  }
  if (seq_before(h.seq, base)) {
    ++stats.stale;
    return;
  }
  if (h.seq - base > 2 * window) {
    ++stats.dropped;  // further ahead than any worker can be: would break the memory bound
    return;
  }
  note_seen(h.seq, c);

  Slot* slot = find_slot(h.seq);
  if (slot == nullptr) {
    if (h.float_payload) {
      ++stats.dropped;  // floats only answer an overflow request of a fragment we hold
    } else {
      merge_int(create_slot(h.seq, h.aggregator_index, h.round_shape, h.scale_exponent), h, packet, c, out);
    }
  } else if (slot->state != SlotState::kComplete && slot->state != SlotState::kShapeMismatch &&
             h.round_shape != slot->round_shape) {
    slot->ecn = slot->ecn || h.ecn;
    fail_round_shape(*slot, out);
  } else {
    switch (slot->state) {
      case SlotState::kAggregating:
        if (h.float_payload) {
          ++stats.dropped;
        } else {
          merge_int(*slot, h, packet, c, out);
        }
        break;
      case SlotState::kCollectingFloats:
        if (h.float_payload) {
          merge_float(*slot, h, packet, c, out);
        } else {
          // The sender missed the overflow request: ask it again.
          send_parameter(*slot, h.src, out);
          ++stats.results_resent;
        }
        break;
      case SlotState::kComplete:
      case SlotState::kShapeMismatch:
        // The sender missed the result or the notice (lost parameter packet): again, to it only.
        send_parameter(*slot, h.src, out);
        ++stats.results_resent;
        break;
    }
  }
  forget_old_slots();
}

PsEndpoint::PsEndpoint(PsConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
PsEndpoint::~PsEndpoint() = default;
PsEndpoint::PsEndpoint(PsEndpoint&&) noexcept = default;
PsEndpoint& PsEndpoint::operator=(PsEndpoint&&) noexcept = default;

void PsEndpoint::on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  Header h;
  if (decode_header(packet, h) != DecodeError::kOk) {
    ++impl_->stats.dropped;
    return;
  }
  on_packet(h, packet, now, out);
}

void PsEndpoint::on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->now = now;
  impl_->on_packet(header, packet, out);
}

void PsEndpoint::on_timeout(Time /*now*/, PacketSink& /*out*/) {}

Time PsEndpoint::next_deadline() const { return kNever; }

const PsStats& PsEndpoint::stats() const { return impl_->stats; }

std::size_t PsEndpoint::stored_fragments() const { return impl_->live_slots; }

const PsConfig& PsEndpoint::config() const { return impl_->config; }

}  // namespace atp
