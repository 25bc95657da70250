// Unix-domain sockets of one text line per message (line_socket.h): lines whole however they
// are cut on the way, a closed peer told apart from a quiet one, bad paths in one sentence.
#include "atp/io/line_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace atp {
namespace {

using std::chrono::milliseconds;

std::string socket_path(const char* name) { return ::testing::TempDir() + "line_socket_test_" + name; }

// A connected pair through a listener at `path`.
std::pair<LineSocket, LineSocket> connected(LineListener& listener) {
  LineSocket client = LineSocket::connect(listener.path());
  std::optional<LineSocket> server;
  for (int tries = 0; tries < 100 && !server; ++tries) {
    server = listener.accept();
    if (!server) ::usleep(1000);
  }
  if (!server) throw std::runtime_error("no connection to accept");
  return {std::move(client), std::move(*server)};
}

TEST(LineSocket, LinesArriveWholeAndInOrder) {
  LineListener listener(socket_path("order"));
  auto [client, server] = connected(listener);
  EXPECT_EQ(listener.accept(), std::nullopt) << "no second connection waits";
  ASSERT_TRUE(client.send_line("first"));
  ASSERT_TRUE(client.send_line("second line"));
  const auto deadline = LineSocket::Clock::now() + milliseconds(2000);
  EXPECT_EQ(server.read_line(deadline), "first");
  EXPECT_EQ(server.read_line(deadline), "second line");
  EXPECT_FALSE(server.closed());
}

TEST(LineSocket, ALineCutOnTheWayIsHeldUntilItsEnd) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  LineSocket writer(fds[0]), reader(fds[1]);
  ASSERT_EQ(::write(fds[0], "hal", 3), 3);
  EXPECT_TRUE(reader.read_ready().empty()) << "no whole line yet";
  ASSERT_EQ(::write(fds[0], "f\nwhole\nnext", 12), 12);
  EXPECT_EQ(reader.read_ready(), (std::vector<std::string>{"half", "whole"}));
  ASSERT_TRUE(writer.send_line(""));
  EXPECT_EQ(reader.read_line(LineSocket::Clock::now() + milliseconds(2000)), "next");
}

TEST(LineSocket, AQuietPeerTimesOutAClosedOneIsClosed) {
  LineListener listener(socket_path("closed"));
  auto [client, server] = connected(listener);
  EXPECT_EQ(server.read_line(LineSocket::Clock::now() + milliseconds(20)), std::nullopt);
  EXPECT_FALSE(server.closed()) << "only quiet";
  { LineSocket gone = std::move(client); }
  EXPECT_EQ(server.read_line(LineSocket::Clock::now() + milliseconds(2000)), std::nullopt);
  EXPECT_TRUE(server.closed());
  EXPECT_FALSE(server.send_line("anyone?")) << "the peer is gone";
}

TEST(LineSocket, BadPathsAreOneSentenceNamingThem) {
  try {
    LineSocket::connect(socket_path("nobody_listens"));
    ADD_FAILURE() << "connected to nothing";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to " + socket_path("nobody_listens")), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(LineListener(std::string(200, 'x')), std::runtime_error) << "longer than a Unix socket's path";
  EXPECT_THROW(LineListener("/nonexistent/dir/socket"), std::runtime_error);
}

TEST(LineListener, RemovesItsPathWhenDestroyed) {
  const std::string path = socket_path("removed");
  {
    LineListener listener(path);
    EXPECT_EQ(::access(path.c_str(), F_OK), 0);
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace atp
