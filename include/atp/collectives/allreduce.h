// The worker-side allreduce interface shared by ATP and the baselines it is compared against
// (schedules over TCP: the ring, halving-doubling; Gloo): a blocking, in-place float32 sum over every rank.
#pragma once

#include <span>
#include <stdexcept>
#include <string_view>

namespace atp {

// An allreduce that cannot make progress (a peer died or closed its connection, a connect or a
// step timed out, ranks disagree on the buffer size): what() is one sentence naming this rank and
// the peer, e.g. "ring allreduce on rank 1 of 4: rank 2 (127.0.0.1:7001) closed the connection".
// Once thrown, the object stays failed: every later call throws again.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Allreduce {
 public:
  virtual ~Allreduce() = default;

  // Sums `data` element-wise over every rank and writes the sum back in place. Every rank calls
  // it with the same number of elements, in the same order of calls. Blocks; throws
  // CollectiveError when it cannot complete.
  virtual void allreduce(std::span<float> data) = 0;

  // Short name for reports, e.g. "ring", "gloo_ring", "gloo_halving_doubling".
  virtual std::string_view algorithm() const = 0;

  // Ends the job cleanly after the last allreduce: every rank calls it; it may wait until every
  // rank has called it (Gloo does, see gloo_allreduce.h). Destroying the object without close()
  // looks to the peers like a crash. Default: nothing to do.
  virtual void close() {}
};

}  // namespace atp
