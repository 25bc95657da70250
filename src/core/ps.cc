// The ATP parameter server endpoint: a per-sequence-number store of <contributors, sums> held in
// a ring bounded by the workers' window, the int32 and float32 completion paths, and rehashing.
// This file: the memory bound, the tree, admission and dispatch of packets; the slot pool is
// ps_slots.cc's, merges and parameter packets ps_merge.cc's.
#include "atp/ps.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "atp/values_per_packet.h"
#include "ps_impl.h"

namespace atp {
namespace {

// What malloc keeps per heap block besides the bytes asked for (glibc: 8-16 B), for the bound.
constexpr std::uint64_t kHeapBlockOverhead = 16;

}  // namespace

std::uint64_t ps_job_memory_bound(const PsConfig& config) {
  const std::uint64_t window = std::max<std::uint32_t>(config.max_window_seqs, 1);
  const std::uint64_t slots = 2 * window + 1;      // the pool's bound: every stored seq is in [base, base + 2 x window]
  const std::uint64_t nodes = config.tree.size();  // workers are fewer
  const std::uint64_t per_slot = sizeof(ps_detail::Slot) + sizeof(std::uint32_t) +  // pool and free list
                                 ps_detail::words_for(nodes) * sizeof(std::uint64_t) + kHeapBlockOverhead +  // members
                                 config.values_per_packet * sizeof(std::int64_t) + kHeapBlockOverhead;       // sums
  const std::uint64_t per_worker = sizeof(Seq) + 1 + sizeof(Address);  // highest_seen, worker_seen, address
  const std::uint64_t per_node =
      sizeof(ps_detail::TreeNode) + sizeof(std::uint16_t) + kHeapBlockOverhead;  // nodes, children
  return std::bit_ceil(slots) * sizeof(std::uint32_t) + slots * per_slot + nodes * (per_worker + per_node) +
         packet_size(config.values_per_packet);
}

PsEndpoint::Impl::Impl(PsConfig c) : config(std::move(c)) {
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
