// Child processes (io/processes.h) as `atp testbed` starts a user's command, and the Unix line
// sockets its ranks reach the runner through (io/line_socket.h).
#include "atp/io/processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "atp/io/line_socket.h"

namespace atp {
namespace {

using processes::Clock;

// Every line the child prints until it closes its output.
std::vector<std::string> all_lines(processes::ChildSet& set, processes::Child& child) {
  std::vector<std::string> lines;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!child.eof && Clock::now() < deadline) {
    for (auto& [c, line] : set.wait_lines({&child}, deadline)) lines.push_back(line);
  }
  return lines;
}

TEST(ChildSetCommand, GetsItsEnvironmentFromPathWithStderrInTheSamePipeAndItsExitStatus) {
  setenv("ATP_PROCESSES_TEST_KEPT", "kept", 1);
  setenv("ATP_PROCESSES_TEST_REPLACED", "old", 1);
  processes::ChildSet set;
  processes::Command command{{"sh", "-c",
                              "echo $ATP_PROCESSES_TEST_KEPT $ATP_PROCESSES_TEST_REPLACED $ADDED; echo to-stderr >&2; "
                              "exit 7"},
                             {{"ATP_PROCESSES_TEST_REPLACED", "new"}, {"ADDED", "added"}}};
  processes::Child& child = set.start_command("w0", command);
  EXPECT_EQ(all_lines(set, child), (std::vector<std::string>{"kept new added", "to-stderr"}));
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!set.exited(child) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(WIFEXITED(child.status));
  EXPECT_EQ(WEXITSTATUS(child.status), 7);
  unsetenv("ATP_PROCESSES_TEST_KEPT");
  unsetenv("ATP_PROCESSES_TEST_REPLACED");
}

TEST(ChildSetCommand, ASignalReachesWhatTheCommandStarted) {
  processes::ChildSet set;
  // The shell starts a sleep of its own and prints its pid: the signal to the group stops both.
  processes::Child& child = set.start_command("w0", {{"sh", "-c", "sleep 60 & echo $!; wait"}, {}});
  const std::string line = set.first_lines({&child}, Clock::now() + std::chrono::seconds(5)).front();
  const pid_t grandchild = std::stoi(line);
  set.signal(child, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while ((!set.exited(child) || ::kill(grandchild, 0) == 0) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(set.exited(child));
  EXPECT_NE(::kill(grandchild, 0), 0) << "the command's own child outlived the signal";
}

TEST(ChildSetCommand, ACommandNotFoundExits127) {
  processes::ChildSet set;
  processes::Child& child = set.start_command("w0", {{"no-such-command-atp-test"}, {}});
  all_lines(set, child);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!set.exited(child) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(WEXITSTATUS(child.status), 127);
}

TEST(LineSocket, CarriesLinesBothWaysAndSeesTheOtherEndClose) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("atp-line-" + std::to_string(::getpid()))).string();
  LineListener listener(path);
  LineSocket client = LineSocket::connect(path);
  std::optional<LineSocket> server;
  const auto deadline = LineSocket::Clock::now() + std::chrono::seconds(5);
  while (!server && LineSocket::Clock::now() < deadline) server = listener.accept();
  ASSERT_TRUE(server);
  ASSERT_TRUE(client.send_line("one"));
  ASSERT_TRUE(client.send_line("two"));
  EXPECT_EQ(server->read_line(deadline), "one");
  EXPECT_EQ(server->read_line(deadline), "two");
  ASSERT_TRUE(server->send_line("answer"));
  EXPECT_EQ(client.read_line(deadline), "answer");
  EXPECT_EQ(server->read_ready(), std::vector<std::string>{});
  EXPECT_FALSE(server->closed());
  client = LineSocket(-1);  // closes the client's end
  server->read_ready();
  EXPECT_TRUE(server->closed());
}

TEST(LineSocket, ConnectingWhereNobodyListensNamesThePath) {
  try {
    LineSocket::connect("/nonexistent/atp.sock");
    FAIL() << "connected to nothing";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/atp.sock"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atp
