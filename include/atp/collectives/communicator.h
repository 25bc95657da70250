// The worker library: allreduce of float32 buffers over an in-network protocol's endpoint (ATP's,
// Rina's: atp/endpoint.h) on real UDP sockets. One Communicator per worker process and job; it
// runs the endpoint on its own loop thread.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>

#include "atp/collectives/allreduce.h"
#include "atp/endpoint.h"
#include "atp/io/udp_socket.h"

namespace atp {

// An allreduce that cannot complete: what() is one sentence, e.g. "allreduce failed: job 1: no
// parameter packet from PS 10.0.0.9 for 2.0 s; the PS or switch is unreachable, or another worker of the job
// stopped".
// A CollectiveError, so that code written against Allreduce catches it like any other.
class CommunicatorError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

// An endpoint's allreduce: ATP's (and the PS baseline's: the same endpoint, with a job plan in
// which no switch aggregates), or Rina's (docs/rina.md).
class Communicator : public Allreduce {
 public:
  // `endpoint`: this worker's, made from its part of the job's plan; `local` the UDP address to
  // bind (port 0: the kernel picks one). `uplink`: where every packet goes (the worker's ToR
  // switch, or the PS when there is no switch); nullopt: each packet goes to its destination's IP
  // at kUdpPort and the worker joins the job's multicast group on its own address
  // (Endpoint::self), for networks where the overlay addresses are the hosts' IPs (bind `local`
  // to the group's address, or 0.0.0.0, at kUdpPort then: a socket bound to a unicast address
  // never receives multicast); only datagrams from the endpoint's sources() reach it. Throws
  // UdpSetupError if the socket cannot be bound or join the group. Starts the loop thread.
  Communicator(std::unique_ptr<Endpoint> endpoint, const SocketAddress& local, std::optional<SocketAddress> uplink);
  // The same on a socket bound already: for a worker that must tell its address to the job's
  // planner (the PyTorch backend's rendezvous) before the plan, and so its endpoint, exists.
  Communicator(std::unique_ptr<Endpoint> endpoint, UdpSocket socket, std::optional<SocketAddress> uplink);
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
  std::string_view algorithm() const override;  // the endpoint's protocol()
  // The same without blocking: the buffer must stay alive and untouched until the future is
  // ready; the future throws CommunicatorError on failure (the buffer then holds the sums of
  // some fragments and the inputs of the others).
  std::future<void> allreduce_async(std::span<float> inout);
  // Stays as long as the endpoint's linger() says (Rina's workers answer the others' asks for
  // finals they missed); ATP's returns at once.
  void close() override;

  SocketAddress local_endpoint() const;  // the bound address (its port when `local` had port 0)
  // Snapshots of the endpoint's, taken on the loop thread (Endpoint::counts, counters,
  // next_exponents, result_exponents, resume_seq).
  EndpointCounts counts() const;
  std::vector<EndpointCounter> counters() const;
  bool picks_exponents() const;
  Linger linger() const;
  std::vector<std::int16_t> result_exponents() const;
  std::vector<std::int16_t> next_exponents(std::uint32_t fragments) const;
  Seq resume_seq() const;
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
