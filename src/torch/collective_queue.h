// The "atp" group's collectives run one at a time on a thread of the group's own, in call order
// (as every rank calls them), each completing a c10d::Work (AtpWork) that the caller waits on or
// chains a future to.
#pragma once

#include <torch/python.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "device_staging.h"

namespace atp::torch_backend {

// A collective queued on the group's thread. c10d::Work keeps the completion state (wait,
// isCompleted, isSuccess); the future is what DDP's communication hook chains on.
class AtpWork : public c10d::Work {
 public:
  AtpWork(c10d::OpType type, std::vector<at::Tensor> outputs);

  void complete(std::exception_ptr error);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The group's thread and what is queued for it. Constructing starts the thread; destroying runs
// what is still queued, then joins it.
class CollectiveQueue {
 public:
  CollectiveQueue();
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues `body` between the staging's wait for its inputs and its write-back; the Work, of the
  // caller's `outputs`, completes when all that has run (with the exception any of it threw).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs, Staging staging,
                                         std::function<void()> body);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;  // under mutex_
  bool stopping_ = false;                    // under mutex_
  std::thread thread_;                       // last: it starts once the rest is made
};

}  // namespace atp::torch_backend
