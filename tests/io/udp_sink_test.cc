// UdpBatchSink's back-pressure on a real device queue: two network namespaces joined by a veth
// whose sending side has a tbf qdisc far smaller than a window. Needs root (skipped otherwise).
#include "atp/io/udp_sink.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/io/event_loop.h"
#include "atp/io/netns.h"
#include "atp/wire.h"

namespace atp {
namespace {

int shell(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// Namespaces <prefix>a (10.77.0.1) and <prefix>b (10.77.0.2) joined by a veth; a's side sends
// through tbf at 50 Mbit/s with room for about three packets of 4 KiB. Removed in the destructor.
class SlowLink {
 public:
  SlowLink() : prefix_("atpk" + std::to_string(::getpid()) + "-") {
    for (const char* side : {"a", "b"}) {
      run("ip netns add " + ns(side));
      created_.push_back(ns(side));
      run("ip -n " + ns(side) + " link set lo up");
    }
    run("ip -n " + ns("a") + " link add eth0 type veth peer name eth0 netns " + ns("b"));
    for (const char* side : {"a", "b"}) {
      run("ip -n " + ns(side) + " link set eth0 mtu 9000 up");
      run("ip -n " + ns(side) + " addr add 10.77.0." + (side[0] == 'a' ? "1" : "2") + "/24 dev eth0");
    }
    // Both neighbours known, so that the first packets do not wait in the ARP queue instead.
    run("ip netns exec " + ns("a") + " ip neigh replace 10.77.0.2 lladdr " + mac("b") + " dev eth0 nud permanent");
    run("tc -n " + ns("a") + " qdisc replace dev eth0 root tbf rate 50mbit burst 9000 limit 12000");
  }
  ~SlowLink() {
    for (const std::string& n : created_) shell("ip netns del " + n);
  }
  SlowLink(const SlowLink&) = delete;
  SlowLink& operator=(const SlowLink&) = delete;

  std::string ns(const std::string& side) const { return prefix_ + side; }
  std::string path(const std::string& side) const { return "/var/run/netns/" + ns(side); }
  // Packets tbf dropped on a's side.
  std::uint64_t qdisc_drops() const {
    const std::string out = output("tc -n " + ns("a") + " -s qdisc show dev eth0");
    const auto at = out.find("(dropped ");
    return at == std::string::npos ? 0 : std::strtoull(out.c_str() + at + 9, nullptr, 10);
  }

 private:
  std::string mac(const std::string& side) const {
    std::string m = output("ip -n " + ns(side) + " -o link show eth0");
    const auto at = m.find("link/ether ");
    return at == std::string::npos ? "" : m.substr(at + 11, 17);
  }
  static std::string output(const std::string& command) {
    std::string text;
    if (FILE* p = ::popen(command.c_str(), "r")) {
      char buffer[512];
      for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, p)) > 0;) text.append(buffer, n);
      ::pclose(p);
    }
    return text;
  }
  static void run(const std::string& command) {
    if (shell(command) != 0) throw std::runtime_error("test setup failed: " + command);
  }

  std::string prefix_;
  std::vector<std::string> created_;
};

constexpr int kPackets = 200;  // 800 KiB: a window 60 times the qdisc's room

// kPackets ATP-sized datagrams (the first 4 bytes number them) sent from a through `sink`, all
// collected before one flush, as a window is. Returns the numbers b received within 10 s.
std::set<std::uint32_t> send_window(const SlowLink& link, bool report_full_queues, UdpSocketCounters& sent) {
  UdpSocket receiver = [&] {
    netns::ThreadInNamespace in(link.path("b"));
    return UdpSocket(SocketAddress::parse("10.77.0.2:9700"));
  }();
  {
    netns::ThreadInNamespace in(link.path("a"));
    UdpSocket socket(SocketAddress::parse("10.77.0.1:9700"));
    if (report_full_queues) socket.report_full_queues();
    EventLoop loop;
    loop.add_readable(socket.fd(), [] {});
    UdpBatchSink sink(socket, SocketAddress::parse("10.77.0.2:9700"));
    std::vector<std::uint8_t> packet(4126);
    for (std::uint32_t i = 0; i < kPackets; ++i) {
      std::memcpy(packet.data(), &i, sizeof i);
      sink.send(packet);
    }
    std::size_t accepted = 0, refused = 0;
    sink.flush(loop, [&](std::size_t s, std::size_t r) {
      accepted += s;
      refused += r;
      if (accepted + refused == kPackets) loop.stop();
    });
    const Time give_up = EventLoop::now() + std::chrono::seconds(10);
    loop.set_timer([&] { return give_up; }, [&](Time) { loop.stop(); });
    if (accepted + refused < kPackets) loop.run();
    sent = socket.counters();
  }
  std::set<std::uint32_t> got;
  UdpRecvBatch batch(64);
  const Time until = EventLoop::now() + std::chrono::seconds(10);
  while (static_cast<int>(got.size()) < kPackets && EventLoop::now() < until) {
    pollfd p{receiver.fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) != 1) {
      if (static_cast<int>(got.size()) > 0) break;  // the link drained and nothing more comes
      continue;
    }
    for (std::size_t i = 0, n = receiver.recv_batch(batch); i < n; ++i) {
      std::uint32_t number = 0;
      std::memcpy(&number, batch.bytes(i).data(), sizeof number);
      got.insert(number);
    }
  }
  return got;
}

class UdpSinkOnADevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = netns::unavailable_reason(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
  }
};

// With report_full_queues, what the full qdisc refuses waits in the sink and goes as the link
// drains: every packet arrives, in a window 60 times the queue. Before, the kernel dropped them
// at the qdisc after sendmmsg had said "sent", and each cost the sender a retransmission timeout.
TEST_F(UdpSinkOnADevice, AFullDeviceQueueHoldsTheWindowBackInsteadOfDroppingIt) {
  SlowLink link;
  UdpSocketCounters counters;
  const std::set<std::uint32_t> got = send_window(link, /*report_full_queues=*/true, counters);
  EXPECT_EQ(got.size(), static_cast<std::size_t>(kPackets));
  EXPECT_EQ(counters.sent, static_cast<std::uint64_t>(kPackets));
  EXPECT_GT(counters.send_queue_full, 0u) << "the qdisc never refused: the test does not exercise the path";
  EXPECT_EQ(counters.send_errors, 0u);
}

// Without it, the same window is mostly lost on the sender's own host, with no error: what the
// option is for.
TEST_F(UdpSinkOnADevice, WithoutReportingTheQdiscDropsTheWindowInSilence) {
  SlowLink link;
  UdpSocketCounters counters;
  const std::set<std::uint32_t> got = send_window(link, /*report_full_queues=*/false, counters);
  EXPECT_EQ(counters.sent, static_cast<std::uint64_t>(kPackets));  // "sent", says the kernel
  EXPECT_LT(got.size(), static_cast<std::size_t>(kPackets) / 2);
  EXPECT_GT(link.qdisc_drops(), static_cast<std::uint64_t>(kPackets) / 2);
}

}  // namespace
}  // namespace atp
