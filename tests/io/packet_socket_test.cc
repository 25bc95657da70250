// The switch's raw AF_PACKET sockets (packet_socket.h) on a veth pair in a namespace of the test's
// own: frames arrive whole and in order, batches stop at their capacity, frames too large for a
// batch or for the link are counted and skipped, kernel drops are summed, bad names refused.
#include "atp/io/packet_socket.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "atp/io/netns.h"
#include "atp/io/processes.h"
#include "support/in_child.h"

namespace atp {
namespace {

using Frame = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr int kMtu = 1400;
constexpr std::uint16_t kLocalEtherType = 0x88B5;  // IEEE's "local experimental": nobody else's
const MacAddress kMacA{0x02, 0, 0, 0, 0, 0x0A};
const MacAddress kMacB{0x02, 0, 0, 0, 0, 0x0B};

// A frame from a to b of `bytes` bytes in all, its payload bytes counting up from `first`.
Frame frame(std::size_t bytes, std::uint8_t first) {
  Frame f(bytes);
  std::copy(kMacB.begin(), kMacB.end(), f.begin());
  std::copy(kMacA.begin(), kMacA.end(), f.begin() + 6);
  f[12] = kLocalEtherType >> 8;
  f[13] = kLocalEtherType & 0xFF;
  for (std::size_t i = kEthernetHeaderBytes; i < bytes; ++i) f[i] = static_cast<std::uint8_t>(first + i);
  return f;
}

void run(const std::vector<std::string>& args) {
  std::string output;
  if (processes::run_command(args, "", &output) != 0) throw std::runtime_error(args[0] + " failed: " + output);
}

// A namespace atp<pid>-ps-N of this test alone, IPv6 off (so that nothing but the test's frames
// crosses the link), with a veth pair a <-> b of MTU kMtu, both up; the test's thread is inside it
// while the fixture lives. Everything goes with the namespace, whatever the test did.
class PacketSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = netns::unavailable_reason(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
    static int count = 0;
    name_ = "atp" + std::to_string(::getpid()) + "-ps-" + std::to_string(count++);
    run({"ip", "netns", "add", name_});
    created_ = true;
    inside_.emplace("/var/run/netns/" + name_);
    for (const char* key : {"all", "default"}) {
      std::ofstream(std::string("/proc/sys/net/ipv6/conf/") + key + "/disable_ipv6") << "1";
    }
    run({"ip", "-n", name_, "link", "add", "name", "a", "type", "veth", "peer", "name", "b"});
    run({"ip", "-n", name_, "link", "set", "dev", "a", "address", format_mac(kMacA), "mtu", std::to_string(kMtu),
         "up"});
    run({"ip", "-n", name_, "link", "set", "dev", "b", "address", format_mac(kMacB), "mtu", std::to_string(kMtu),
         "up"});
    netns::wait_until_carrying(name_);  // a, up first, may drop what it sends until then
  }
  void TearDown() override {
    inside_.reset();
    if (!created_) return;
    std::string ignored;
    processes::run_command({"ip", "netns", "del", name_}, "", &ignored);
    EXPECT_TRUE(netns::namespaces_with_prefix(name_).empty());
  }

