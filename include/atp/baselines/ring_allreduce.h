// The bandwidth-optimal ring allreduce over plain TCP sockets: the textbook host-based baseline
// that the ATP paper compares in-network aggregation against.
//
// Why written by hand (about 300 lines) rather than taken from a library: it is the exact
// algorithm of the paper's comparison (reduce-scatter then allgather over n chunks, so each rank
// sends and receives 2(n-1)/n of the buffer), with nothing else on the path, so its numbers say
// what the algorithm costs on the link, not what a framework adds. Gloo is the second baseline
// (gloo_allreduce.h).
//
// Connections: rank i listens on addresses[i], connects to rank (i+1)%n (retrying until the
// timeout, so ranks may start in any order) and accepts one connection from rank (i-1)%n. Data
// only flows "forward": rank i sends on the connection it opened and receives on the one it
// accepted. Each allreduce is one stream per direction: an 8-byte header (the element count, so
// ranks that disagree on the size fail with a clear error) then the 2(n-1) chunk steps. A step's
// chunk is forwarded as soon as each piece of it arrives (and, in the reduce-scatter, has been
// added): the pieces are at most `segment_bytes` per send()/recv() call on non-blocking sockets
// under poll(), so sending and receiving overlap and neither direction waits for a whole chunk.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atp/collectives/allreduce.h"
#include "atp/io/socket_address.h"
#include "atp/time.h"

namespace atp {

struct RingAllreduceOptions {
  // Largest send()/recv() per call (bytes): the pipeline's unit. 256 KiB keeps syscalls few and
  // the pieces small next to a chunk.
  std::size_t segment_bytes = 256 << 10;
  // SO_SNDBUF / SO_RCVBUF of both connections (bytes); SO_*BUFFORCE first (root), else capped by
  // net.core.wmem_max / rmem_max. 0 (default): the kernel's autotuning, which grows the buffers to
  // net.ipv4.tcp_rmem / tcp_wmem's maximum (32 MiB / 4 MiB on the Debian 12 test machine), larger
  // than a fixed size; a fixed 4 MiB measured 15-20% slower on loopback (4 ranks, 64 MiB).
  int socket_buffer_bytes = 0;
};

class RingAllreduce : public Allreduce {
 public:
  // Sets up the ring: listens on addresses[rank] ("a.b.c.d:port"), connects to the next rank and
  // accepts the previous one. `timeout` bounds the setup and, later, any stretch without progress
  // inside allreduce(). Throws std::invalid_argument for a bad rank, size or address list, and
  // CollectiveError (naming the peer) if it cannot listen, connect or accept within the timeout
  // (std::system_error if no socket can be opened at all). size == 1 opens no socket.
  RingAllreduce(int rank, int size, std::vector<std::string> addresses, Duration timeout,
                RingAllreduceOptions options = {});
  ~RingAllreduce() override;  // closes both connections at once
  RingAllreduce(const RingAllreduce&) = delete;
  RingAllreduce& operator=(const RingAllreduce&) = delete;

  // Throws CollectiveError naming the peer when the previous rank closes its connection or sends
  // a different element count, when the next rank refuses data, or when neither direction moves
  // for `timeout`. After an error both connections are closed (so the neighbours fail at once
  // too) and every later call throws the same error.
  void allreduce(std::span<float> data) override;
  std::string_view algorithm() const override { return "ring"; }

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  // "rank 2 (127.0.0.1:7002)": how errors name a peer.
  std::string peer_name(int peer) const;
  [[noreturn]] void fail(const std::string& what);
  void connect_ring();
  void close_sockets();

  int rank_;
  int size_;
  std::vector<SocketAddress> addresses_;
  Duration timeout_;
  RingAllreduceOptions options_;
  int send_fd_ = -1;            // to rank (rank+1)%size: the connection this rank opened
  int recv_fd_ = -1;            // from rank (rank-1)%size: the connection this rank accepted
  std::vector<float> staging_;  // reduce-scatter bytes received but not yet added: segment_bytes
  std::string failure_;         // set once an allreduce failed: later calls throw it again
};

}  // namespace atp
