// How other threads run code on an event loop's thread, the only one to touch what the loop
// serves (a switch's pipeline, a PS's endpoints, a worker's endpoint), and wait for the result.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "atp/io/event_loop.h"

namespace atp {

// Tasks wait under a mutex and an eventfd wakes the loop, which runs them in order. While no loop
// thread runs (before loop_started(), after loop_ended()), the caller's thread is the only one
// and runs its task itself; loop_ended() runs the tasks that raced with the end, so none is lost
// and no caller waits for a loop that is gone.
class LoopTasks {
 public:
  // Watches an eventfd on `loop`. `after_tasks` (optional) runs on the loop thread after each
  // batch of tasks: what the owner does after anything happened, such as sending what the tasks
  // queued. Throws std::system_error when there is no eventfd to be had.
  explicit LoopTasks(EventLoop& loop, std::function<void()> after_tasks = {});
  ~LoopTasks();
  LoopTasks(const LoopTasks&) = delete;
  LoopTasks& operator=(const LoopTasks&) = delete;

  // Around the loop thread's life: before it starts, and once it has returned.
  void loop_started();
  void loop_ended();

  // Runs `fn` on the loop thread (on this one while none runs) and returns its result;
  // exceptions of `fn` are rethrown here. With a `timeout`, a loop thread that has not run `fn`
  // by then is a std::runtime_error ("<who> did not answer within N ms") and `fn` runs later
  // unwatched: so `fn` must then hold its inputs by value.
  template <class Fn>
  auto run(Fn fn, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
           const std::string& who = "the event loop") -> decltype(fn()) {
    using Result = decltype(fn());
    auto task = std::make_shared<std::packaged_task<Result()>>(std::move(fn));
    std::future<Result> result = task->get_future();
    post([task] { (*task)(); });
    if (timeout && result.wait_for(*timeout) != std::future_status::ready) {
      throw std::runtime_error(who + " did not answer within " + std::to_string(timeout->count()) + " ms");
    }
    return result.get();
  }

  // Runs `task` on the loop thread, then after_tasks, without waiting; while no loop thread runs,
  // runs `task` on this one, now (no after_tasks: that is the loop's work). An empty task only
  // wakes the loop for after_tasks. A task must not post.
  void post(std::function<void()> task);

 private:
  void run_waiting();

  int fd_ = -1;  // eventfd: tasks wait
  std::function<void()> after_tasks_;
  std::mutex mutex_;
  std::deque<std::function<void()>> waiting_;  // under mutex_
  bool loop_running_ = false;                  // under mutex_
};

}  // namespace atp
