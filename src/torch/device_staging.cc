// Device tensors staged through pinned host memory (device_staging.h): the copies on a stream of
// the device, and the waits for them.
#include "device_staging.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <thread>

namespace atp::torch_backend {
namespace {

// Waits until the work `stream` had when `event` was recorded on it is done. Polls: torch 1.13's
// c10::Event has no synchronize().
void wait_for(const c10::Event& event) {
  while (!event.query()) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

}  // namespace

void DeviceStaging::inputs_started() {
  if (stream_) copied_in_.emplace(stream_->device_type()).record(*stream_);
}

void DeviceStaging::wait_for_inputs() const {
  if (copied_in_) wait_for(*copied_in_);
}

void DeviceStaging::write_back() const {
  if (!stream_) return;
  const c10::StreamGuard on(*stream_);
  for (const Staged& s : staged_) {
    if (s.copy_back) s.device.copy_(s.host, /*non_blocking=*/true);
  }
  c10::Event copied_back(stream_->device_type());
  copied_back.record(*stream_);
  wait_for(copied_back);
}

at::Tensor DeviceStaging::stage(const at::Tensor& t, bool copy_in, bool copy_back) {
  if (t.device().is_cpu()) return t;
  if (!stream_) {
    // The copy stream starts after what the caller's stream has queued so far.
    const c10::impl::VirtualGuardImpl device(t.device().type());
    const c10::Stream caller = device.getStream(t.device());
    stream_ = device.getStreamFromGlobalPool(t.device());
    c10::Event computed(t.device().type());
    computed.record(caller);
    computed.block(*stream_);
  } else {
    TORCH_CHECK(stream_->device() == t.device(), "atp: a collective's tensors are on one device, got ",
                stream_->device().str(), " and ", t.device().str());
  }
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  if (copy_in) {
    const c10::StreamGuard on(*stream_);
    host.copy_(t, /*non_blocking=*/true);
  }
  staged_.push_back({t, host, copy_back});
  return host;
}

bool StagedReceive::wait(std::chrono::milliseconds timeout) {
  const bool done = inner_->wait(timeout);
  write_back();
  return done;
}

bool StagedReceive::isCompleted() {
  if (!inner_->isCompleted()) return false;
  write_back();
  return true;
}

void StagedReceive::write_back() {
  std::call_once(written_, [this] {
    if (inner_->isSuccess()) staging_->write_back();
  });
}

}  // namespace atp::torch_backend
