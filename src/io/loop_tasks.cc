// LoopTasks: an eventfd-woken queue of work for an event loop's thread.
#include "atp/io/loop_tasks.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace atp {

LoopTasks::LoopTasks(EventLoop& loop, std::function<void()> after_tasks)
    : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), after_tasks_(std::move(after_tasks)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot create an event loop's task eventfd");
  loop.add_readable(fd_, [this] { run_waiting(); });
}

LoopTasks::~LoopTasks() { ::close(fd_); }

void LoopTasks::loop_started() {
  std::lock_guard lock(mutex_);
  loop_running_ = true;
}

void LoopTasks::loop_ended() {
  std::lock_guard lock(mutex_);
  loop_running_ = false;
  for (auto& task : waiting_) {
    if (task) task();  // nobody else will run them
  }
  waiting_.clear();
}

void LoopTasks::post(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  if (!loop_running_) {
    // No loop thread: this one is the only one touching what the loop serves. Under the mutex,
    // so that loop_started() cannot begin a loop thread in the middle of it.
    if (task) task();
    return;
  }
  waiting_.push_back(std::move(task));
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
}

void LoopTasks::run_waiting() {
  std::uint64_t ignored = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd_, &ignored, sizeof ignored);
  std::deque<std::function<void()>> ready;
  {
    std::lock_guard lock(mutex_);
    ready.swap(waiting_);
  }
  for (auto& task : ready) {
    if (task) task();  // packaged tasks: exceptions go to the caller's future
  }
  if (after_tasks_) after_tasks_();
}

}  // namespace atp
