// Tests of EventLoop over real fds (pipes, eventfd): readable callbacks, removal from inside a
// callback, the one timer at the earliest deadline, stop() from a callback and from a signal.
#include "atp/io/event_loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <thread>
#include <vector>

namespace atp {
namespace {

using std::chrono::milliseconds;

struct Pipe {
  Pipe() { EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0); }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void put(char c) { EXPECT_EQ(::write(fds[1], &c, 1), 1); }
  char take() {
    char c = 0;
    EXPECT_EQ(::read(fds[0], &c, 1), 1);
    return c;
  }
  int fds[2] = {-1, -1};
};

TEST(EventLoop, NowIsMonotonicNanoseconds) {
  const Time a = EventLoop::now();
  const Time b = EventLoop::now();
  EXPECT_GT(to_ns(a), 0);
  EXPECT_LE(a, b);
}

TEST(EventLoop, ReadableCallbacksRunUntilStop) {
  EventLoop loop;
  Pipe p;
  std::vector<char> got;
  loop.add_readable(p.fds[0], [&] {
    got.push_back(p.take());
    if (got.size() == 3) loop.stop();
  });
  p.put('a');
  p.put('b');
  p.put('c');  // level-triggered: the callback reads one byte per call and is called again
  loop.run();
  EXPECT_EQ(got, (std::vector<char>{'a', 'b', 'c'}));
  EXPECT_THROW(loop.add_readable(p.fds[0], [] {}), std::invalid_argument);
}

// A sender whose buffer is full asks once_writable: called once the buffer drains, not before,
// and not again unless asked again.
TEST(EventLoop, OnceWritableWaitsForRoomAndFiresOnce) {
  EventLoop loop;
  Pipe p;
  const std::vector<char> chunk(4096, 'x');
  while (::write(p.fds[1], chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(errno, EAGAIN);
  loop.add_readable(p.fds[1], [] {});  // a write end never reads: the watch is for once_writable
  EXPECT_THROW(loop.once_writable(p.fds[0] + 100, [] {}), std::invalid_argument);
  bool drained = false;
  int calls = 0;
  loop.once_writable(p.fds[1], [&] {
    EXPECT_TRUE(drained) << "writable while the pipe was full";
    ++calls;
  });
  const Time start = EventLoop::now();
  int timer_calls = 0;
  loop.set_timer([&] { return timer_calls == 0 ? start + milliseconds(20) : start + milliseconds(60); },
                 [&](Time) {
                   if (++timer_calls == 1) {
                     std::vector<char> sink(1 << 20);
                     while (::read(p.fds[0], sink.data(), sink.size()) > 0) {
                     }
                     drained = true;
                   } else {
                     loop.stop();
                   }
                 });
  loop.run();
  EXPECT_EQ(calls, 1);
}

TEST(EventLoop, StopBeforeRunReturnsAndRunCanBeCalledAgain) {
  EventLoop loop;
  loop.stop();
  loop.run();  // returns at once
  Pipe p;
  int calls = 0;
  loop.add_readable(p.fds[0], [&] {
    p.take();
    ++calls;
    loop.stop();
  });
  p.put('x');
  loop.run();  // the earlier stop request was consumed
  EXPECT_EQ(calls, 1);
}

TEST(EventLoop, RemoveFromInsideCallbacks) {
  EventLoop loop;
  Pipe a, b;
  int a_calls = 0, b_calls = 0;
  // Both are readable in the same round; whichever runs first removes the other.
  loop.add_readable(a.fds[0], [&] {
    ++a_calls;
    loop.remove(b.fds[0]);
    loop.remove(a.fds[0]);
    loop.stop();
  });
  loop.add_readable(b.fds[0], [&] {
    ++b_calls;
    loop.remove(a.fds[0]);
    loop.remove(b.fds[0]);
    loop.stop();
  });
  a.put('1');
  b.put('2');
  loop.run();
  EXPECT_EQ(a_calls + b_calls, 1);
  loop.remove(a.fds[0]);  // removing twice is harmless
}

TEST(EventLoop, TimerFiresAtTheEarliestDeadline) {
  EventLoop loop;
  const Time start = EventLoop::now();
  std::vector<Time> deadlines{start + milliseconds(2), start + milliseconds(1)};
  std::vector<Time> fired;
  loop.set_timer(
      [&] {
        Time earliest = kNever;
        for (Time d : deadlines) earliest = std::min(earliest, d);
        return earliest;
      },
      [&](Time now) {
        fired.push_back(now);
        // Expire every due deadline, as a core's on_timeout would.
        std::erase_if(deadlines, [&](Time d) { return d <= now; });
        if (deadlines.empty()) loop.stop();
      });
  loop.run();
  ASSERT_GE(fired.size(), 1u);
  EXPECT_GE(fired.front(), start + milliseconds(1));
  EXPECT_GE(fired.back(), start + milliseconds(2));
  EXPECT_LE(fired.size(), 2u);
}

TEST(EventLoop, ADeadlineThatNeverMovesDoesNotStarveFds) {
  EventLoop loop;
  Pipe p;
  int timeouts = 0;
  loop.set_timer([] { return time_from_ns(1); }, [&](Time) { ++timeouts; });
  loop.add_readable(p.fds[0], [&] {
    p.take();
    loop.stop();
  });
  p.put('x');
  loop.run();
  EXPECT_GE(timeouts, 1);
}

// A deadline due after a stall (here another fd's callback that ran 30 ms, during which a byte
// arrived) runs after the fd's callback: a worker's progress timeout must not fail a round whose
// packets wait in the socket.
TEST(EventLoop, AfterAStallWhatArrivedComesBeforeTheDeadline) {
  EventLoop loop;
  Pipe p, busy;
  std::vector<char> order;
  bool fired = false;
  const Time start = EventLoop::now();
  loop.set_timer([&] { return fired ? kNever : start + milliseconds(5); },
                 [&](Time) {
                   fired = true;
                   order.push_back('d');
                   loop.stop();
                 });
  loop.add_readable(p.fds[0], [&] {
    p.take();
    order.push_back('r');
  });
  loop.add_readable(busy.fds[0], [&] {
    busy.take();
    std::this_thread::sleep_for(milliseconds(30));
    p.put('x');
  });
  busy.put('x');
  loop.run();
  EXPECT_EQ(order, (std::vector<char>{'r', 'd'}));
}

TEST(EventLoop, EventfdWakesTheLoop) {
  EventLoop loop;
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  std::uint64_t total = 0;
  loop.add_readable(efd, [&] {
    std::uint64_t v = 0;
    ASSERT_EQ(::read(efd, &v, sizeof v), static_cast<ssize_t>(sizeof v));
    total += v;
    loop.stop();
  });
  const std::uint64_t five = 5;
  ASSERT_EQ(::write(efd, &five, sizeof five), static_cast<ssize_t>(sizeof five));
  loop.run();
  EXPECT_EQ(total, 5u);
  loop.remove(efd);
  ::close(efd);
}

EventLoop* g_loop = nullptr;
extern "C" void stop_on_signal(int) { g_loop->stop(); }

TEST(EventLoop, StopFromASignalHandlerWhileWaiting) {
  EventLoop loop;
  g_loop = &loop;
  struct sigaction sa {};
  sa.sa_handler = stop_on_signal;
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
  // SIGALRM 2 ms from now, while the loop waits with no fd and no deadline: only the signal
  // handler's stop() can end run().
  itimerval in_2ms{};
  in_2ms.it_value.tv_usec = 2000;
  ASSERT_EQ(::setitimer(ITIMER_REAL, &in_2ms, nullptr), 0);
  loop.run();
  ::sigaction(SIGALRM, &old, nullptr);
  g_loop = nullptr;
}

}  // namespace
}  // namespace atp
