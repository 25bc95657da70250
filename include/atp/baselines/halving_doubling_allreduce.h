// Rabenseifner's halving-doubling allreduce over plain TCP sockets: reduce-scatter by recursive
// halving, allgather by recursive doubling, log2(p) rounds each, so fewer, larger messages than
// the ring's 2(n-1) (better for small buffers and many ranks) at the same 2(p-1)/p of the buffer
// per rank; sizes that are no power of two fold the extra ranks in with one step before and one
// after (halving_doubling_allreduce_schedule, atp/schedule/builders.h). The same algorithm as
// Gloo's halving-doubling, without Gloo's framework on the path.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/schedule/builders.h"

namespace atp {

class HalvingDoublingAllreduce : public TcpScheduleAllreduce {
 public:
  // Connects to the ranks it exchanges with (its round partners, and its pair when size is no
  // power of two). Arguments, options and errors as RingAllreduce's; algorithm() "halving_doubling".
  HalvingDoublingAllreduce(int rank, int size, std::vector<std::string> addresses, Duration timeout,
                           TcpAllreduceOptions options = {})
      : TcpScheduleAllreduce("halving_doubling", halving_doubling_allreduce_schedule, rank, size, std::move(addresses),
                             timeout, options) {}
};

}  // namespace atp
