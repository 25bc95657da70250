// The ATP parameter server endpoint's state, shared by the files that implement it: admission (ps.cc),
// the slot pool (ps_slots.cc), merges and parameter packets (ps_merge.cc). Internal to src/core/.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "atp/ps.h"

namespace atp {
namespace ps_detail {

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

inline std::uint64_t words_for(std::uint64_t workers) { return (workers + 63) / 64; }

}  // namespace ps_detail

struct PsEndpoint::Impl {
  using SlotState = ps_detail::SlotState;
  using Slot = ps_detail::Slot;
  using TreeNode = ps_detail::TreeNode;
  using Contributors = ps_detail::Contributors;
  static constexpr std::uint32_t kNoSlot = std::numeric_limits<std::uint32_t>::max();

  explicit Impl(PsConfig c);

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

}  // namespace atp
