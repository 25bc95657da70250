// The batch loops UdpSocket, PacketSocket and the switch's ports share (socket_batch.h), on a
// Unix datagram socket pair: truncated messages dropped and the rest compacted, every refused
// item counted, errno as the end of a sentence.
#include "atp/io/socket_batch.h"

#include <gtest/gtest.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

namespace atp::detail {
namespace {

class SocketPair : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, fds_), 0); }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  void send_bytes(const std::string& s) {
    ASSERT_EQ(::send(fds_[0], s.data(), s.size(), 0), static_cast<ssize_t>(s.size()));
  }
  int fds_[2] = {-1, -1};
};

TEST(ErrnoReason, ReadsAsTheEndOfASentence) {
  EXPECT_EQ(errno_reason(ENOENT), "no such file or directory");
  EXPECT_EQ(errno_reason(EPERM), "operation not permitted");
}

TEST_F(SocketPair, RecvDropsTruncatedMessagesAndCompactsTheRest) {
  constexpr std::size_t kSlot = 32;
  send_bytes(std::string(10, 'a'));
  send_bytes(std::string(100, 'b'));  // larger than a slot
  send_bytes(std::string(20, 'c'));
  std::vector<std::uint8_t> storage(kSlot * 4);
  std::array<sockaddr_un, kMaxBatch> names{};
  std::vector<std::pair<std::size_t, std::size_t>> kept;  // (slot, bytes)
  const RecvOutcome out = recv_batch(
      fds_[1], storage.data(), kSlot, 4, names,
      [&](std::size_t k, const sockaddr_un&, std::size_t bytes, const msghdr&) { kept.emplace_back(k, bytes); });
  EXPECT_FALSE(out.error);
  EXPECT_EQ(out.read, 3u);
  EXPECT_EQ(out.kept, 2u);
  EXPECT_EQ(out.truncated, 1u);
  EXPECT_EQ(out.kept_bytes, 30u);
  EXPECT_EQ(kept, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 10}, {1, 20}}));
  EXPECT_EQ(std::string(storage.begin(), storage.begin() + 10), std::string(10, 'a'));
  EXPECT_EQ(std::string(storage.begin() + kSlot, storage.begin() + kSlot + 20), std::string(20, 'c'))
      << "the third message moved into the dropped one's slot";
}

TEST_F(SocketPair, RecvOfNothingIsNoError) {
  std::vector<std::uint8_t> storage(64);
  std::array<sockaddr_un, kMaxBatch> names{};
  const RecvOutcome out = recv_batch(
      fds_[1], storage.data(), 64, 1, names,
      [](std::size_t, const sockaddr_un&, std::size_t, const msghdr&) { ADD_FAILURE() << "nothing was sent"; });
  EXPECT_FALSE(out.error);
  EXPECT_EQ(out.read, 0u);
}

TEST_F(SocketPair, SendCountsWhatTheKernelAcceptedAndRefused) {
  const std::vector<std::string> items = {"one", "three", "seventeen"};
  const SendOutcome out = send_batch(fds_[0], items.size(), [&](std::size_t first, std::size_t, msghdr&, iovec& iov) {
    iov.iov_base = const_cast<char*>(items[first].data());
    iov.iov_len = items[first].size();
  });
  EXPECT_EQ(out.accepted, 3u);
  EXPECT_EQ(out.accepted_bytes, 3u + 5 + 9);
  EXPECT_EQ(out.would_block, 0u);
  EXPECT_EQ(out.errors, 0u);
  char buffer[32];
  for (const std::string& item : items) {
    const ssize_t n = ::recv(fds_[1], buffer, sizeof buffer, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(item.size()));
    EXPECT_EQ(std::string(buffer, static_cast<std::size_t>(n)), item) << "in order";
  }
}

TEST_F(SocketPair, SendStopsAtTheFirstFullBufferAndCountsEveryItemLeft) {
  // A Unix datagram socket queues a bounded number of messages (net.unix.max_dgram_qlen): far
  // fewer than these.
  constexpr std::size_t kItems = 100'000;
  const std::string item(64, 'x');
  const SendOutcome out = send_batch(fds_[0], kItems, [&](std::size_t, std::size_t, msghdr&, iovec& iov) {
    iov.iov_base = const_cast<char*>(item.data());
    iov.iov_len = item.size();
  });
  EXPECT_GT(out.accepted, 0u);
  EXPECT_GT(out.would_block, 0u);
  EXPECT_EQ(out.accepted + out.would_block, kItems) << "every item is sent or counted";
  EXPECT_EQ(out.accepted_bytes, out.accepted * item.size());
  EXPECT_EQ(out.errors, 0u);
}

TEST_F(SocketPair, SendSkipsAndCountsAMessageRefusedForItsOwnReason) {
  // Larger than the socket's send buffer can ever hold: EMSGSIZE, for that message only.
  ASSERT_TRUE(set_buffer_sizes(fds_[0], 0, 4096));
  const std::string huge(1 << 20, 'h'), small = "ok";
  const SendOutcome out = send_batch(fds_[0], 2, [&](std::size_t first, std::size_t, msghdr&, iovec& iov) {
    const std::string& s = first == 0 ? huge : small;
    iov.iov_base = const_cast<char*>(s.data());
    iov.iov_len = s.size();
  });
  EXPECT_EQ(out.errors, 1u);
  EXPECT_EQ(out.accepted, 1u);
  EXPECT_EQ(out.accepted_bytes, small.size());
}

}  // namespace
}  // namespace atp::detail
