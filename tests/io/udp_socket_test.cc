// Tests of UdpSocket over loopback with kernel-picked ports: bind errors as one sentence,
// batched send and receive with source addresses, truncation and would-block counted.
#include "atp/io/udp_socket.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "atp/wire.h"

namespace atp {
namespace {

// Waits (at most 1 s, normally microseconds on loopback) until the socket is readable, so that
// the tests do not depend on how fast the kernel hands datagrams over.
bool wait_readable(const UdpSocket& s) {
  pollfd p{s.fd(), POLLIN, 0};
  return ::poll(&p, 1, 1000) == 1;
}

// Receives until `want` datagrams arrived or nothing more comes.
std::vector<std::pair<std::vector<std::uint8_t>, SocketAddress>> receive(UdpSocket& s, std::size_t want,
                                                                         UdpRecvBatch& batch) {
  std::vector<std::pair<std::vector<std::uint8_t>, SocketAddress>> got;
  while (got.size() < want && wait_readable(s)) {
    s.recv_batch(batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto b = batch.bytes(i);
      got.push_back({{b.begin(), b.end()}, batch.from(i)});
    }
  }
  return got;
}

TEST(SocketAddress, ParseAndPrint) {
  const SocketAddress e = SocketAddress::parse("127.0.0.1:9000");
  EXPECT_EQ(e.ip, 0x7F000001u);
  EXPECT_EQ(e.port, 9000);
  EXPECT_EQ(e.to_string(), "127.0.0.1:9000");
  EXPECT_EQ(SocketAddress::loopback(5), SocketAddress::parse("127.0.0.1:5"));
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "localhost:1", "1.2.3:4", "1.2.3.4:x"}) {
    EXPECT_THROW(SocketAddress::parse(bad), std::invalid_argument) << bad;
  }
}

// The kernel's MTU towards an address: the loopback's (65536 on Linux, which IPv4's 16-bit length
// caps at 65535), well above Ethernet's, so that fragments on one host are as wide as the switch
// takes.
TEST(PathMtu, IsTheLoopbacksOnThisHost) {
  std::ifstream lo("/sys/class/net/lo/mtu");
  std::uint32_t expected = 0;
  ASSERT_TRUE(lo >> expected);
  EXPECT_EQ(path_mtu(SocketAddress::loopback(kUdpPort)), std::min<std::uint32_t>(expected, 65535));
  EXPECT_GT(expected, 1500u);
}

// The address a host's packets leave from: towards the loopback, lo's (tests/torch/
// test_real_hosts.py has hosts with addresses of their own find theirs).
TEST(SourceAddress, IsTheOneTheRoutesChoose) {
  EXPECT_EQ(format_address(source_address_towards(SocketAddress::parse("127.0.0.1:9"))), "127.0.0.1");
}

TEST(UdpSocket, BindsAKernelPickedPort) {
  UdpSocket s(SocketAddress::loopback(0));
  EXPECT_GE(s.fd(), 0);
  EXPECT_EQ(s.local_endpoint().ip, 0x7F000001u);
  EXPECT_NE(s.local_endpoint().port, 0);
  EXPECT_GT(s.recv_buffer_bytes(), 0);
  EXPECT_GT(s.send_buffer_bytes(), 0);
}

TEST(UdpSocket, PortInUseIsOneClearSentence) {
  UdpSocket first(SocketAddress::loopback(0));
  const SocketAddress taken = first.local_endpoint();
  try {
    UdpSocket second(taken);
    FAIL() << "bound a port that is in use";
  } catch (const UdpSetupError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot bind UDP " + taken.to_string() + ": address already in use");
    EXPECT_EQ(e.error(), EADDRINUSE);
  }
}

TEST(UdpSocket, SendBatchAndReceiveBatchWithSources) {
  UdpSocket a(SocketAddress::loopback(0));
  UdpSocket b(SocketAddress::loopback(0));
  std::vector<std::vector<std::uint8_t>> payloads;
  std::vector<UdpOutgoing> out;
  for (std::uint8_t i = 0; i < 100; ++i) payloads.push_back(std::vector<std::uint8_t>(10 + i, i));
  for (const auto& p : payloads) out.push_back({b.local_endpoint(), p});
  EXPECT_EQ(a.send_batch(out), 100u);  // more than one sendmmsg chunk
  EXPECT_EQ(a.counters().sent, 100u);

  UdpRecvBatch batch(16, 2048);
  const auto got = receive(b, 100, batch);
  ASSERT_EQ(got.size(), 100u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, payloads[i]) << i;  // loopback keeps the order
    EXPECT_EQ(got[i].second, a.local_endpoint());
  }
  EXPECT_EQ(b.counters().received, 100u);
  EXPECT_EQ(b.recv_batch(batch), 0u);  // nothing left: returns at once
  EXPECT_EQ(b.counters().recv_errors, 0u);
}

