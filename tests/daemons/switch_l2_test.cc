// Tests of `atp switch` on Linux interfaces: a tiny testbed of network namespaces (one switch, four
// hosts, veth links) with the SwitchDaemon in-process; TCP, ATP aggregation, multicast, bad frames.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "atp/control/control.h"
#include "atp/control/control_client.h"
#include "atp/control/stats.h"
#include "atp/daemons/switch_daemon.h"
#include "atp/io/ethernet.h"
#include "atp/io/netns.h"
#include "atp/io/packet_socket.h"
#include "atp/io/udp_socket.h"
#include "atp/plan/plan.h"
#include "atp/wire.h"
#include "support/test_access.h"
#include "support/test_packets.h"

namespace atp {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Runs a shell command quietly; its exit status (-1 if it did not exit normally).
int shell(const std::string& command) {
  const int rc = std::system((command + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string shell_output(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// Moves the calling thread into network namespace `ns` (sockets it creates from then on live there).
void enter_netns(const std::string& ns) {
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open network namespace " + ns);
  const int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("cannot enter network namespace " + ns);
}

// Runs fn() on a thread inside namespace `ns` and returns its result (exceptions are rethrown).
template <class Fn>
auto in_netns(const std::string& ns, Fn&& fn) -> decltype(fn()) {
  std::optional<decltype(fn())> result;
  std::exception_ptr error;
  std::thread t([&] {
    try {
      enter_netns(ns);
      result.emplace(fn());
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

// One switch namespace and `hosts` host namespaces, each host linked to the switch by a veth pair
// (switch side p<i>, host side eth0, 10.0.0.<i+1>/24, MTU 9000, offloads off), no default route
// and no link to the root namespace. Every namespace is deleted in the destructor, also when the
// test failed half-way through setup.
class Testbed {
 public:
  explicit Testbed(int hosts) {
    static int counter = 0;
    prefix_ = "atpt" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-";
    sw_ = prefix_ + "sw";
    add_netns(sw_);
    for (int i = 0; i < hosts; ++i) {
      const std::string h = prefix_ + "h" + std::to_string(i + 1);
      add_netns(h);
      hosts_.push_back(h);
      const std::string port = "p" + std::to_string(i);
      run("ip -n " + sw_ + " link add " + port + " type veth peer name eth0 netns " + h);
      run("ip -n " + sw_ + " link set " + port + " mtu 9000 up");
      run("ip -n " + h + " link set eth0 mtu 9000 up");
      run("ip -n " + h + " addr add 10.0.0." + std::to_string(i + 1) + "/24 dev eth0");
      // Without this, the kernel hands the raw socket GSO super-frames and partial checksums.
      run("ip netns exec " + sw_ + " ethtool -K " + port + " tx off rx off tso off gso off gro off");
      run("ip netns exec " + h + " ethtool -K eth0 tx off rx off tso off gso off gro off");
    }
    for (const std::string& name : namespaces_) netns::wait_until_carrying(name);  // no first frame dropped
  }
  ~Testbed() {
    for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) shell("ip netns del " + *it);
  }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  const std::string& prefix() const { return prefix_; }
  const std::string& sw() const { return sw_; }
  const std::string& host(int i) const { return hosts_.at(static_cast<std::size_t>(i)); }
  static Address ip(int i) { return 0x0A000001u + static_cast<Address>(i); }  // host i's address

  // True when neither a namespace nor an interface with `prefix` exists (in the root namespace).
  static bool gone(const std::string& prefix) {
    return shell_output("ip netns list").find(prefix) == std::string::npos &&
           shell_output("ip link").find(prefix) == std::string::npos;
  }

 private:
  void add_netns(const std::string& name) {
    run("ip netns add " + name);
    namespaces_.push_back(name);
    run("ip -n " + name + " link set lo up");
  }
  static void run(const std::string& command) {
    if (shell(command) != 0) throw std::runtime_error("testbed setup failed: " + command);
  }

  std::string prefix_, sw_;
  std::vector<std::string> hosts_;
  std::vector<std::string> namespaces_;  // created so far: what the destructor deletes
};

struct Transfer {
  std::vector<std::uint8_t> received;
  double seconds = 0;  // first byte to end of stream at the receiver
  std::string error;
};

// Sends `data` over TCP from host namespace `client_ns` to `server_ip`:5001 in `server_ns`. Every
// blocking call is bounded (10 s), so a broken switch fails the test instead of hanging it.
Transfer tcp_transfer(const std::string& server_ns, Address server_ip, const std::string& client_ns,
                      const std::vector<std::uint8_t>& data) {
  Transfer result;
  const timeval bound{10, 0};
  int listener = -1;
  try {
    listener = in_netns(server_ns, [&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(server_ip);
      a.sin_port = htons(5001);
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0) {
        throw std::runtime_error("cannot listen on TCP port 5001");
      }
      return fd;
    });
  } catch (const std::exception& e) {
    result.error = e.what();
    return result;
  }
  std::thread server([&] {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) {
      result.error = "no TCP connection within 10 s";
      return;
    }
    const int fd = ::accept(listener, nullptr, nullptr);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    std::vector<std::uint8_t> buf(1 << 16);
    std::chrono::steady_clock::time_point first;
    for (;;) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) {
        if (n < 0) result.error = "TCP receive failed or timed out";
        break;
      }
      if (result.received.empty()) first = std::chrono::steady_clock::now();
      result.received.insert(result.received.end(), buf.begin(), buf.begin() + n);
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
    ::close(fd);
  });
  std::string client_error;
  try {
    client_error = in_netns(client_ns, [&]() -> std::string {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);  // bounds connect() too
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(server_ip);
      a.sin_port = htons(5001);
      std::string error;
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        error = "cannot connect (ARP or SYN did not cross the switch)";
      } else {
        std::size_t sent = 0;
        while (sent < data.size()) {
          const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
          if (n <= 0) {
            error = "TCP send failed or timed out";
            break;
          }
          sent += static_cast<std::size_t>(n);
        }
      }
      ::close(fd);  // a graceful close: what is still buffered is delivered, then FIN
      return error;
    });
  } catch (const std::exception& e) {
    client_error = e.what();
  }
  server.join();
  ::close(listener);
  if (!client_error.empty()) result.error = client_error;
  return result;
}

// One switch s0 whose ports p0..p3 are the veths of hosts w0, w1 (the job's workers), ps0 (its
// PS) and h3 (not in the job): the same plan as switch_daemon_test, on real frames.
// Every test runs on a switch of one dataplane thread and of two (each interface's frames fanned
// out over the threads' sockets: ATP frames by their aggregator, the rest to thread 0).
class SwitchL2Test : public ::testing::TestWithParam<std::uint32_t> {
 protected:
  void SetUp() override {
    if (const std::string why = netns::unavailable_reason(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
    config_.threads = GetParam();
    SwitchConfig reclaim_later;
    reclaim_later.reclaim_timeout = 10s;  // longer than the test's bounded waits: nothing is reclaimed under it
    job_ = test::plan_one_switch_job(reclaim_later, topology_, network_);
    const SwitchConfig& sc = topology_.switches[0].config;
    for (int i = 0; i < 4; ++i) ASSERT_EQ(network_.host_address.at(topology_.hosts[i].name), Testbed::ip(i));

    testbed_.emplace(4);
    config_.name = "s0";
    config_.access = test::test_access();
    config_.pipeline = sc;
    for (int i = 0; i < 4; ++i) {
      SwitchPortConfig port;
      port.interface = "p" + std::to_string(i);
      config_.ports.push_back(port);
    }
    for (const auto& [dst, port] : network_.routes.at("s0")) config_.routes.emplace_back(dst, port);
  }

  void TearDown() override {
    if (!testbed_) return;
    hosts_.clear();
    daemon_.reset();
    const std::string prefix = testbed_->prefix();
    testbed_.reset();
    EXPECT_TRUE(Testbed::gone(prefix)) << "left behind: " << shell_output("ip netns list");
  }

  // Starts s0 with config_, created inside the switch namespace (its sockets stay there).
  void start_switch() {
    daemon_ = in_netns(testbed_->sw(), [&] { return std::make_unique<SwitchDaemon>(config_); });
    daemon_->start();
  }

  // An HTTP request to the switch's control plane, made from inside the switch namespace.
  std::pair<int, std::string> http(const std::string& method, const std::string& path, const std::string& body = "") {
    return in_netns(testbed_->sw(), [&] {
      httplib::Client client =
          control::client(SocketAddress::parse(daemon_->control_endpoint()), {test::kOperatorToken, ""});
      httplib::Result r = method == "POST"  ? client.Post(path, body, "application/json")
                          : method == "PUT" ? client.Put(path, body, "application/json")
                                            : client.Get(path);
      return r ? std::pair<int, std::string>{r->status, r->body} : std::pair<int, std::string>{0, "no answer"};
    });
  }

  void install_job() {
    const auto [status, body] = http("POST", "/jobs", control::to_json(job_.switches.at("s0")));
    ASSERT_EQ(status, 200) << body;
  }

  json stats() {
    const std::string text = daemon_->stats_json();
    // Every document the tests read by key is one the typed readers (run_processes) read too.
    EXPECT_NO_THROW(control::switch_stats_from_json(text)) << text;
    return json::parse(text);
  }
  // Polls the counters until pred holds (bounded).
  json stats_when(const std::function<bool(const json&)>& pred, std::chrono::milliseconds bound = 5s) {
    json s;
    const auto give_up = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < give_up) {
      s = stats();
      if (pred(s)) return s;
      std::this_thread::sleep_for(2ms);  // between polls of a bounded wait
    }
    ADD_FAILURE() << "condition not reached; last stats: " << s.dump();
    return s;
  }

  // Host i's UDP socket at kUdpPort, made inside its namespace: bound to its IP, or (`any`) to
  // 0.0.0.0, which a host that receives multicast needs: Linux delivers a datagram to a group only
  // to sockets bound to the wildcard or to that group, never to one bound to a unicast address.
  // (Its packets still leave from its IP, the only address it has.)
  UdpSocket& host_socket(int i, bool any = false) {
    hosts_.push_back(in_netns(testbed_->host(i), [&] { return UdpSocket({any ? 0 : Testbed::ip(i), kUdpPort}); }));
    return hosts_.back();
  }

  std::vector<std::uint8_t> gradient(std::size_t w, Seq seq, const std::vector<std::int32_t>& values) {
    return test::gradient_packet(job_.workers[w], seq, seq % 16, values);
  }

  Topology topology_;
  NetworkPlan network_;
  JobPlan job_;
  SwitchDaemonConfig config_;
  // Declared first so that it is destroyed last: the sockets and the switch live in its namespaces.
  std::optional<Testbed> testbed_;
  std::unique_ptr<SwitchDaemon> daemon_;
  std::deque<UdpSocket> hosts_;  // deque: references stay valid as sockets are added
};

TEST(PacketSocketSetup, ErrorsNameTheInterface) {
  try {
    PacketSocket s("atp-no-such0");
    FAIL() << "opened an interface that does not exist";
  } catch (const PacketSetupError& e) {
    const std::string what = e.what();
    // As root the interface is missing; otherwise the socket itself is not permitted.
    if (::geteuid() == 0) {
      EXPECT_EQ(what, "cannot open interface atp-no-such0: no such device");
    } else {
      EXPECT_EQ(what, "cannot open interface atp-no-such0: operation not permitted (needs root or CAP_NET_RAW)");
    }
  }
}

TEST_P(SwitchL2Test, TcpCrossesTheSwitchIntact) {
  start_switch();
  std::vector<std::uint8_t> data(4 << 20);
  std::mt19937_64 rng(1);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  const Transfer t = tcp_transfer(testbed_->host(1), Testbed::ip(1), testbed_->host(0), data);
  EXPECT_EQ(t.error, "");
  EXPECT_EQ(t.received.size(), data.size());
  EXPECT_TRUE(t.received == data) << "the stream arrived corrupted";

  const json s = stats();
  const int segments = static_cast<int>(data.size() / 8948);  // 9000-byte MTU, 52 bytes of IP and TCP headers
  EXPECT_GT(s["switch"]["non_atp_frames"].get<int>(), segments);
  EXPECT_GT(s["switch"]["l2_flooded"].get<int>(), 0);           // at least the ARP request
  EXPECT_GT(s["switch"]["l2_forwarded"].get<int>(), segments);  // then learned: no flooding
  EXPECT_EQ(s["switch"]["atp_frames"], 0);
  EXPECT_EQ(s["switch"]["truncated"], 0);  // offloads off: no super-frames
  EXPECT_GE(s["switch"]["mac_addresses"].get<int>(), 2);
  // The data went to h2 only: h3's and ps0's ports saw at most the flooded few.
  EXPECT_GT(s["ports"][1]["tx_bytes"].get<std::uint64_t>(), data.size());
  EXPECT_LT(s["ports"][3]["tx_bytes"].get<std::uint64_t>(), 100000u);
}

TEST_P(SwitchL2Test, AggregatesAtpFramesAndMulticastsParameters) {
  start_switch();
  install_job();
  UdpSocket& w0 = host_socket(0, true);
  UdpSocket& w1 = host_socket(1, true);
  UdpSocket& ps = host_socket(2);
  const Address group = multicast_group_address(1);
  w0.join_multicast(group, Testbed::ip(0));
  w1.join_multicast(group, Testbed::ip(1));

  const std::vector<std::int32_t> a{1, 2, 3, -4}, b{10, 20, 30, 40};
  ASSERT_TRUE(w0.send_to({Testbed::ip(2), kUdpPort}, gradient(0, 0, a)));
  ASSERT_TRUE(w1.send_to({Testbed::ip(2), kUdpPort}, gradient(1, 0, b)));
  auto sum = test::receive(ps, 3000);
  ASSERT_TRUE(sum) << stats().dump();
  Header h;
  ASSERT_EQ(decode_header(*sum, h), DecodeError::kOk);
  std::vector<std::int32_t> values(h.value_count);
  load_values(*sum, values);
  EXPECT_EQ(values, (std::vector<std::int32_t>{11, 22, 33, 36}));
  EXPECT_EQ(h.dst, Testbed::ip(2));
  json s = stats_when([](const json& j) { return j["jobs"][0]["completions"] == 1; });
  EXPECT_EQ(s["jobs"][0]["aggregations"], 2);
  EXPECT_EQ(s["switch"]["atp_frames"], 2);
  EXPECT_EQ(s["switch"]["no_neighbor"], 0);
  EXPECT_FALSE(test::receive(ps, 100)) << "more than the one aggregate reached the PS";

  // The PS's result to the job's group reaches both workers (one copy each), not h3.
  UdpSocket& h3 = host_socket(3, true);
  h3.join_multicast(group, Testbed::ip(3));
  Header p;
  p.is_ack = true;
  p.job = 1;
  p.seq = 0;
  p.src = Testbed::ip(2);
  p.dst = group;
  ASSERT_TRUE(ps.send_to({group, kUdpPort}, build_packet(p, values)));
  for (UdpSocket* w : {&w0, &w1}) {
    auto got = test::receive(*w, 3000);
    ASSERT_TRUE(got) << stats().dump();
    Header g;
    ASSERT_EQ(decode_header(*got, g), DecodeError::kOk);
    EXPECT_TRUE(g.is_ack);
    std::vector<std::int32_t> result(g.value_count);
    load_values(*got, result);
    EXPECT_EQ(result, values);
    EXPECT_FALSE(test::receive(*w, 50)) << "a worker got the result twice";
  }
  s = stats_when([](const json& j) { return j["jobs"][0]["deallocations"] == 1; });
  EXPECT_EQ(s["switch"]["aggregators_in_use"], 0);
  EXPECT_FALSE(test::receive(h3, 100)) << "the job's multicast reached a host outside it";

  // The Ethernet counters are in /metrics too.
  const auto [status, metrics] = http("GET", "/metrics");
  EXPECT_EQ(status, 200);
  EXPECT_NE(metrics.find("atp_switch_received_frames_total{switch=\"s0\",kind=\"atp\"} 3"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("atp_switch_l2_frames_total{switch=\"s0\",action=\"flooded\"}"), std::string::npos);
  EXPECT_NE(metrics.find("# TYPE atp_switch_neighbors gauge"), std::string::npos);
}

// Fragments of all 16 aggregators: with two threads each interface's fan-out filter gives every
// frame to the thread that holds its aggregator, which sends the sum to the PS with the MAC
// address another thread may have learned (the hosts' ARP goes to thread 0).
TEST_P(SwitchL2Test, FragmentsOfEveryAggregatorSumOnTheThreadThatHoldsIt) {
  start_switch();
  install_job();
  UdpSocket& w0 = host_socket(0);
  UdpSocket& w1 = host_socket(1);
  UdpSocket& ps = host_socket(2);
  constexpr Seq kFragments = 16;  // one per aggregator
  for (Seq seq = 0; seq < kFragments; ++seq) {
    const auto v = static_cast<std::int32_t>(seq);
    ASSERT_TRUE(w0.send_to({Testbed::ip(2), kUdpPort}, gradient(0, seq, {v, 1, 2, 3})));
    ASSERT_TRUE(w1.send_to({Testbed::ip(2), kUdpPort}, gradient(1, seq, {100, v, 0, -3})));
  }
  std::vector<bool> seen(kFragments, false);
  for (Seq n = 0; n < kFragments; ++n) {
    auto sum = test::receive(ps, 3000);
    ASSERT_TRUE(sum) << "after " << n << " sums: " << stats().dump();
    Header h;
    ASSERT_EQ(decode_header(*sum, h), DecodeError::kOk);
    ASSERT_LT(h.seq, kFragments);
    EXPECT_FALSE(seen[h.seq]) << "seq " << h.seq << " twice";
    seen[h.seq] = true;
    std::vector<std::int32_t> values(h.value_count);
    load_values(*sum, values);
    const auto v = static_cast<std::int32_t>(h.seq);
    EXPECT_EQ(values, (std::vector<std::int32_t>{v + 100, 1 + v, 2, 0})) << "seq " << h.seq;
  }
  const json s = stats_when([](const json& j) { return j["jobs"][0]["completions"] == kFragments; });
  EXPECT_EQ(s["jobs"][0]["aggregations"], 2 * kFragments);
  EXPECT_EQ(s["switch"]["no_neighbor"], 0);
  ASSERT_EQ(s["threads"].size(), GetParam());
  for (const json& thread : s["threads"]) {
    // Both packets of each fragment of its slice, and no other: nothing was handed over.
    EXPECT_EQ(thread["packets"].get<std::uint64_t>(), 2 * kFragments / GetParam()) << thread.dump();
    EXPECT_EQ(thread["handed_off"].get<std::uint64_t>(), 0u) << thread.dump();
  }
}

TEST_P(SwitchL2Test, BadAndSpoofedAtpFramesAreCountedNotForwarded) {
  start_switch();
  install_job();
  UdpSocket& w0 = host_socket(0);
  UdpSocket& ps = host_socket(2);
  UdpSocket& h3 = host_socket(3);
  const SocketAddress to_ps{Testbed::ip(2), kUdpPort};
  // Everything the PS's interface receives, to see that nothing for ATP's port got through.
  PacketSocket ps_wire = in_netns(testbed_->host(2), [] { return PacketSocket("eth0"); });

  // Garbage to ATP's port, a job not installed, and w1's gradient from h3's port.
  ASSERT_TRUE(w0.send_to(to_ps, std::vector<std::uint8_t>{0xde, 0xad, 0xbe, 0xef}));
  Header other;
  ASSERT_EQ(decode_header(gradient(0, 0, {5, 5, 5, 5}), other), DecodeError::kOk);
  other.job = 99;
  ASSERT_TRUE(w0.send_to(to_ps, build_packet(other, std::vector<std::int32_t>{5, 5, 5, 5})));
  ASSERT_TRUE(h3.send_to(to_ps, gradient(1, 0, {1000, 1000, 1000, 1000})));

  // Raw frames from h3 to the broadcast MAC (so forwarding them would reach the PS): an ATP
  // frame with a broken IPv4 checksum, one cut short, and a first fragment.
  PacketSocket h3_wire = in_netns(testbed_->host(3), [] { return PacketSocket("eth0"); });
  std::vector<std::uint8_t> frame;
  build_atp_frame(kBroadcastMac, h3_wire.mac(), gradient(0, 1, {1, 1, 1, 1}), frame);
  std::vector<std::uint8_t> bad_checksum = frame;
  bad_checksum[kEthernetHeaderBytes + 8] = 1;  // TTL 1, checksum not updated
  std::vector<std::uint8_t> cut(frame.begin(), frame.end() - 6);
  std::vector<std::uint8_t> fragment = frame;
  fragment[kEthernetHeaderBytes + 6] |= 0x20;  // more fragments (checksum also broken: either way malformed)
  for (const auto* f : {&bad_checksum, &cut, &fragment}) ASSERT_TRUE(h3_wire.send(*f));

  json s = stats_when([](const json& j) {
    return j["switch"]["malformed_frames"] == 4 && j["switch"]["unknown_job"] == 1 && j["switch"]["not_admitted"] == 1;
  });
  EXPECT_EQ(s["switch"]["atp_frames"], 2);
  EXPECT_EQ(s["jobs"][0]["aggregations"], 0);
  EXPECT_EQ(s["switch"]["aggregators_in_use"], 0);
  EXPECT_FALSE(test::receive(ps, 100)) << "a bad or spoofed packet reached the PS";
  FrameBatch wire;
  std::size_t atp_port_frames = 0;
  while (ps_wire.recv_batch(wire) > 0) {
    for (std::size_t i = 0; i < wire.size(); ++i) {
      const auto parsed = parse_frame(wire.bytes(i));
      if (parsed && parsed->udp && parsed->udp->dst_port == kUdpPort) ++atp_port_frames;
    }
  }
  EXPECT_EQ(atp_port_frames, 0u);

  // The switch still works: the real gradients aggregate.
  UdpSocket& w1 = host_socket(1);
  ASSERT_TRUE(w0.send_to(to_ps, gradient(0, 0, {1, 1, 1, 1})));
  ASSERT_TRUE(w1.send_to(to_ps, gradient(1, 0, {2, 2, 2, 2})));
  auto sum = test::receive(ps, 3000);
  ASSERT_TRUE(sum) << stats().dump();
  std::vector<std::int32_t> values(4);
  load_values(*sum, values);
  EXPECT_EQ(values, (std::vector<std::int32_t>{3, 3, 3, 3}));
}

TEST_P(SwitchL2Test, PortRateLimitsTcpGoodput) {
  config_.ports[1].egress.rate_gbps = 0.1;  // 100 Mbit/s towards h2
  config_.ports[1].egress.buffer_packets = 100;
  start_switch();
  std::vector<std::uint8_t> data(6 << 20, 0x42);
  const Transfer t = tcp_transfer(testbed_->host(1), Testbed::ip(1), testbed_->host(0), data);
  ASSERT_EQ(t.error, "");
  ASSERT_EQ(t.received.size(), data.size());
  const double mbps = static_cast<double>(data.size()) * 8 / t.seconds / 1e6;
  // Frames carry 8948 of 9014 bytes as TCP payload: goodput stays below the rate (plus a margin
  // for the first bytes, which are timed from their arrival); far below it means the switch is slow.
  std::printf("TCP goodput through a 100 Mbit/s port: %.1f Mbit/s\n", mbps);
  EXPECT_LT(mbps, 105) << t.seconds << " s";
  EXPECT_GT(mbps, 30) << t.seconds << " s";
  const json s = stats();
  EXPECT_GT(s["ports"][1]["tx_bytes"].get<std::uint64_t>(), data.size());
}

INSTANTIATE_TEST_SUITE_P(DataplaneThreads, SwitchL2Test, ::testing::Values(1u, 2u),
                         [](const ::testing::TestParamInfo<std::uint32_t>& p) {
                           return std::to_string(p.param) + (p.param == 1 ? "Thread" : "Threads");
                         });

}  // namespace
}  // namespace atp
