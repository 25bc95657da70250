// epoll + timerfd + eventfd event loop for the real (socket) runtimes. It moves readiness and
// time only: what to do with a readable fd or a deadline is the caller's business.
#include "atp/io/event_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <stdexcept>
#include <string>
#include <system_error>

namespace atp {
namespace {

// epoll_event.data.u64 carries (generation << 32 | fd); these two are not real fds' generations.
constexpr std::uint32_t kTimerTag = 0;
constexpr std::uint64_t kStopTag = 1ull << 63;
static_assert(kStopTag >> 32 != kTimerTag);

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), "event loop: " + what);
}

// Drains a timerfd or eventfd counter (8 bytes); EAGAIN just means nothing was pending.
void drain(int fd) {
  std::uint64_t count;
  while (::read(fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
  }
}

}  // namespace

EventLoop::EventLoop() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) fail("cannot create an epoll instance");
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = std::uint64_t{kTimerTag} << 32 | static_cast<std::uint32_t>(timer_fd_);
  const bool ok = timer_fd_ >= 0 && stop_fd_ >= 0 && ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev) == 0 &&
                  (ev.data.u64 = kStopTag, ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev) == 0);
  if (!ok) {
    const int saved = errno;
    close_all();  // a throwing constructor runs no destructor
    errno = saved;
    fail("cannot set up the timerfd and stop eventfd");
  }
}

EventLoop::~EventLoop() { close_all(); }

