// The worker library: allreduce of float32 buffers over ATP (or Rina) on real UDP sockets. One
// Communicator per worker process and job; it runs a WorkerEndpoint (or a RinaWorker) on its own
// loop thread.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>

#include "atp/collectives/allreduce.h"
#include "atp/io/udp_socket.h"
#include "atp/rina/worker.h"
#include "atp/worker.h"

namespace atp {

// An allreduce that cannot complete: what() is one sentence, e.g. "allreduce failed: job 1: no
// parameter packet from PS 10.0.0.9 for 2.0 s; the PS or switch is unreachable, or another worker of the job
// stopped".
// A CollectiveError, so that code written against Allreduce catches it like any other.
class CommunicatorError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

// ATP's allreduce (and the PS baseline's: the same endpoint, with a job plan in which no switch
// aggregates), or Rina's (docs/rina.md).
class Communicator : public Allreduce {
 public:
  // `config` is this worker's part of plan_job(); `local` the UDP address to bind (port 0: the
  // kernel picks one). `uplink`: where every packet goes (the worker's ToR switch, or the PS when
  // there is no switch); nullopt: each packet goes to its destination's IP at kUdpPort and the
  // worker joins the job's multicast group on its own address (config.self), for networks where
  // the overlay addresses are the hosts' IPs (bind `local` to the group's address, or 0.0.0.0, at
  // kUdpPort then: a socket bound to a unicast address never receives multicast). Throws
  // std::invalid_argument for a config the endpoint refuses and UdpSetupError if the socket
  // cannot be bound or join the group. Starts the loop thread.
  Communicator(WorkerConfig config, const SocketAddress& local, std::optional<SocketAddress> uplink);
  // The same on a socket bound already: for a worker that must tell its address to the job's
  // planner (the PyTorch backend's rendezvous) before the plan, and so its config, exists.
  Communicator(WorkerConfig config, UdpSocket socket, std::optional<SocketAddress> uplink);
  // Rina's worker: `config` is this worker's part of plan_rina_job(); `local` and `uplink` as
  // above (addressed by IP, its packets come from the job's other workers at kUdpPort).
  Communicator(RinaConfig config, const SocketAddress& local, std::optional<SocketAddress> uplink);
  Communicator(RinaConfig config, UdpSocket socket, std::optional<SocketAddress> uplink);
  // Stops the loop thread; rounds still queued or running fail with CommunicatorError.
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Sums `inout` over every worker of the job and writes the sum back in place. Blocks; throws
  // CommunicatorError when the job makes no progress for the config's progress_timeout (`inout`
  // then holds the sums of the fragments that completed, the inputs of the others). A failed
  // endpoint stays failed: every later call throws the same error. Thread-safe: concurrent calls
  // run one round at a time, in the order they were made.
  void allreduce(std::span<float> inout) override;
  std::string_view algorithm() const override;  // "atp" or "rina"
  // The same without blocking: the buffer must stay alive and untouched until the future is
  // ready; the future throws CommunicatorError on failure (the buffer then holds the sums of
  // some fragments and the inputs of the others).
  std::future<void> allreduce_async(std::span<float> inout);
  // Rina: stays (answering the other workers' asks for finals they missed) until the job has
  // been quiet for a quarter of the progress timeout, at most the whole of it. ATP: returns.
  void close() override;

  SocketAddress local_endpoint() const;     // the bound address (its port when `local` had port 0)
  // Snapshots, taken on the loop thread: ATP's endpoint's, or Rina's worker's (std::logic_error
  // when asked of the other kind).
  WorkerStats stats() const;
  RinaStats rina_stats() const;
  // Rina: the exponents of the last round's sums and the ones the next round starts with
  // (RinaWorker::result_exponents, next_exponents); empty for ATP, whose PS picks them.
  std::vector<std::int16_t> result_exponents() const;
  std::vector<std::int16_t> next_exponents(std::uint32_t fragments) const;
  // Rina: RinaWorker::next_ring_seq (where a ring re-formed from this one starts). 0 for ATP.
  Seq next_ring_seq() const;
  std::uint16_t values_per_packet() const;  // the job's fragment width (its plan's)
  // Datagrams dropped before the endpoint because they came from neither a PS of the job nor this
  // host's PS relay (addressed by IP). With an uplink the kernel drops them instead: always 0.
  std::uint64_t foreign_datagrams() const;

 private:
  void start_loop();
  template <class F>
  auto on_loop(F read) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
