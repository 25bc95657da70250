// The netns backend's background flow (`atp flow`, tcp_flow.h): the receiver's report of a flow
// on loopback, and the runner's reading of it.
#include "../../src/backends/processes/tcp_flow.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace atp::tcp_flow {
namespace {

TEST(TcpFlowReport, ReadsTheReceiversFlowLine) {
  FlowReport r;
  ASSERT_TRUE(parse_report(
      R"({"event":"flow","bytes":3000,"seconds":0.5,"first_ns":12,"interval_s":0.25,"mbps":[0.032,0.064]})", r));
  EXPECT_EQ(r.bytes, 3000u);
  EXPECT_EQ(r.seconds, 0.5);
  EXPECT_EQ(r.first_ns, 12);
  EXPECT_EQ(r.interval_s, 0.25);
  EXPECT_EQ(r.mbps, (std::vector<double>{0.032, 0.064}));
}

TEST(TcpFlowReport, RefusesEveryOtherLine) {
  FlowReport r;
  EXPECT_FALSE(parse_report(R"({"event":"listening"})", r));
  EXPECT_FALSE(parse_report(R"({"event":"flow","bytes":3000})", r)) << "fields missing";
  EXPECT_FALSE(parse_report(R"({"event":"flow","bytes":"many","seconds":0,"first_ns":0,"interval_s":1,"mbps":[]})", r));
  EXPECT_FALSE(parse_report("not json", r));
  EXPECT_FALSE(parse_report("[1, 2]", r));
}

// A free loopback port, as the kernel picks one (free again once this returns).
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t length = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(TcpFlowReceiver, ReportsEveryByteOfAFlowOnceTheSenderCloses) {
  const SocketAddress at = SocketAddress::loopback(free_port());
  constexpr std::size_t kBytes = 3 << 20;
  testing::internal::CaptureStdout();
  int code = -1;
  std::thread receiver([&] { code = run_receiver(at, std::chrono::milliseconds(10)); });
  const sockaddr_in addr = to_sockaddr(at);
  int fd = -1;
  for (int tries = 0; tries < 500; ++tries) {  // until it listens
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) break;
    ::close(fd);
    fd = -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(fd, 0) << "the receiver never listened";
  const std::vector<char> data(kBytes, 'x');
  std::size_t sent = 0;
  while (sent < kBytes) {
    const ssize_t n = ::send(fd, data.data() + sent, kBytes - sent, 0);
    ASSERT_GT(n, 0);
    sent += static_cast<std::size_t>(n);
  }
  ::close(fd);
  receiver.join();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  std::istringstream lines(out);
  std::string first, last;
  std::getline(lines, first);
  std::getline(lines, last);
  EXPECT_EQ(first, R"({"event":"listening"})");
  FlowReport r;
  ASSERT_TRUE(parse_report(last, r)) << out;
  EXPECT_EQ(r.bytes, kBytes);
  EXPECT_EQ(r.interval_s, 0.01);
  ASSERT_FALSE(r.mbps.empty());
  // The samples add up to the flow: Mbit/s x the interval is each interval's bytes.
  const double sampled = std::accumulate(r.mbps.begin(), r.mbps.end(), 0.0) * r.interval_s * 1e6 / 8;
  EXPECT_NEAR(sampled, static_cast<double>(kBytes), 1.0);
}

}  // namespace
}  // namespace atp::tcp_flow
