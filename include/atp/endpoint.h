// What a worker of an in-network allreduce is, whatever its protocol: a state machine fed
// packets and timers, with no I/O and no clock, that sums a float32 tensor over the job's workers.
// ATP's WorkerEndpoint (atp/worker.h) and Rina's RinaWorker (atp/rina/worker.h) are the two;
// the hosts that run one (atp::Communicator on a UDP socket, the in-process and ns-3 hosts, the
// process backends' worker) hold an Endpoint and never name its protocol.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

enum class WorkerState : std::uint8_t {
  kIdle,     // no round running; result() holds the last completed round
  kRunning,  // a round is in flight
  // No progress for the progress timeout, or the job's rounds differ in size (its workers
  // all-reduce tensors of different sizes); error() says which, in one sentence. Terminal.
  kFailed,
};

// The counts every protocol keeps under one name each, which the reports add up over a job's
// workers (JobResult's columns, the worker process's result line). A protocol without a kind of
// event leaves its count 0.
struct EndpointCounts {
  std::uint64_t retransmissions = 0;    // resends for any reason
  std::uint64_t fast_retransmits = 0;   // of those, before a retransmission timeout
  std::uint64_t timeouts = 0;           // retransmission timeouts fired
  std::uint64_t requested_resends = 0;  // fragments resent because the aggregating end asked (ATP's PS)
  std::uint64_t final_requests = 0;     // asks sent for results this endpoint missed (Rina)
  std::uint64_t hop_pieces = 0;         // partial sums this endpoint added in as a carrier (Rina)
  std::uint64_t result_values = 0;      // values of the results it received (goodput)
  std::uint64_t rounds_completed = 0;

  EndpointCounts& operator+=(const EndpointCounts& o) {
    retransmissions += o.retransmissions;
    fast_retransmits += o.fast_retransmits;
    timeouts += o.timeouts;
    requested_resends += o.requested_resends;
    final_requests += o.final_requests;
    hop_pieces += o.hop_pieces;
    result_values += o.result_values;
    rounds_completed += o.rounds_completed;
    return *this;
  }
};

// One of an endpoint's own counters, by the name its protocol's stats struct gives it, for reports
// that show them all (the PyTorch backend's atp_torch.stats()).
struct EndpointCounter {
  std::string_view name;
  std::uint64_t value = 0;
};

// How long a host stays with an endpoint after its last round (Communicator::close): until the job
// has been quiet for `quiet`, at most `at_most` from the start. Rina's workers answer the others'
// asks for finals they missed; ATP's last sums come from the PS, which stays: {0, 0}.
struct Linger {
  Duration quiet{0};
  Duration at_most{0};
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // Starts one allreduce of `input` (copied; the sums go to result()). Requires state() == kIdle
  // (returns false otherwise, or for more fragments than the protocol numbers in a round). An
  // empty input completes at once. Every worker of the job passes the same number of values.
  virtual bool start(std::span<const float> input, Time now, PacketSink& out) = 0;
  // The same without a copy: `values` must stay alive and untouched until the round ends, and
  // then holds the sums; result() is `values`. After a failure it holds, per fragment, its sum or
  // its input.
  virtual bool start_in_place(std::span<float> values, Time now, PacketSink& out) = 0;
  // A packet arrived. What is not a valid packet of this job for this endpoint is counted and
  // dropped.
  virtual void on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) = 0;
  // The same for a host that decoded the header already to route the packet (decode_header said
  // kOk for `packet`): the header is not decoded again.
  virtual void on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) = 0;
  // Call when now >= next_deadline(): resends, asks, and the progress timeout.
  virtual void on_timeout(Time now, PacketSink& out) = 0;
  // The host's own queue (socket buffer, qdisc) refused packets the sink still holds: the path's
  // bottleneck is this host's link, which the windows take as a switch's ECN mark.
  virtual void on_host_queue_full(Time now) = 0;
  virtual Time next_deadline() const = 0;

  virtual WorkerState state() const = 0;
  virtual const std::string& error() const = 0;       // when state() == kFailed: one sentence
  virtual std::span<const float> result() const = 0;  // the sums, once a round completed

  // How a checker knows each fragment's exact sum. false: the aggregating end (ATP's PS) picks each
  // fragment's exponent from every worker's input, which a checker works out the same way; some
  // fragments may come over the float32 overflow path (float_fragments()). true: the workers pick
  // them and may redo a fragment at a better one: the sums are exact at result_exponents().
  virtual bool picks_exponents() const = 0;
  // The exponent of each fragment's int32 sum in the last round (fixed_point.h); 0 for float32
  // results.
  virtual const std::vector<std::int16_t>& result_exponents() const = 0;
  // picks_exponents(): the exponents the next round's first pass will use for its first
  // `fragments` fragments, which a redo pass may still change. Else empty.
  virtual std::vector<std::int16_t> next_exponents(std::uint32_t fragments) const = 0;
  // Fragments of the last round whose sum came over the float32 overflow path (indices within the
  // round, ascending once it completed); empty for a protocol without one.
  virtual const std::vector<std::uint32_t>& float_fragments() const = 0;

  virtual std::string_view protocol() const = 0;  // its protocol's name, for reports: "atp", "rina"
  // Who it is and whom it hears: its job, its own address and the addresses its packets come from
  // when hosts are addressed by IP (ATP: the job's PSes and this host's own PS relay; Rina: the
  // job's workers).
  virtual JobId job() const = 0;
  virtual Address self() const = 0;
  virtual std::vector<Address> sources() const = 0;
  virtual std::uint16_t values_per_packet() const = 0;  // the job's fragment width

  // A seq past every one this endpoint's job may have used so far: its own round's and the next
  // round's, which a worker ahead of it may have begun. A job re-formed from this one (workers
  // gone) starts there, so that no packet of this one still on its way is taken for the new one's.
  virtual Seq resume_seq() const = 0;
  virtual Linger linger() const = 0;
  virtual std::uint32_t window() const = 0;  // the congestion window its sends are held to, packets
  virtual EndpointCounts counts() const = 0;
  virtual std::vector<EndpointCounter> counters() const = 0;
};

}  // namespace atp
