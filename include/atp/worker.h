// The ATP worker endpoint (paper §3.6-3.8): turns a float32 tensor into gradient fragment
// packets, runs one sliding window with AIMD per PS shard, recovers losses, and assembles
// the aggregated result from parameter packets. A state machine: no I/O, no clock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "atp/aggregator_index.h"
#include "atp/congestion.h"
#include "atp/endpoint.h"
#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

// One PS of the job (from the job plan): where its gradient packets go, and this worker's node in
// the job's aggregation tree towards it (Header::node; its packets carry bitmap 1, fan_in 1).
struct PsRoute {
  Address ps = 0;
  std::uint16_t node = 0;
};

// How a worker finds lost fragments.
enum class LossRecovery : std::uint8_t {
  kAtp,  // holes with 3 later results, once overdue (paper §3.7, per hole), or the RTO; resends after partial acks
  kTimeoutOnly,  // the RTO alone, as SwitchML: the baseline of the paper's Fig. 10
};

struct WorkerConfig {
  JobId job = 0;
  Address self = 0;
  // At least one. The job's n-th fragment (counted over all rounds from 0) goes to
  // ps[n % ps.size()], so each PS gets every ps.size()-th sequence number, across rounds too.
  std::vector<PsRoute> ps;
  std::uint16_t values_per_packet = kDefaultValuesPerPacket;
  // The fixed-point scale of a fragment position's first round, rounded down to a power of two
  // (initial_exponent); later rounds take the exponent the PS picked from the last one's values.
  double scale = 1e8;
  // Aggregator indices this job may use (plan: the whole smallest table on its paths, or its
  // static share of it); count >= 1. Remaps from the PS outside it are ignored.
  AggregatorRange aggregators;
  IndexPolicy index_policy = IndexPolicy::kAllocated;
  // kHashedSlots: where slot 0 sits in `aggregators` (base_aggregator_index's home; the plan's).
  std::uint32_t slot_home = 0;
  CongestionConfig congestion;
  LossRecovery loss_recovery = LossRecovery::kAtp;
  // The retransmission timeout is measured (RttEstimator: RFC 6298 from the round trips of
  // fragments sent once, clipped to twice the recent least delay) and doubles while nothing
  // progresses (at most 16x the estimate, and an eighth of progress_timeout); these bound it.
  // retransmit_timeout is the RTO before the first sample, the paper's 1 ms: on a slower path the
  // first timeouts' resends stand in for samples and raise it (worker_results.cc). The same defaults from
  // a 200 Mbit/s veth (measured) to a simulated 100G fabric.
  Duration retransmit_timeout = std::chrono::milliseconds(1);
  Duration min_retransmit_timeout = std::chrono::milliseconds(1);
  Duration max_retransmit_timeout = std::chrono::seconds(1);
  Duration progress_timeout = std::chrono::seconds(2);  // no progress this long: the round fails
  Seq initial_seq = 0;  // sequence number of the job's first fragment (same on every worker)
};

struct WorkerStats {
  std::uint64_t gradient_packets_sent = 0;  // including retransmissions
  std::uint64_t retransmissions = 0;        // resends for any reason
  // Resends before the RTO: holes with 3 later results, and their one repeat, and tail probes.
  std::uint64_t fast_retransmits = 0;
  std::uint64_t tail_probes = 0;              // of those, the newest fragment's after results stopped (RACK-TLP)
  std::uint64_t timeouts = 0;                 // retransmission timeouts fired
  std::uint64_t undone_cuts = 0;              // window cuts taken back: the loss was not one (a late result)
  std::uint64_t host_queue_full = 0;          // on_host_queue_full calls while fragments were in flight
  std::uint64_t float_resends = 0;            // fragments resent as float32 after an overflow notice
  std::uint64_t requested_resends = 0;        // fragments resent because the PS asked (resend requests)
  std::uint64_t resend_requests_ignored = 0;  // requests for fragments with a result or sent within the RTO
  std::uint64_t parameters_received = 0;      // valid parameter packets for this job
  std::uint64_t duplicate_parameters = 0;     // parameters for fragments already complete, repeated overflow notices
  std::uint64_t ecn_parameters = 0;           // parameters with the ECN flag
  std::uint64_t remaps = 0;                   // aggregator index remaps learned from the PS
  std::uint64_t dropped = 0;                  // malformed, other job, or out-of-window packets
  std::uint64_t rounds_completed = 0;
};