void EventLoop::close_all() noexcept {
  for (int* fd : {&stop_fd_, &timer_fd_, &epoll_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Time EventLoop::now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return time_from_ns(static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec);
}

void EventLoop::add_readable(int fd, std::function<void()> on_readable) {
  if (fd < 0) throw std::invalid_argument("event loop: cannot watch a negative fd");
  if (watches_.count(fd) != 0)
    throw std::invalid_argument("event loop: fd " + std::to_string(fd) + " is already watched");
  const std::uint32_t generation = next_generation_++;
  if (next_generation_ >= (kStopTag >> 32)) next_generation_ = 1;  // never kTimerTag, never the stop tag
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = std::uint64_t{generation} << 32 | static_cast<std::uint32_t>(fd);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("cannot watch fd " + std::to_string(fd));
  watches_[fd] = std::make_shared<Watch>(Watch{std::move(on_readable), generation, {}});
}

void EventLoop::set_events(int fd, const Watch& watch, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = std::uint64_t{watch.generation} << 32 | static_cast<std::uint32_t>(fd);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) fail("cannot change the events of fd " + std::to_string(fd));
}

void EventLoop::once_writable(int fd, std::function<void()> on_writable) {
  const auto it = watches_.find(fd);
  if (it == watches_.end()) throw std::invalid_argument("event loop: fd " + std::to_string(fd) + " is not watched");
  if (!it->second->on_writable) set_events(fd, *it->second, EPOLLIN | EPOLLOUT);
  it->second->on_writable = std::move(on_writable);
}

void EventLoop::remove(int fd) {
  if (watches_.erase(fd) == 0) return;
  // The fd may already be closed (then epoll dropped it itself): ignore the error.
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::set_timer(std::function<Time()> next_deadline, std::function<void(Time)> on_deadline) {
  next_deadline_ = std::move(next_deadline);
  on_deadline_ = std::move(on_deadline);
}

void EventLoop::once_at(Time when, std::function<void()> f) { once_at_.emplace_back(when, std::move(f)); }

Time EventLoop::next_wakeup() const {
  Time t = next_deadline_ ? next_deadline_() : kNever;
  for (const auto& [when, f] : once_at_) t = std::min(t, when);
  return t;
}

void EventLoop::run_due(Time now) {
  // Taken out first: a callback may ask for another.
  std::vector<std::function<void()>> due;
  std::erase_if(once_at_, [&](auto& entry) {
    if (entry.first > now) return false;
    due.push_back(std::move(entry.second));
    return true;
  });
  for (auto& f : due) f();
  if (next_deadline_ && next_deadline_() <= now) on_deadline_(now);
}

void EventLoop::arm(Time deadline) {
  if (deadline == armed_) return;
  itimerspec spec{};  // all zero: disarm
  if (deadline != kNever) {
    // An it_value of zero would disarm: a deadline at or before the epoch fires at 1 ns.
    const std::int64_t ns = std::max<std::int64_t>(to_ns(deadline), 1);
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  if (::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) fail("cannot arm the timerfd");
  armed_ = deadline;
}

void EventLoop::stop() noexcept {
  stop_requested_.store(true, std::memory_order_relaxed);
  const std::uint64_t one = 1;
  // Only fails if the counter would overflow, i.e. a wake-up is already pending.
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
}

void EventLoop::run() {
  std::array<epoll_event, kMaxEvents> events;
  polled_ = now();
  while (!stop_requested_.load(std::memory_order_relaxed)) {
    // A due deadline runs first, without a trip through the kernel. If it is still due
    // afterwards, the timerfd armed in the past fires at once: fds are polled in between, so a
    // deadline that never moves cannot starve them.
    Time deadline = next_wakeup();
    if (deadline != kNever) {
      Time t = now();
      if (deadline <= t) {
        // After a stall (callbacks that ran long, or a thread the machine did not run), what came
        // in meanwhile goes first: a deadline that judges silence (a worker's progress timeout,
        // a retransmission timeout) must not take packets still waiting in a socket for loss.
        if (t - polled_ >= kStall) {
          const int n = ::epoll_wait(epoll_fd_, events.data(), kMaxEvents, 0);
          polled_ = t;
          if (n > 0 && !dispatch(events.data(), n)) break;
          t = now();
        }
        run_due(t);
        deadline = next_wakeup();
      }
    }
    arm(deadline);
    const int n = ::epoll_wait(epoll_fd_, events.data(), kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;  // a signal (its handler may have called stop())
      fail("epoll_wait failed");
    }
    polled_ = now();
    ++wakeups_;
    if (!dispatch(events.data(), n)) break;
  }
  stop_requested_.store(false, std::memory_order_relaxed);
  drain(stop_fd_);
}

bool EventLoop::dispatch(const epoll_event* events, int n) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t tag = events[i].data.u64;
    if (tag == kStopTag) {
      drain(stop_fd_);
      continue;
    }
    const auto generation = static_cast<std::uint32_t>(tag >> 32);
    const int fd = static_cast<int>(tag & 0xFFFFFFFFu);
    if (generation == kTimerTag) {
      drain(timer_fd_);
      armed_ = kNever;  // fired; the next round re-arms (and runs the deadline if due)
      continue;
    }
    const auto it = watches_.find(fd);
    // Removed by an earlier callback of this round, or removed and re-added: skip.
    if (it == watches_.end() || it->second->generation != generation) continue;
    const std::shared_ptr<Watch> watch = it->second;  // survives remove() from inside the callback
    const std::uint32_t ready = events[i].events;
    if ((ready & EPOLLOUT) != 0 && watch->on_writable) {
      std::function<void()> on_writable = std::move(watch->on_writable);
      watch->on_writable = nullptr;
      set_events(fd, *watch, EPOLLIN);
      on_writable();  // may ask again, or remove fd
      const auto still = watches_.find(fd);
      if (still == watches_.end() || still->second != watch) continue;
    }
    if ((ready & ~std::uint32_t{EPOLLOUT}) != 0) watch->on_readable();
    if (stop_requested_.load(std::memory_order_relaxed)) return false;
  }
  return true;
}

std::optional<double> thread_cpu_seconds(std::thread& thread) {
  clockid_t clock{};
  if (::pthread_getcpuclockid(thread.native_handle(), &clock) != 0) return std::nullopt;
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return std::nullopt;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace atp
