// The real runtimes' event loop (Linux): epoll for readable fds, one timerfd armed at the
// earliest deadline, and a stop() that is safe to call from a signal handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "atp/time.h"

struct epoll_event;

namespace atp {

// Single-threaded: every method except stop() must be called from the thread running run().
// Time is CLOCK_MONOTONIC in ns (atp::Time), the clock the real runtimes hand to the core.
// Setup failures (epoll_create1, timerfd_create, eventfd, epoll_ctl) throw std::system_error.
class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // CLOCK_MONOTONIC now, in ns.
  static Time now();

  // Calls on_readable() whenever fd is readable (level-triggered: a callback that leaves data
  // unread is called again). The loop does not own fd. Throws if fd is already registered.
  void add_readable(int fd, std::function<void()> on_readable);
  // Once fd (already watched) is writable, calls on_writable() once: for a sender whose socket
  // buffer was full. A second call before that replaces the callback. Throws if fd is not watched.
  void once_writable(int fd, std::function<void()> on_writable);
  // Stops watching fd; safe from inside any callback, including fd's own.
  void remove(int fd);

  // The loop's one timer. Before every wait it asks next_deadline() (kNever: none) and arms the
  // timerfd there; when that time has come it calls on_deadline(now). A runtime passes the
  // minimum of its core's next_deadline() and its egress queues' next_release().
  void set_timer(std::function<Time()> next_deadline, std::function<void(Time)> on_deadline);

  // Calls f() once, at `when` or soon after (with the timer's deadline work): for a retry that no
  // fd event announces, such as a sender whose device queue was full. A callback that is due runs
  // before on_deadline. Any number may wait.
  void once_at(Time when, std::function<void()> f);

  // Runs until stop(); then clears the stop request and returns, so run() may be called again.
  // After callbacks that ran longer than kStall, the fds are polled before a due deadline runs:
  // what arrived during them comes before the deadline that would judge its absence.
  // A stop() before run() makes run() return after at most one round of callbacks. Callback
  // exceptions propagate out of run(); an epoll_wait failure other than EINTR throws std::system_error.
  void run();
  // Async-signal-safe (an atomic flag and a write() to an eventfd); callable from any thread.
  void stop() noexcept;

  std::uint64_t wakeups() const { return wakeups_; }  // epoll_wait returns, for tests and stats

 private:
  struct Watch {
    std::function<void()> on_readable;
    std::uint32_t generation;           // tells a re-registered fd from a stale epoll event
    std::function<void()> on_writable;  // set while EPOLLOUT is asked for (once_writable)
  };
  static constexpr int kMaxEvents = 64;  // epoll events taken per wait
  // Callbacks running this long since the last poll are a stall: the fds are polled before a due
  // deadline runs.
  static constexpr Duration kStall = std::chrono::milliseconds(1);
  void set_events(int fd, const Watch& watch, std::uint32_t events);
  // Runs the callbacks of n epoll events; false once one of them asked the loop to stop.
  bool dispatch(const epoll_event* events, int n);
  void arm(Time deadline);
  Time next_wakeup() const;  // the earliest of next_deadline() and the once_at callbacks
  void run_due(Time now);
  void close_all() noexcept;

  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  int stop_fd_ = -1;  // eventfd written by stop()
  std::atomic<bool> stop_requested_{false};
  std::unordered_map<int, std::shared_ptr<Watch>> watches_;
  std::uint32_t next_generation_ = 1;
  std::function<Time()> next_deadline_;
  std::function<void(Time)> on_deadline_;
  std::vector<std::pair<Time, std::function<void()>>> once_at_;  // not yet called, any order
  Time armed_ = kNever;                                          // what the timerfd is set to
  Time polled_{};                                                // when epoll_wait last returned
  std::uint64_t wakeups_ = 0;
};

// The CPU time (s) `thread` (a loop's, running) has used so far; nullopt when the kernel does not
// tell (the thread has ended).
std::optional<double> thread_cpu_seconds(std::thread& thread);

}  // namespace atp
