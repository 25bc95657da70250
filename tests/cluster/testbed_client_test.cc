// The testbed's job requests (cluster/testbed_client.h): codecs both ways, and rank 0's client
// against a runner that refuses, answers garbage, or is not there.
#include "atp/cluster/testbed_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace atp {
namespace {

TEST(TestbedRequest, RoundTrips) {
  TestbedRequest install;
  install.install = {{"w0", "w2"}, "rina", false, 358, 1e6, std::chrono::milliseconds(2), std::chrono::seconds(30)};
  const TestbedRequest back = testbed_request_from_json(to_json(install));
  EXPECT_EQ(back.kind, TestbedRequest::Kind::kInstall);
  EXPECT_EQ(back.install.hosts, install.install.hosts);
  EXPECT_EQ(back.install.protocol, "rina");
  EXPECT_FALSE(back.install.in_network_aggregation);
  EXPECT_EQ(back.install.values_per_packet, 358);
  EXPECT_EQ(back.install.scale, 1e6);
  EXPECT_EQ(back.install.retransmit_timeout, std::chrono::milliseconds(2));
  EXPECT_EQ(back.install.progress_timeout, std::chrono::seconds(30));
  TestbedRequest stats;
  stats.kind = TestbedRequest::Kind::kAggregations;
  stats.job = 77;
  EXPECT_EQ(testbed_request_from_json(to_json(stats)).job, 77);
}

TEST(TestbedRequest, ALineThatDoesNotReadIsOneSentence) {
  for (const std::string line : {"", "[1]", "{\"install\": {\"hosts\": 3}}", "{\"other\": 1}"}) {
    EXPECT_THROW(testbed_request_from_json(line), std::runtime_error) << line;
  }
}

// A runner that answers every request with `answer`.
class FakeRunner {
 public:
  explicit FakeRunner(std::string answer)
      : path_((std::filesystem::temp_directory_path() / ("atp-testbed-test-" + std::to_string(::getpid()))).string()),
        listener_(path_),
        thread_([this, answer = std::move(answer)] {
          std::optional<LineSocket> socket;
          const auto deadline = LineSocket::Clock::now() + std::chrono::seconds(5);
          while (!socket && LineSocket::Clock::now() < deadline) socket = listener_.accept();
          if (socket && socket->read_line(deadline)) socket->send_line(answer);
        }) {}
  ~FakeRunner() { thread_.join(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  LineListener listener_;
  std::thread thread_;
};

TEST(TestbedClient, TheRunnersRefusalIsItsSentence) {
  FakeRunner runner(testbed_error_to_json("the ranks' hosts (x) are not workers of one job of the testbed's file"));
  TestbedClient client(runner.path());
  try {
    client.install({{"x"}, "atp", true, 0, 1e8, {}, {}});
    FAIL() << "installed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the ranks' hosts (x) are not workers of one job of the testbed's file");
  }
}

TEST(TestbedClient, AnAnswerThatDoesNotReadIsLoud) {
  FakeRunner runner("{\"job\": 3, \"configs\": 7}");
  TestbedClient client(runner.path());
  EXPECT_THROW(client.install({{"w0"}, "atp", true, 0, 1e8, {}, {}}), std::runtime_error);
}

TEST(TestbedClient, NoRunnerNamesTheSocketAndAtpTestbed) {
  try {
    TestbedClient client("/nonexistent/testbed.sock");
    FAIL() << "connected";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("atp testbed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atp
