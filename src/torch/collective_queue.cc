// The group's thread that runs its collectives in call order (collective_queue.h).
#include "collective_queue.h"

#include <utility>

namespace atp::torch_backend {

AtpWork::AtpWork(c10d::OpType type, std::vector<at::Tensor> outputs)
    : Work(-1, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void AtpWork::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

CollectiveQueue::CollectiveQueue() : thread_([this] { run(); }) {}

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

c10::intrusive_ptr<c10d::Work> CollectiveQueue::enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                        Staging staging, std::function<void()> body) {
  auto work = c10::make_intrusive<AtpWork>(type, std::move(outputs));
  {
    std::lock_guard lock(mutex_);
    queue_.push_back([work, staging = std::move(staging), body = std::move(body)] {
      std::exception_ptr error;
      try {
        staging->wait_for_inputs();
        body();
        staging->write_back();
      } catch (...) {
        error = std::current_exception();
      }
      work->complete(error);
    });
  }
  wake_.notify_one();
  return work;
}

void CollectiveQueue::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace atp::torch_backend
