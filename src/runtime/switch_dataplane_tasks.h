// How the switch daemon's other threads (HTTP, the caller of stats_json) run code on its
// dataplane thread, the only one to touch the pipeline, and wait for the result (private).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "atp/runtime/event_loop.h"

namespace atp::detail {

class DataplaneTasks {
 public:
  // Watches an eventfd on `loop` (the dataplane's) that run() writes to when a task waits.
  // Throws std::system_error when there is no eventfd to be had.
  explicit DataplaneTasks(EventLoop& loop) : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    loop.add_readable(fd_, [this] { run_waiting(); });
  }
  ~DataplaneTasks() { ::close(fd_); }
  DataplaneTasks(const DataplaneTasks&) = delete;
  DataplaneTasks& operator=(const DataplaneTasks&) = delete;

  // Whether the loop's thread runs (set by its owner around the thread's life): if not, run()
  // calls `fn` on the calling thread.
  void set_loop_running(bool running) { loop_running_ = running; }

  // Runs `fn` on the dataplane thread (directly when it is not running) and returns its result;
  // throws std::runtime_error if it does not answer within a second. `fn` may run after that,
  // so it holds its inputs by value.
  template <class Fn>
  auto run(Fn fn) -> decltype(fn()) {
    using Result = decltype(fn());
    if (!loop_running_) return fn();
    auto task = std::make_shared<std::packaged_task<Result()>>(std::move(fn));
    std::future<Result> result = task->get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      waiting_.emplace_back([task] { (*task)(); });
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(fd_, &one, sizeof one);
    if (result.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
      throw std::runtime_error("the switch dataplane did not answer within 1 s");
    }
    return result.get();
  }

 private:
  void run_waiting() {
    std::uint64_t ignored = 0;
    [[maybe_unused]] const ssize_t r = ::read(fd_, &ignored, sizeof ignored);
    std::deque<std::function<void()>> ready;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready.swap(waiting_);
    }
    for (auto& task : ready) task();
  }

  int fd_;  // eventfd: a task waits
  std::mutex mutex_;
  std::deque<std::function<void()>> waiting_;
  std::atomic<bool> loop_running_{false};
};

}  // namespace atp::detail