TEST(UdpSocket, OversizedDatagramsAreCountedAndDropped) {
  UdpSocket a(SocketAddress::loopback(0));
  UdpSocket b(SocketAddress::loopback(0));
  const std::vector<std::uint8_t> big(300, 1), small(10, 2);
  ASSERT_TRUE(a.send_to(b.local_endpoint(), big));
  ASSERT_TRUE(a.send_to(b.local_endpoint(), small));
  UdpRecvBatch batch(4, 100);
  const auto got = receive(b, 1, batch);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, small);
  EXPECT_EQ(b.counters().truncated, 1u);
}

TEST(UdpSocket, FullSendBufferIsCountedNotThrown) {
  UdpSocketOptions tiny;
  tiny.send_buffer_bytes = 4096;  // the kernel rounds it up a little; still full after a few sends
  tiny.recv_buffer_bytes = 4096;
  UdpSocket a(SocketAddress::loopback(0), tiny);
  UdpSocket b(SocketAddress::loopback(0), tiny);
  const std::vector<std::uint8_t> p(1400, 7);
  std::vector<UdpOutgoing> out(2000, UdpOutgoing{b.local_endpoint(), p});
  // Nobody reads b. Depending on the kernel, loopback either accepts everything (and drops it at
  // b's full receive buffer) or reports a full send buffer: either way send_batch returns at
  // once, never throws, and accounts for every datagram.
  const std::size_t sent = a.send_batch(out);
  EXPECT_EQ(a.counters().sent, sent);
  EXPECT_EQ(sent + a.counters().send_would_block + a.counters().send_errors, out.size());
}

TEST(UdpSocket, OversizedSendIsAnErrorForThatDatagramOnly) {
  UdpSocket a(SocketAddress::loopback(0));
  UdpSocket b(SocketAddress::loopback(0));
  const std::vector<std::uint8_t> too_big(70000, 1), ok(8, 2);
  const std::vector<UdpOutgoing> out{{b.local_endpoint(), too_big}, {b.local_endpoint(), ok}};
  EXPECT_EQ(a.send_batch(out), 1u);
  EXPECT_EQ(a.counters().send_errors, 1u);
  UdpRecvBatch batch;
  const auto got = receive(b, 1, batch);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, ok);
}

// Segmentation offload: a run of equal datagrams to one peer leaves as one message (UDP_SEGMENT)
// and arrives as one (UDP_GRO); recv_batch hands its datagrams out one by one, in order, byte for
// byte, with the sender's address, whatever mix of peers and sizes the batch had.
TEST(UdpSocket, RunsGoOutAndComeInAsOneMessageAndAreHandedOutDatagramByDatagram) {
  const UdpSocketOptions offload{.segmentation_offload = true};
  UdpSocket a(SocketAddress::loopback(0), offload);
  UdpSocket b(SocketAddress::loopback(0), offload);
  UdpSocket c(SocketAddress::loopback(0), offload);
  if (!a.segments_runs()) GTEST_SKIP() << "this kernel has no UDP_SEGMENT";
  std::vector<std::vector<std::uint8_t>> to_b, to_c;
  std::vector<UdpOutgoing> out;
  const auto add = [](std::vector<std::vector<std::uint8_t>>& list, std::size_t count, std::size_t bytes) {
    for (std::size_t i = 0; i < count; ++i) {
      std::vector<std::uint8_t> p(bytes);
      for (std::size_t k = 0; k < bytes; ++k) p[k] = static_cast<std::uint8_t>(list.size() * 7 + k);
      list.push_back(std::move(p));
    }
  };
  // b: a run of 30, a lone datagram of another size, a run of 20 that ends with a shorter one
  // (which a run may: only the last), and a run longer than one message takes (64 KiB).
  add(to_b, 30, 1000);
  add(to_b, 1, 1500);
  add(to_b, 20, 1000);
  add(to_b, 1, 400);
  add(to_b, 100, 1200);
  add(to_c, 5, 600);
  for (std::size_t i = 0; i < to_b.size(); ++i) {
    out.push_back({b.local_endpoint(), to_b[i]});
    if (i == 40) {
      for (const auto& p : to_c) out.push_back({c.local_endpoint(), p});  // between two of b's
    }
  }
  ASSERT_EQ(a.send_batch(out), out.size());
  EXPECT_EQ(a.counters().sent, out.size());
  // Runs: 30 | the 1500 B one and the next, shorter, which ends it | 9 | c's 5 | 10 and the 400 B
  // one | 54 of 1200 B (all that fit in 64 KiB) | the other 46.
  EXPECT_EQ(a.counters().sent_runs, 7u);

  UdpRecvBatch batch;
  const auto got_b = receive(b, to_b.size(), batch);
  ASSERT_EQ(got_b.size(), to_b.size());
  for (std::size_t i = 0; i < got_b.size(); ++i) {
    EXPECT_EQ(got_b[i].first, to_b[i]) << i;
    EXPECT_EQ(got_b[i].second, a.local_endpoint());
  }
  EXPECT_GE(b.counters().received_runs, 1u);
  EXPECT_EQ(b.counters().received, to_b.size());
  const auto got_c = receive(c, to_c.size(), batch);
  ASSERT_EQ(got_c.size(), to_c.size());
  for (std::size_t i = 0; i < got_c.size(); ++i) EXPECT_EQ(got_c[i].first, to_c[i]) << i;
  EXPECT_EQ(b.recv_batch(batch), 0u);
}

