// ScheduleExecutor: streams per channel (a peer and a lane), per-element dependency checks, in-place adds.
#include "atp/schedule/executor.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace atp {
namespace {

constexpr std::size_t kFloat = sizeof(float);

// sum[i] += add[i]. In blocks of 8 with restrict pointers so that -O2 (whose cheap cost model
// does not vectorize a loop that needs a scalar tail) still emits SIMD adds: on loopback the add
// was a fifth of the ring's CPU time as a scalar loop.
void add_floats(float* __restrict sum, const float* __restrict add, std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (std::size_t k = 0; k < 8; ++k) sum[i + k] += add[i + k];
  for (; i < count; ++i) sum[i] += add[i];
}

}  // namespace

ScheduleExecutor::ScheduleExecutor(const Schedule& schedule, std::span<float> buffer, std::size_t segment_bytes)
    : schedule_(&schedule), buffer_(reinterpret_cast<std::byte*>(buffer.data())), segment_bytes_(segment_bytes) {
  validate_schedule(schedule);
  if (buffer.size() != schedule.count)
    throw std::invalid_argument("schedule executor: a buffer of " + std::to_string(buffer.size()) +
                                " elements for a schedule over " + std::to_string(schedule.count));
  if (segment_bytes == 0) throw std::invalid_argument("schedule executor: the segment must be at least one byte");
  if (segment_bytes > kMaxSegmentBytes)
    throw std::invalid_argument("schedule executor: a segment of " + std::to_string(segment_bytes) +
                                " bytes is larger than any buffer can be (" + std::to_string(kMaxSegmentBytes) +
                                " bytes)");
  done_bytes_.assign(schedule.steps.size(), 0);
  channel_slot_.assign(static_cast<std::size_t>(schedule.size) * static_cast<std::size_t>(schedule.lanes), -1);
  std::vector<std::size_t> largest_add;  // per channel slot: bytes of its largest receive-add step
  for (std::size_t i = 0; i < schedule.steps.size(); ++i) {
    const ScheduleStep& step = schedule.steps[i];
    int& slot = channel_slot_[static_cast<std::size_t>(atp::channel(schedule, step.peer, step.lane))];
    if (slot < 0) {
      slot = static_cast<int>(channels_.size());
      channels_.emplace_back();
      largest_add.push_back(0);
    }
    Channel& c = channels_[static_cast<std::size_t>(slot)];
    (step.kind == StepKind::kSend ? c.send : c.receive).steps.push_back(static_cast<std::uint32_t>(i));
    // range.size() * 4 cannot overflow: the range lies inside `buffer`, an object in memory.
    if (step.kind == StepKind::kReceiveAdd) {
      std::size_t& largest = largest_add[static_cast<std::size_t>(slot)];
      largest = std::max(largest, step.range.size() * kFloat);
    }
  }
  for (std::size_t slot = 0; slot < channels_.size(); ++slot) {
    // A piece is at most a segment and at most the step, and a partial float (up to 3 bytes) waits
    // at the front: the smaller of the two plus 4 bytes, in whole floats. No overflow: both are
    // at most kMaxSegmentBytes.
    const std::size_t piece = std::min(segment_bytes_, largest_add[slot]);
    if (piece > 0) channels_[slot].staging.resize((piece + kFloat - 1) / kFloat + 1);
  }
  for (Channel& c : channels_) {
    skip_finished(c.send);
    skip_finished(c.receive);
  }
}

ScheduleExecutor::Channel* ScheduleExecutor::find(int channel) {
  if (channel < 0 || static_cast<std::size_t>(channel) >= channel_slot_.size()) return nullptr;
  const int slot = channel_slot_[static_cast<std::size_t>(channel)];
  return slot < 0 ? nullptr : &channels_[static_cast<std::size_t>(slot)];
}

const ScheduleExecutor::Channel* ScheduleExecutor::find(int channel) const {
  return const_cast<ScheduleExecutor*>(this)->find(channel);
}

bool ScheduleExecutor::sends_to(int channel) const {
  const Channel* p = find(channel);
  return p != nullptr && !p->send.steps.empty();
}

bool ScheduleExecutor::receives_from(int channel) const {
  const Channel* p = find(channel);
  return p != nullptr && !p->receive.steps.empty();
}

long ScheduleExecutor::next_send_step(int channel) const {
  const Channel* p = find(channel);
  return p == nullptr || p->send.next == p->send.steps.size() ? -1 : static_cast<long>(p->send.steps[p->send.next]);
}

long ScheduleExecutor::next_receive_step(int channel) const {
  const Channel* p = find(channel);
  return p == nullptr || p->receive.next == p->receive.steps.size()
             ? -1
             : static_cast<long>(p->receive.steps[p->receive.next]);
}

