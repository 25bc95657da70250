// The reference runner for schedules: every rank's ScheduleExecutor in one thread, over one FIFO
// byte queue per ordered pair of ranks. For tests (of builders and of the executor) and for
// checking a new algorithm before it meets a network: it fails loudly where a transport would hang.
#pragma once

#include <cstddef>
#include <vector>

#include "atp/schedule/executor.h"
#include "atp/schedule/schedule.h"

namespace atp {

// Runs schedules[r] over buffers[r] for every rank r until all are done, moving at most
// `segment_bytes` per transfer with move_bytes() (executor.h), rank after rank, until no rank can
// move. Returns the bytes each rank sent. Throws std::runtime_error naming both steps, before
// anything moves, when a send and the receive that takes its bytes (the k-th step that carries
// bytes each way between two ranks) differ in size or in their elements, or when one end of a
// direction has a step and the other none (schedule.h); naming the
// ranks and steps when no rank can move and some are not done (a deadlock); or when bytes are left
// in a queue that no step receives. Throws std::invalid_argument when the schedules or buffers do
// not fit together.
std::vector<std::size_t> run_schedules_in_memory(const std::vector<Schedule>& schedules,
                                                 std::vector<std::vector<float>>& buffers,
                                                 std::size_t segment_bytes = kDefaultSegmentBytes);

}  // namespace atp