// A receiver that did not ask for offload gets a run as separate datagrams (the kernel splits
// it); a sender that did not ask sends datagram by datagram to one that did.
TEST(UdpSocket, OffloadOnOneSideOnlyStillDeliversEveryDatagram) {
  const UdpSocketOptions offload{.segmentation_offload = true};
  for (const bool sender_offloads : {true, false}) {
    UdpSocket a(SocketAddress::loopback(0), sender_offloads ? offload : UdpSocketOptions{});
    UdpSocket b(SocketAddress::loopback(0), sender_offloads ? UdpSocketOptions{} : offload);
    std::vector<std::vector<std::uint8_t>> payloads;
    std::vector<UdpOutgoing> out;
    for (std::uint8_t i = 0; i < 40; ++i) payloads.push_back(std::vector<std::uint8_t>(2000, i));
    for (const auto& p : payloads) out.push_back({b.local_endpoint(), p});
    ASSERT_EQ(a.send_batch(out), out.size());
    EXPECT_EQ(a.counters().sent_runs > 0, sender_offloads && a.segments_runs());
    UdpRecvBatch batch(16, 2048);  // room for one datagram per message: enough without offload
    const auto got = receive(b, payloads.size(), batch);
    ASSERT_EQ(got.size(), payloads.size()) << "sender offloads: " << sender_offloads;
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].first, payloads[i]) << i;
    EXPECT_EQ(b.counters().received_runs, 0u);
    EXPECT_EQ(b.counters().truncated, 0u);
  }
}

// A run refused for its address (broadcast without SO_BROADCAST) is that address's error: its
// datagrams are counted and skipped, and the socket keeps sending runs to other peers.
TEST(UdpSocket, ARunRefusedForItsAddressIsSkippedAndRunsGoOn) {
  const UdpSocketOptions offload{.segmentation_offload = true};
  UdpSocket a(SocketAddress::loopback(0), offload);
  UdpSocket b(SocketAddress::loopback(0), offload);
  if (!a.segments_runs()) GTEST_SKIP() << "this kernel has no UDP_SEGMENT";
  const std::vector<std::uint8_t> p(500, 3);
  const SocketAddress broadcast{0xFFFFFFFFu, b.local_endpoint().port};
  const std::vector<UdpOutgoing> out{
      {broadcast, p}, {broadcast, p}, {broadcast, p}, {b.local_endpoint(), p}, {b.local_endpoint(), p}};
  EXPECT_EQ(a.send_batch(out), 2u);
  EXPECT_EQ(a.counters().send_errors, 3u);
  EXPECT_TRUE(a.segments_runs());
  EXPECT_EQ(a.counters().sent_runs, 1u);
  UdpRecvBatch batch;
  EXPECT_EQ(receive(b, 2, batch).size(), 2u);
}

TEST(UdpSocket, MoveKeepsTheSocket) {
  UdpSocket a(SocketAddress::loopback(0));
  const int fd = a.fd();
  UdpSocket moved = std::move(a);
  EXPECT_EQ(moved.fd(), fd);
  EXPECT_EQ(a.fd(), -1);  // NOLINT(bugprone-use-after-move): the moved-from state is documented
}

}  // namespace
}  // namespace atp
