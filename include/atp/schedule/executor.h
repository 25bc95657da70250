// Runs one rank's schedule (schedule.h) over its buffer as a state machine, in the style of the
// core's endpoints (worker.h): no I/O, no clock, no loop. A transport asks what to send on each
// channel and where the bytes from each channel go, moves them, and says how many moved; the
// executor adds or copies them into the buffer and unlocks the steps that wait for them. The same
// executor runs under the TCP driver of the baselines (a poll() loop), the in-memory test runner
// (in_memory.h) and ns-3's socket callbacks (src/backends/ns3/tcp_apps.cc); all three move the
// bytes with move_bytes() below.
//
// Per channel (a peer and a lane, schedule.h) one send stream and one receive stream: its send
// steps in list order, its receive steps in list order. A step's bytes are handed out as they
// become allowed (each element once every step it depends on has finished that element) and at
// most `segment_bytes` at a time, so a chunk is forwarded piece by piece while it arrives, and
// streams on different channels run at once. Copied bytes are received straight into the buffer;
// added bytes into a per-channel staging area of one segment (or of the largest add on it, if
// smaller), then added into the buffer (a partial float waits there for its other bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "atp/schedule/schedule.h"

namespace atp {

// The largest piece handed out at once (bytes): 256 KiB keeps syscalls few and the pieces small
// next to a chunk.
inline constexpr std::size_t kDefaultSegmentBytes = 256 << 10;
// The largest segment accepted (bytes): PTRDIFF_MAX, the size of the largest object, so of any
// step; a larger one is a mistake (a negative number cast, say), and below it the staging area's
// size (segment + a partial float) cannot overflow.
inline constexpr std::size_t kMaxSegmentBytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

class ScheduleExecutor {
 public:
  // `schedule` (validated here: std::invalid_argument) and `buffer` (schedule.count elements, else
  // std::invalid_argument) must outlive the executor; segment_bytes in [1, kMaxSegmentBytes], else
  // std::invalid_argument.
  ScheduleExecutor(const Schedule& schedule, std::span<float> buffer, std::size_t segment_bytes = kDefaultSegmentBytes);

  // Every step has finished: the buffer holds this rank's result.
  bool done() const { return finished_steps_ == schedule_->steps.size(); }

  // Streams are named by channel (schedule.h: a peer and a lane; with one lane, the peer's rank).
  // The next bytes to send on `channel`, in stream order: empty when there is nothing to send on
  // it now (no send step left, or the next bytes wait for a step they depend on).
  std::span<const std::byte> next_send(int channel) const;
  // `bytes` (at most next_send(channel).size()) of them have left.
  void sent(int channel, std::size_t bytes);

  // Where the next bytes from `channel` go, in stream order: empty when none are wanted now.
  std::span<std::byte> next_receive(int channel);
  // `bytes` (at most next_receive(channel).size()) arrived there: added or copied into the buffer.
  void received(int channel, std::size_t bytes);

  // Whether the schedule has any step sending on / receiving from `channel` (even an empty one).
  bool sends_to(int channel) const;
  bool receives_from(int channel) const;
  // The index of the step the send (receive) stream of `channel` is at; -1 when it has finished.
  // For error messages: which step waits.
  long next_send_step(int channel) const;
  long next_receive_step(int channel) const;

 private:
  // One direction of one channel: its steps in list order and the first one not finished.
  struct Stream {
    std::vector<std::uint32_t> steps;
    std::size_t next = 0;
  };
  struct Channel {
    Stream send, receive;
    // Added bytes before they are added: min(segment, the largest add on this channel) + a float.
    std::vector<float> staging;
  };

  // The first element past `from` (an element of step `step`'s range) that `step` may not touch
  // yet; step.range.end when it may touch all of them.
  std::size_t allowed_until(const ScheduleStep& step, std::size_t from) const;
  // Bytes of the current step of `stream` that may move now (at most a segment); 0 at its end.
  std::size_t movable(const Stream& stream) const;
  // Counts `bytes` done on the current step of `stream` and moves past finished (or empty) steps.
  void advance(Stream& stream, std::size_t bytes);
  void skip_finished(Stream& stream);
  Channel* find(int channel);
  const Channel* find(int channel) const;

  const Schedule* schedule_;
  std::byte* buffer_;
  std::size_t segment_bytes_;
  std::vector<std::size_t> done_bytes_;  // per step: bytes sent or received so far
  std::size_t finished_steps_ = 0;
  std::vector<int> channel_slot_;  // channel -> index into channels_, or -1
  std::vector<Channel> channels_;
};

// What every transport does with an executor when its sockets may have room or data: moves every
// byte that can move now. A pass offers, for each of `channels` in order, next_send(channel) to
// try_send(channel, bytes) until it takes none, then, for each channel, next_receive(channel) to
// try_receive(channel, buffer) until it fills none; passes repeat while a byte moved, since a receive
// may unlock a send. try_send returns how many of the bytes left (0: none can now); try_receive
// how many bytes it wrote at the front of the buffer (0: none are waiting). Either may throw (a
// transport's error); the executor has then counted exactly the bytes reported before. Returns
// whether any byte moved. The order (all sends, then all receives, channels in the order given) is
// part of the behaviour: under ns-3 it decides the order of the simulation's events.
template <typename TrySend, typename TryReceive>
bool move_bytes(ScheduleExecutor& executor, std::span<const int> channels, TrySend&& try_send,
                TryReceive&& try_receive) {
  bool any = false;
  for (bool moved = true; moved;) {
    moved = false;
    for (const int channel : channels) {
      for (std::span<const std::byte> out = executor.next_send(channel); !out.empty();
           out = executor.next_send(channel)) {
        const std::size_t k = try_send(channel, out);
        if (k == 0) break;
        executor.sent(channel, k);
        moved = true;
      }
    }
    for (const int channel : channels) {
      for (std::span<std::byte> into = executor.next_receive(channel); !into.empty();
           into = executor.next_receive(channel)) {
        const std::size_t k = try_receive(channel, into);
        if (k == 0) break;
        executor.received(channel, k);
        moved = true;
      }
    }
    any = any || moved;
  }
  return any;
}

}  // namespace atp
