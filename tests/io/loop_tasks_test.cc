// Tests of LoopTasks: work handed to an event loop's thread, run there (or on the caller's thread
// while none runs), results and exceptions back, a bounded wait, and nothing lost at the end.
#include "atp/io/loop_tasks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace atp {
namespace {

using std::chrono::milliseconds;

// An event loop on its own thread, with tasks, as the daemons and the Communicator run them.
struct LoopThread {
  explicit LoopThread(std::function<void()> after = {}) : tasks(loop, std::move(after)) {
    tasks.loop_started();
    thread = std::thread([this] { loop.run(); });
  }
  ~LoopThread() { end(); }
  void end() {
    if (!thread.joinable()) return;
    loop.stop();
    thread.join();
    tasks.loop_ended();
  }
  EventLoop loop;
  LoopTasks tasks;
  std::thread thread;
};

TEST(LoopTasks, WithoutALoopThreadTheCallerRunsTheTask) {
  EventLoop loop;
  LoopTasks tasks(loop);
  EXPECT_EQ(tasks.run([] { return std::this_thread::get_id(); }), std::this_thread::get_id());
  int posted = 0;
  tasks.post([&] { ++posted; });
  EXPECT_EQ(posted, 1);
}

TEST(LoopTasks, TasksRunOnTheLoopThreadWithResultsAndExceptionsBack) {
  std::atomic<int> after{0};
  LoopThread l([&] { ++after; });
  const std::thread::id loop_id = l.tasks.run([] { return std::this_thread::get_id(); });
  EXPECT_EQ(loop_id, l.thread.get_id());
  EXPECT_NE(loop_id, std::this_thread::get_id());
  EXPECT_EQ(l.tasks.run([] { return 42; }, milliseconds(1000)), 42);
  EXPECT_THROW(l.tasks.run([]() -> int { throw std::invalid_argument("bad request"); }), std::invalid_argument);
  // after_tasks ran on the loop thread after each batch; the tasks above came one by one.
  EXPECT_EQ(l.tasks.run([&] { return after.load(); }), 3);
}

TEST(LoopTasks, ALoopThreadThatDoesNotAnswerInTimeIsOneSentence) {
  LoopThread l;
  std::atomic<bool> release{false};
  l.tasks.post([&] {
    while (!release) std::this_thread::sleep_for(milliseconds(1));  // the loop thread is busy
  });
  try {
    l.tasks.run([] { return 1; }, milliseconds(20), "the test loop");
    FAIL() << "a busy loop answered";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "the test loop did not answer within 20 ms");
  }
  release = true;
}

// Tasks posted while the loop thread was ending still run (loop_ended runs them), so no caller
// waits for a loop that is gone; after the end, callers run their tasks themselves.
TEST(LoopTasks, TasksThatRaceWithTheEndAreRunByTheEnd) {
  LoopThread l;
  l.loop.stop();
  l.thread.join();  // the loop thread is gone, but loop_ended() has not been called yet
  int ran = 0;
  l.tasks.post([&] { ++ran; });
  EXPECT_EQ(ran, 0);
  l.tasks.loop_ended();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(l.tasks.run([] { return std::this_thread::get_id(); }), std::this_thread::get_id());
}

}  // namespace
}  // namespace atp