std::size_t ScheduleExecutor::allowed_until(const ScheduleStep& step, std::size_t from) const {
  std::size_t until = step.range.end;
  for (const std::uint32_t index : step.after) {
    const ElementRange& range = schedule_->steps[index].range;
    const std::size_t unfinished = range.begin + done_bytes_[index] / kFloat;  // its first element not finished
    if (unfinished >= range.end || range.end <= from) continue;                // finished, or all before `from`
    until = std::min(until, std::max(from, unfinished));
  }
  return until;
}

std::size_t ScheduleExecutor::movable(const Stream& stream) const {
  if (stream.next == stream.steps.size()) return 0;
  const std::uint32_t index = stream.steps[stream.next];
  const ScheduleStep& step = schedule_->steps[index];
  const std::size_t done = done_bytes_[index];
  const std::size_t limit = (allowed_until(step, step.range.begin + done / kFloat) - step.range.begin) * kFloat;
  if (limit <= done) return 0;
  return std::min(limit - done, segment_bytes_);
}

void ScheduleExecutor::skip_finished(Stream& stream) {
  while (stream.next < stream.steps.size()) {
    const std::uint32_t index = stream.steps[stream.next];
    if (done_bytes_[index] < schedule_->steps[index].range.size() * kFloat) return;
    ++finished_steps_;
    ++stream.next;
  }
}

void ScheduleExecutor::advance(Stream& stream, std::size_t bytes) {
  if (bytes == 0) return;
  if (stream.next == stream.steps.size())
    throw std::logic_error("schedule executor: bytes moved on a stream that has no step left");
  const std::uint32_t index = stream.steps[stream.next];
  if (done_bytes_[index] + bytes > schedule_->steps[index].range.size() * kFloat)
    throw std::logic_error("schedule executor: more bytes moved than the step has");
  done_bytes_[index] += bytes;
  skip_finished(stream);
}

std::span<const std::byte> ScheduleExecutor::next_send(int channel) const {
  const Channel* p = find(channel);
  if (p == nullptr) return {};
  const std::size_t n = movable(p->send);
  if (n == 0) return {};
  const std::uint32_t index = p->send.steps[p->send.next];
  return {buffer_ + schedule_->steps[index].range.begin * kFloat + done_bytes_[index], n};
}

void ScheduleExecutor::sent(int channel, std::size_t bytes) {
  Channel* p = find(channel);
  if (p == nullptr) throw std::logic_error("schedule executor: sent on a channel the schedule does not send on");
  advance(p->send, bytes);
}

std::span<std::byte> ScheduleExecutor::next_receive(int channel) {
  Channel* p = find(channel);
  if (p == nullptr) return {};
  const std::size_t n = movable(p->receive);
  if (n == 0) return {};
  const std::uint32_t index = p->receive.steps[p->receive.next];
  const ScheduleStep& step = schedule_->steps[index];
  const std::size_t done = done_bytes_[index];
  if (step.kind == StepKind::kReceiveCopy) return {buffer_ + step.range.begin * kFloat + done, n};
  return {reinterpret_cast<std::byte*>(p->staging.data()) + done % kFloat, n};
}

void ScheduleExecutor::received(int channel, std::size_t bytes) {
  Channel* p = find(channel);
  if (p == nullptr) throw std::logic_error("schedule executor: received on a channel the schedule does not receive on");
  if (bytes == 0) return;
  if (p->receive.next == p->receive.steps.size())
    throw std::logic_error("schedule executor: bytes received on a stream that has no step left");
  const std::uint32_t index = p->receive.steps[p->receive.next];
  const ScheduleStep& step = schedule_->steps[index];
  if (done_bytes_[index] + bytes > step.range.size() * kFloat)
    throw std::logic_error("schedule executor: more bytes received than the step has");
  if (step.kind == StepKind::kReceiveAdd) {
    // The staging area holds a partial float from before, then these bytes: add the whole floats
    // in place and keep the 0-3 bytes of a partial one at the front.
    const std::size_t done = done_bytes_[index];
    const std::size_t staged = done % kFloat + bytes;
    const std::size_t floats = staged / kFloat;
    float* sum = reinterpret_cast<float*>(buffer_) + step.range.begin + done / kFloat;
    add_floats(sum, p->staging.data(), floats);
    if (staged % kFloat != 0)
      std::memmove(p->staging.data(), reinterpret_cast<std::byte*>(p->staging.data()) + floats * kFloat,
                   staged % kFloat);
  }
  advance(p->receive, bytes);
}

}  // namespace atp
