// The bandwidth-optimal ring allreduce over plain TCP sockets: the textbook host-based baseline
// that the ATP paper compares in-network aggregation against.
//
// Why our own rather than a library's: it is the exact algorithm of the paper's comparison
// (reduce-scatter then allgather over n chunks, so each rank sends and receives 2(n-1)/n of the
// buffer), with nothing else on the path, so its numbers say what the algorithm costs on the link,
// not what a framework adds. Gloo is the second baseline (gloo_allreduce.h). The algorithm is the
// schedule ring_allreduce_schedule (atp/schedule/builders.h), the same one the in-memory runner
// checks; the transport is TcpScheduleAllreduce (tcp_schedule_allreduce.h): each rank sends to
// rank+1 and receives from rank-1, one connection per pair, an 8-byte element count first, and a
// step's chunk forwarded piece by piece (at most `segment_bytes` per call) as it arrives and, in
// the reduce-scatter, has been added, so sending and receiving overlap.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/schedule/builders.h"

namespace atp {

using RingAllreduceOptions = TcpAllreduceOptions;

class RingAllreduce : public TcpScheduleAllreduce {
 public:
  // Sets up the ring: listens on addresses[rank] ("a.b.c.d:port") and connects to both
  // neighbours. `timeout` bounds the setup and, later, any stretch without progress inside
  // allreduce(). Errors as TcpScheduleAllreduce's: std::invalid_argument for a bad rank, size or
  // address list; CollectiveError naming the peer, e.g. "ring allreduce on rank 1 of 4: rank 2
  // (127.0.0.1:7002) closed the connection ..."; after an error every later call throws it again.
  // size == 1 opens no socket.
  RingAllreduce(int rank, int size, std::vector<std::string> addresses, Duration timeout,
                RingAllreduceOptions options = {})
      : TcpScheduleAllreduce("ring", ring_allreduce_schedule, rank, size, std::move(addresses), timeout, options) {}
};

}  // namespace atp