  std::string name_;
  bool created_ = false;
  std::optional<netns::ThreadInNamespace> inside_;
};

// What one receive loop saw: the frames, each batch's size and whether it said it was full.
struct Received {
  std::vector<Frame> frames;
  std::vector<std::size_t> batch_sizes;
  std::vector<bool> batch_full;
};

// Reads until `want` frames were handed out (bounded: 2 s; fewer frames then fail the test's own
// checks). Each frame is waited for with poll, so no frame is missed for being late.
Received receive(PacketSocket& socket, FrameBatch& batch, std::size_t want) {
  Received got;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (got.frames.size() < want && Clock::now() < deadline) {
    pollfd p{socket.fd(), POLLIN, 0};
    ::poll(&p, 1, 100);
    const std::size_t n = socket.recv_batch(batch);
    if (n == 0 && !batch.full()) continue;
    got.batch_sizes.push_back(n);
    got.batch_full.push_back(batch.full());
    for (std::size_t i = 0; i < n; ++i) got.frames.emplace_back(batch.bytes(i).begin(), batch.bytes(i).end());
  }
  return got;
}

// The socket knows its interface: index, MAC, MTU and the largest frame; a moved-from one is
// empty.
TEST_F(PacketSocketTest, KnowsItsInterfaceAndMovesWhole) {
  PacketSocket a("a");
  EXPECT_GE(a.fd(), 0);
  EXPECT_EQ(a.name(), "a");
  EXPECT_EQ(a.ifindex(), static_cast<int>(::if_nametoindex("a")));
  EXPECT_EQ(a.mac(), kMacA);
  EXPECT_EQ(a.mtu(), kMtu);
  EXPECT_EQ(a.max_frame_bytes(), static_cast<std::size_t>(kMtu) + kEthernetHeaderBytes + 4);
  const int fd = a.fd();
  PacketSocket moved(std::move(a));
  EXPECT_EQ(a.fd(), -1);  // NOLINT(bugprone-use-after-move): what a moved-from socket says
  EXPECT_EQ(moved.fd(), fd);
  EXPECT_EQ(moved.name(), "a");
  EXPECT_EQ(moved.mac(), kMacA);
  PacketSocket b("b");
  b = std::move(moved);
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(b.mac(), kMacA);
}

// Frames sent as one batch on a arrive on b whole, in order, byte for byte, and counted on both
// sides.
TEST_F(PacketSocketTest, FramesSentOnOneEndArriveWholeOnTheOther) {
  PacketSocket a("a"), b("b");
  const std::vector<Frame> sent{frame(60, 1), frame(kMtu + kEthernetHeaderBytes, 2), frame(333, 3)};
  const std::vector<std::span<const std::uint8_t>> spans(sent.begin(), sent.end());
  EXPECT_EQ(a.send_batch(spans), 3u);
  FrameBatch batch;
  const Received got = receive(b, batch, 3);
  EXPECT_EQ(got.frames, sent);
  EXPECT_EQ(b.counters().received, 3u);
  EXPECT_EQ(b.counters().received_bytes, 60u + kMtu + kEthernetHeaderBytes + 333u);
  EXPECT_EQ(a.counters().sent, 3u);
  EXPECT_EQ(a.counters().sent_bytes, b.counters().received_bytes);
  EXPECT_TRUE(a.send(frame(64, 9)));
  EXPECT_EQ(receive(b, batch, 1).frames, std::vector<Frame>{frame(64, 9)});
}

// A socket does not read what is sent out of its interface: the frames of another socket (or of
// the host's stack) on the same interface are not received frames. (The kernel never shows a
// socket its own sends; another's it does, unless told not to.)
TEST_F(PacketSocketTest, FramesSentOutOfItsInterfaceAreNotReadBack) {
  PacketSocket a("a"), other_on_a("a"), b("b");
  ASSERT_TRUE(other_on_a.send(frame(64, 1)));
  FrameBatch batch;
  EXPECT_EQ(receive(b, batch, 1).frames, std::vector<Frame>{frame(64, 1)});
  // An outgoing frame reaches the sockets of its interface before the driver passes it to b.
  EXPECT_EQ(a.recv_batch(batch), 0u) << "a read a frame sent out of its interface";
  EXPECT_EQ(a.counters().received, 0u);
  EXPECT_EQ(other_on_a.recv_batch(batch), 0u);
}

// A batch reads at most its capacity and says "full" exactly when it did: more may wait.
TEST_F(PacketSocketTest, ABatchStopsAtItsCapacityAndSaysMoreMayWait) {
  PacketSocket a("a"), b("b");
  std::vector<Frame> sent;
  for (std::uint8_t i = 0; i < 5; ++i) sent.push_back(frame(100, i));
  for (const Frame& f : sent) ASSERT_TRUE(a.send(f));
  FrameBatch batch(2, 256);
  EXPECT_EQ(batch.capacity(), 2u);
  const Received got = receive(b, batch, 5);
  EXPECT_EQ(got.frames, sent);
  ASSERT_FALSE(got.batch_sizes.empty());
  for (std::size_t i = 0; i < got.batch_sizes.size(); ++i) {
    EXPECT_LE(got.batch_sizes[i], 2u);
    EXPECT_EQ(got.batch_full[i], got.batch_sizes[i] == 2) << "batch " << i;
  }
  EXPECT_FALSE(batch.full()) << "the last read found fewer than its capacity";
}

// A frame larger than the batch's slots is dropped and counted as truncated, and the frames around
// it are handed out in order; a batch of no room is refused.
TEST_F(PacketSocketTest, AFrameLargerThanTheBatchIsCountedAsTruncatedAndDropped) {
  PacketSocket a("a"), b("b");
  const std::vector<Frame> sent{frame(60, 1), frame(200, 2), frame(100, 3)};
  const std::vector<std::span<const std::uint8_t>> spans(sent.begin(), sent.end());
  ASSERT_EQ(a.send_batch(spans), 3u);
  FrameBatch batch(4, 100);
  const Received got = receive(b, batch, 2);
  EXPECT_EQ(got.frames, (std::vector<Frame>{sent[0], sent[2]}));
  EXPECT_EQ(b.counters().truncated, 1u);
  EXPECT_EQ(b.counters().received, 2u);
  EXPECT_EQ(b.counters().received_bytes, 160u);
  EXPECT_THROW(FrameBatch(0, 100), std::invalid_argument);
  EXPECT_THROW(FrameBatch(4, 0), std::invalid_argument);
  EXPECT_THROW(FrameBatch(65, 100), std::invalid_argument) << "one recvmmsg reads 64: it would never be full()";
}

// A frame larger than the link carries is refused and counted; the frames after it in the same
// batch are still sent. A link that is down refuses every frame, counted likewise.
TEST_F(PacketSocketTest, AFrameTheLinkCannotCarryIsSkippedAndCounted) {
  PacketSocket a("a"), b("b");
  const Frame too_large = frame(a.max_frame_bytes() + 100, 2);
  const std::vector<Frame> sent{frame(80, 1), too_large, frame(90, 3)};
  const std::vector<std::span<const std::uint8_t>> spans(sent.begin(), sent.end());
  EXPECT_EQ(a.send_batch(spans), 2u);
  EXPECT_EQ(a.counters().sent, 2u);
  EXPECT_EQ(a.counters().send_errors, 1u);
  EXPECT_EQ(a.counters().send_would_block, 0u);
  FrameBatch batch;
  EXPECT_EQ(receive(b, batch, 2).frames, (std::vector<Frame>{sent[0], sent[2]}));

  run({"ip", "-n", name_, "link", "set", "dev", "a", "down"});
  EXPECT_FALSE(a.send(sent[0]));
  EXPECT_EQ(a.counters().send_errors, 2u);
  EXPECT_EQ(a.counters().sent, 2u);
}

// Frames the kernel dropped for a full receive buffer are summed over reads (the kernel resets
// its count on each): with every frame read, received + drops is what was sent.
TEST_F(PacketSocketTest, KernelDropsAreSummedOverReads) {
  PacketSocket a("a");
  PacketSocketOptions small;
  small.recv_buffer_bytes = 1;  // the kernel's least: room for a frame or two
  PacketSocket b("b", small);
  constexpr std::size_t kSent = 20;
  for (std::size_t i = 0; i < kSent; ++i) ASSERT_TRUE(a.send(frame(1000, static_cast<std::uint8_t>(i))));
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (b.kernel_drops() == 0 && Clock::now() < deadline) ::usleep(1000);  // nothing read yet
  const std::uint64_t first = b.kernel_drops();
  EXPECT_GT(first, 0u);
  FrameBatch batch;
  while (b.counters().received + b.kernel_drops() < kSent && Clock::now() < deadline) {
    pollfd p{b.fd(), POLLIN, 0};
    ::poll(&p, 1, 10);
    b.recv_batch(batch);
  }
  EXPECT_EQ(b.counters().received + b.kernel_drops(), kSent);
  EXPECT_GE(b.kernel_drops(), first) << "a sum never goes down";
  EXPECT_GT(b.counters().received, 0u);
}

// A name that is no interface here is refused in one sentence naming it, with errno ENODEV; so
// are names no interface can have.
TEST_F(PacketSocketTest, ABadInterfaceNameIsRefusedInOneSentence) {
  for (const std::string name : {"nosuch0", "", "sixteen-chars-xx"}) {
    try {
      PacketSocket s(name);
      ADD_FAILURE() << "opened '" << name << "'";
    } catch (const PacketSetupError& e) {
      EXPECT_EQ(std::string(e.what()), "cannot open interface " + name + ": no such device");
      EXPECT_EQ(e.error(), ENODEV);
    }
  }
}

// A process without CAP_NET_RAW is told that it needs root.
TEST(PacketSocket, WithoutTheCapabilityItSaysRootIsNeeded) {
  const std::string text = test::in_child([] {
    if (::geteuid() == 0 && (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)) {
      return std::string("cannot drop root");
    }
    try {
      PacketSocket s("lo");
    } catch (const PacketSetupError& e) {
      return std::to_string(e.error()) + " " + e.what();
    }
    return std::string("opened");
  });
  EXPECT_EQ(text,
            std::to_string(EPERM) + " cannot open interface lo: operation not permitted (needs root or CAP_NET_RAW)");
}

}  // namespace
}  // namespace atp