// Why `config` cannot work (one sentence naming the field: no PS, values_per_packet outside
// 1..kMaxValuesPerPacket, an empty aggregator range or one past index 2^32 - 1, a scale that is
// not positive and finite, a non-positive timeout), or nullopt.
std::optional<std::string> worker_config_error(const WorkerConfig& config);

class WorkerEndpoint final : public Endpoint {
 public:
  // Throws std::invalid_argument (worker_config_error's sentence) if the config cannot work.
  explicit WorkerEndpoint(WorkerConfig config);
  ~WorkerEndpoint() override;
  WorkerEndpoint(WorkerEndpoint&&) noexcept;
  WorkerEndpoint& operator=(WorkerEndpoint&&) noexcept;

  // Starts one allreduce of `input` (copied; the sums go to result()). Sends the first window.
  // Requires state() == kIdle and at most 2^31 fragments (returns false otherwise). An empty
  // input completes at once. Sequence numbers continue where the previous round ended; windows
  // carry over.
  bool start(std::span<const float> input, Time now, PacketSink& out) override;
  // The same without a copy: each fragment's sum overwrites its values as it arrives, so that a
  // round costs no pass over the tensor beyond quantizing it. `values` must stay alive and
  // untouched until the round ends; after a failure it holds some fragments' sums and the other
  // fragments' inputs. result() is `values`.
  bool start_in_place(std::span<float> values, Time now, PacketSink& out) override;

  // A packet arrived from the network. Anything that is not a valid parameter packet of this
  // job for a fragment this worker has sent is counted in stats().dropped and ignored: malformed
  // packets, other jobs, gradient packets, wrong value counts, seqs not (yet) sent. A result for a
  // fragment already complete (this round or an earlier one) counts in duplicate_parameters.
  // A round-shape mismatch notice (round_shape == kRoundShapeMismatch) for a fragment of this
  // round it sent and has no result of fails the round: state() becomes kFailed.
  void on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) override;
  void on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) override;

  // The host's own queue (socket buffer, device qdisc) refused packets this endpoint sent: its
  // link is the bottleneck and its queue is full. Each flow with fragments in flight takes it as
  // a congestion mark on its oldest one (at most one cut per round trip), as TCP takes a local
  // qdisc drop, so that the window stays near the path's capacity instead of growing a queue in
  // the sender that every result, and the next round's start, waits behind.
  void on_host_queue_full(Time now) override;

  // Call when now >= next_deadline(): retransmission timeouts (each flow resends its holes, the
  // unacknowledged fragments older than its newest result, at least the oldest one, and backs
  // off), and failure after progress_timeout without a new result.
  void on_timeout(Time now, PacketSink& out) override;
  Time next_deadline() const override;

  WorkerState state() const override;
  const std::string& error() const override;       // set when state() == kFailed
  std::span<const float> result() const override;  // sum over all workers, valid once state() == kIdle after a round
  bool picks_exponents() const override { return false; }  // the PS picks them
  // The scale exponent of each fragment's int32 result in the last round (its values are the
  // sums of the workers' x * 2^exponent, fixed_point.h); 0 for float32 results.
  const std::vector<std::int16_t>& result_exponents() const override;
  std::vector<std::int16_t> next_exponents(std::uint32_t) const override { return {}; }
  // Fragments of the last round whose result came over the float32 overflow path (fragment
  // indices within the round, ascending once the round is complete).
  const std::vector<std::uint32_t>& float_fragments() const override;
  std::string_view protocol() const override { return "atp"; }
  JobId job() const override;
  Address self() const override;
  std::vector<Address> sources() const override;  // the job's PSes, and this host's own PS relay
  std::uint16_t values_per_packet() const override;
  Seq resume_seq() const override;
  Linger linger() const override { return {}; }
  std::uint32_t window() const override { return window(0); }  // towards the first PS
  std::uint32_t window(std::size_t ps_index) const;            // current congestion window, packets
  EndpointCounts counts() const override;
  std::vector<EndpointCounter> counters() const override;  // stats(), by field
  const WorkerStats& stats() const;
  const WorkerConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
