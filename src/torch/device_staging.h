// A collective's tensors on a device (CUDA) staged through pinned host memory, which is what the
// switches and Gloo's CPU transport take (DeviceStaging), and a receive into a device tensor that
// writes its host copy back (StagedReceive). CPU tensors pass through untouched.
#pragma once

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/python.h>

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace atp::torch_backend {

// When the collective is called, its inputs are copied to the host on a copy stream of the device
// (after what the caller's current stream has queued: the kernels that computed them), without
// waiting: the copies run beside the caller's next kernels and while earlier collectives (DDP's
// earlier buckets) are on the network. The group's thread waits for them when the collective's
// turn comes, runs it on the host copies, and copies the results back on the same stream, waiting
// for that before the Work completes: wait() means on a device what it means on the CPU.
class DeviceStaging {
 public:
  // The host tensor a collective reads (`t` itself on the CPU: then nothing is staged).
  at::Tensor input(const at::Tensor& t) { return stage(t, true, false); }
  // The host tensor a collective writes, copied back into `t` after it.
  at::Tensor output(const at::Tensor& t) { return stage(t, false, true); }
  // Both: an in-place collective's (allreduce, broadcast).
  at::Tensor in_place(const at::Tensor& t) { return stage(t, true, true); }
  // `how` (input, output or in_place) of each tensor.
  template <class Stage>
  std::vector<at::Tensor> each(const std::vector<at::Tensor>& tensors, Stage how) {
    std::vector<at::Tensor> host;
    for (const at::Tensor& t : tensors) host.push_back((this->*how)(t));
    return host;
  }
  template <class Stage>
  std::vector<std::vector<at::Tensor>> each(const std::vector<std::vector<at::Tensor>>& lists, Stage how) {
    std::vector<std::vector<at::Tensor>> host;
    for (const auto& list : lists) host.push_back(each(list, how));
    return host;
  }

  // On the caller's thread, after the last input(): marks where the input copies end.
  void inputs_started();
  // On the group's thread, before the collective runs.
  void wait_for_inputs() const;
  // On the group's thread, after it ran: the outputs are back on their device.
  void write_back() const;

 private:
  at::Tensor stage(const at::Tensor& t, bool copy_in, bool copy_back);

  struct Staged {
    at::Tensor device, host;
    bool copy_back;
  };
  std::vector<Staged> staged_;
  std::optional<c10::Stream> stream_;  // the copies' stream on the tensors' device
  std::optional<c10::Event> copied_in_;
};
using Staging = std::shared_ptr<DeviceStaging>;

// A point-to-point receive into a device tensor: Gloo receives into a host copy, which this Work
// writes back when it is waited for or found complete.
class StagedReceive : public c10d::Work {
 public:
  StagedReceive(c10::intrusive_ptr<c10d::Work> inner, Staging staging)
      : Work(-1, c10d::OpType::RECV), inner_(std::move(inner)), staging_(std::move(staging)) {}

  bool wait(std::chrono::milliseconds timeout) override;
  bool isCompleted() override;
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  int sourceRank() const override { return inner_->sourceRank(); }

 private:
  void write_back();
  c10::intrusive_ptr<c10d::Work> inner_;
  Staging staging_;
  std::once_flag written_;
};

}  // namespace atp::torch_backend
