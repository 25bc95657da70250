// The ATP parameter server endpoint (paper §3.6-3.8): merges individual and partially
// aggregated gradient packets per sequence number without double counting, multicasts the
// result, rehashes after collisions, runs the float32 overflow path, and asks the workers it
// lacks for resends. No I/O, no timers: packets bring the time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "atp/aggregator_index.h"
#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

struct PsConfig {
  JobId job = 0;
  std::string name;  // the job's, for the PS daemon's log and metrics; the endpoint ignores it
  Address self = 0;
  Address multicast_group = 0;  // parameter packets go here (multicast_group_address(job))
  // The job's aggregation tree towards this PS (docs/protocol.md "Aggregation tree"): tree[i] is
  // node i's parent, which comes before it (tree[0], this PS, is not read). Nodes without
  // children are the workers; a node's children, by increasing id, are its bitmap's bits 0, 1,
  // ...; other than the PS, a node has at most 32. flat_tree(n): n workers, no switch between.
  std::vector<std::uint16_t> tree;
  // The job's workers, in the order of their leaf nodes' ids in `tree`: a gradient packet's src
  // must be one of them, or it is dropped (a switch forwards an aggregate with one member's src),
  // and resend requests go to them. Empty: not checked, no resend requests (in-process tests); the
  // plan and the PS daemon's job codec always fill it.
  std::vector<Address> workers;
  std::uint16_t values_per_packet = kDefaultValuesPerPacket;
  AggregatorRange aggregators;  // the job's aggregator indices (as its workers'): rehashed indices stay inside
  // kHashedSlots: rehashes are salted with the slot; kAllocated: collisions move no index, and
  // parameter packets carry Header::allocate.
  IndexPolicy index_policy = IndexPolicy::kAllocated;
  // Largest distance in sequence numbers between fragments a worker has in flight towards this
  // PS (the job's max window x number of PS shards). Bounds the PS's memory: at most 2 x this
  // + 1 fragments of values_per_packet int64 sums each, which must fit kPsJobMemoryBudget.
  // 0 counts as 1; at most kMaxWindowSeqs.
  std::uint32_t max_window_seqs = 1024;
};

// Nodes a PS's tree may have (Header::node is 16 bits).
inline constexpr std::uint32_t kMaxTreeNodes = 1u << 16;

// The tree of a job whose `workers` (1..kMaxTreeNodes - 1) packets come to its PS unaggregated:
// nodes 1..workers, each the PS's child.
inline std::vector<std::uint16_t> flat_tree(std::size_t workers) { return std::vector<std::uint16_t>(workers + 1, 0); }

// Why `tree` is not a PsConfig::tree, in one sentence naming the entry; nullopt: it is one.
std::optional<std::string> tree_error(const std::vector<std::uint16_t>& tree);

// The largest max_window_seqs a PS takes, so that the ring of slot references (2 x window + 1
// entries rounded up to a power of two, 4 B each) stays at most 16 MiB and serial-number
// comparisons over the stored range stay meaningful (far below 2^31). The memory budget is
// usually the tighter limit.
inline constexpr std::uint32_t kMaxWindowSeqs = 1u << 20;

// The most memory one PS job may hold, whatever packets claim: with forged sequence numbers
// its slot pool reaches its bound. The default config (1024 x 62 values) needs about 2 MiB.
inline constexpr std::uint64_t kPsJobMemoryBudget = std::uint64_t{256} << 20;  // bytes

// An upper bound, in bytes, of what a PsEndpoint with `config` ever holds: the ring of slot
// references and the slot pool at its bound of 2 x max_window_seqs + 1 slots (sums, members,
// bookkeeping), the tree, per-worker state and buffers. Grows with max_window_seqs x
// values_per_packet.
std::uint64_t ps_job_memory_bound(const PsConfig& config);

// Why a PsEndpoint cannot take `config` (one sentence naming the field: values_per_packet outside
// 1..kMaxValuesPerPacket, a tree that is not one, max_window_seqs above kMaxWindowSeqs or a memory
// bound above kPsJobMemoryBudget), or nullopt.
std::optional<std::string> ps_config_error(const PsConfig& config);

struct PsStats {
  std::uint64_t packets_received = 0;  // valid gradient packets of this job (incl. stale)
  std::uint64_t aggregations = 0;      // packets merged into a fragment (individual or partial)
  std::uint64_t overlaps_dropped = 0;  // packets whose bitmap overlapped what was merged; discarded whole
  std::uint64_t completions = 0;       // fragments completed (int and float paths)
  std::uint64_t parameters_sent = 0;   // multicast parameter packets: results and overflow requests
  std::uint64_t results_resent = 0;    // unicast re-sends: results of completed fragments, overflow requests
  std::uint64_t collisions = 0;        // fragments completed with the collision flag: index rehashed
  std::uint64_t overflows = 0;         // fragments that saturated and took the float32 path
  std::uint64_t resend_requests = 0;   // resend requests sent, one per missing worker asked
  std::uint64_t stale = 0;             // packets for fragments already forgotten (behind the window)
  // Fragments whose contributions had different round_shape fields (the workers all-reduce
  // tensors of different sizes): the mismatch notice was multicast instead of a result.
  std::uint64_t shape_mismatches = 0;
  std::uint64_t dropped = 0;  // malformed, wrong job or dst, acks, Rina packets, wrong value_count, a node not
                              // in the tree or a bitmap or fan-in not its,
                              // a src not among the workers, floats not from one worker or not
                              // asked for, too far ahead
};

class PsEndpoint {
 public:
  // Throws std::invalid_argument (ps_config_error's sentence) for a config it cannot take.
  explicit PsEndpoint(PsConfig config);
  ~PsEndpoint();
  PsEndpoint(PsEndpoint&&) noexcept;
  PsEndpoint& operator=(PsEndpoint&&) noexcept;

  // A packet arrived; what is not a valid gradient packet of this job is counted and dropped.
  void on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out);
  // The same for a host that decoded the header already to route the packet (decode_header said
  // kOk for `packet`): the header is not decoded again.
  void on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out);
  void on_timeout(Time now, PacketSink& out);  // the PS keeps no timers today
  Time next_deadline() const;                  // kNever

  const PsStats& stats() const;
  std::size_t stored_fragments() const;  // fragments held in memory (complete or not)
  const PsConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
