// The netns testbed (testbed.h) of a tiny planned topology: a namespace per node, veth links that
// carry frames between the right ports, addresses, MTU, offloads, host rates, drops, and nothing
// left on any way out; and the testbed's controller (testbed_controller.h) installing a rank's job
// on running daemons and removing it when the asking connection closes. Runs ATP_BINARY.
#include "../../src/backends/processes/testbed.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../src/backends/processes/process_network.h"
#include "../../src/backends/processes/testbed_controller.h"
#include "atp/cluster/testbed_client.h"
#include "atp/io/packet_socket.h"
#include "atp/io/processes.h"
#include "atp/scenario/scenario.h"

namespace atp {
namespace {

using Clock = std::chrono::steady_clock;

// Two switches, three hosts: host links (w0, w1 on tor0; ps on core) and one switch link.
const char* const kScenario = R"(
topology:
  switches: [{name: tor0}, {name: core}]
  hosts:
    - {name: w0, switch: tor0}
    - {name: w1, switch: tor0}
    - {name: ps, switch: core}
  links: [[tor0, core]]
jobs:
  - {name: a, workers: [w0, w1], ps: [ps], elements: 1000, rounds: 1}
)";

constexpr std::uint32_t kMtu = 1500;

std::string own_prefix() { return "atp" + std::to_string(::getpid()) + "-"; }

std::string output_of(const std::vector<std::string>& args) {
  std::string out;
  processes::run_command(args, "", &out);
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Removes the namespaces of `prefix` that are left, on every way out of a test.
struct RemoveLeftovers {
  std::string prefix;
  ~RemoveLeftovers() {
    for (const std::string& name : netns::namespaces_with_prefix(prefix)) output_of({"ip", "netns", "del", name});
  }
};

class TestbedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = netns::unavailable_reason(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
    network_ = plan_network(scenario_.topology);
    network_.mtu_bytes = kMtu;
  }
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_TRUE(netns::namespaces_with_prefix(own_prefix()).empty()) << "namespaces left behind";
  }
  std::string end_name(const PortRef& end) const {
    return network_.host_address.contains(end.node) ? netns::kHostInterface : netns::switch_interface(end.port);
  }

  const Scenario scenario_ = parse_scenario_yaml(kScenario);
  NetworkPlan network_;  // points at scenario_'s topology
  RemoveLeftovers leftovers_{own_prefix()};
};

// A run that was SIGKILLed leaves its namespaces; the next run's remove_stale removes them all.
// (First: later tests start threads, and this one forks.)
TEST_F(TestbedTest, TheNamespacesOfAKilledRunAreRemovedByTheNext) {
  for (const std::string& name : netns::namespaces_with_prefix("atp")) {
    if (processes::left_by_dead_process(name, "atp")) GTEST_SKIP() << "skipped: another run's leftover " << name;
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t run = ::fork();
  if (run == 0) {  // the run to be killed: its testbed, then it waits
    ::close(fds[0]);
    std::string said = "built";
    try {
      netns::Testbed testbed(network_);
      [[maybe_unused]] const ssize_t n = ::write(fds[1], said.data(), said.size());
      ::pause();
    } catch (const std::exception& e) {
      said = e.what();
    }
    [[maybe_unused]] const ssize_t n = ::write(fds[1], said.data(), said.size());
    ::_exit(1);
  }
  ::close(fds[1]);
  const RemoveLeftovers killed_runs{"atp" + std::to_string(run) + "-"};
  char said[256] = {};
  const ssize_t n = ::read(fds[0], said, sizeof said - 1);
  ::close(fds[0]);
  ::kill(run, SIGKILL);
  ::waitpid(run, nullptr, 0);
  ASSERT_GT(n, 0);
  ASSERT_EQ(std::string(said), "built");
  ASSERT_EQ(netns::namespaces_with_prefix(killed_runs.prefix).size(), 5u) << "tor0, core, w0, w1, ps";
  // What is gone, not remove_stale's count: another test's remove_stale (ctest -j) may take them first.
  netns::remove_stale();
  EXPECT_TRUE(netns::namespaces_with_prefix(killed_runs.prefix).empty());
}

// One namespace per switch and host, named atp<pid>-<node>, nothing added to the test's own
// namespace, and every namespace gone with the testbed.
TEST_F(TestbedTest, BuildsANamespacePerNodeAndRemovesThemAll) {
  const std::string links_before = output_of({"ip", "-o", "link", "show"});
  {
    netns::Testbed testbed(network_);
    const std::string p = own_prefix();
    EXPECT_EQ(testbed.prefix(), p);
    EXPECT_EQ(testbed.namespace_name("w0"), p + "w0");
    EXPECT_EQ(testbed.namespace_path("w0"), "/var/run/netns/" + p + "w0");
    EXPECT_EQ(netns::namespaces_with_prefix(p),
              (std::vector<std::string>{p + "core", p + "ps", p + "tor0", p + "w0", p + "w1"}));
    EXPECT_EQ(output_of({"ip", "-o", "link", "show"}), links_before) << "a veth end in our own namespace";
  }
  EXPECT_TRUE(netns::namespaces_with_prefix(own_prefix()).empty());
}

// Opens a packet socket on `dev` in namespace `path` (it stays there).
PacketSocket socket_in(const std::string& path, const std::string& dev) {
  netns::ThreadInNamespace in(path);
  return PacketSocket(dev);
}

// Sends a frame of the local experimental EtherType on `from` and waits (2 s at most) for it on `to`.
bool frame_crosses(PacketSocket& from, PacketSocket& to) {
  std::vector<std::uint8_t> frame(100, 0);
  std::fill_n(frame.begin(), 6, 0xFF);
  std::copy(from.mac().begin(), from.mac().end(), frame.begin() + 6);
  frame[12] = 0x88;
  frame[13] = 0xB5;
  for (std::size_t i = 14; i < frame.size(); ++i) frame[i] = static_cast<std::uint8_t>(from.ifindex() + i);
  if (!from.send(frame)) return false;
  FrameBatch batch;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    pollfd p{to.fd(), POLLIN, 0};
    ::poll(&p, 1, 100);
    for (std::size_t i = 0, n = to.recv_batch(batch); i < n; ++i) {
      if (std::equal(frame.begin(), frame.end(), batch.bytes(i).begin(), batch.bytes(i).end())) return true;
    }
  }
  return false;
}

// Every planned link is a veth between its two nodes' namespaces, on eth0 for a host and p<port>
// for a switch: up, with the plan's MTU, checksum and segmentation offloads off, and a frame sent
// at one end arrives at the other, both ways.
TEST_F(TestbedTest, EveryLinkIsAVethBetweenItsPortsWithThePlansMtuAndNoOffloads) {
  netns::Testbed testbed(network_);
  ASSERT_EQ(network_.links.size(), 4u);
  for (const PlannedLink& l : network_.links) {
    for (const PortRef& end : {l.a, l.b}) {
      const std::string ns = testbed.namespace_name(end.node), dev = end_name(end);
      SCOPED_TRACE(ns + " " + dev);
      const std::string link = output_of({"ip", "-n", ns, "-d", "-o", "link", "show", "dev", dev});
      EXPECT_TRUE(has(link, " veth ")) << link;
      EXPECT_TRUE(has(link, "mtu 1500 ")) << link;
      EXPECT_TRUE(has(link, "state UP")) << link;
      const std::string features = output_of({"ip", "netns", "exec", ns, "ethtool", "-k", dev});
      for (const char* feature : {"tx-checksumming", "rx-checksumming", "tcp-segmentation-offload",
                                  "generic-segmentation-offload", "generic-receive-offload"}) {
        EXPECT_TRUE(has(features, std::string("\n") + feature + ": off")) << feature;
      }
      EXPECT_TRUE(has(output_of({"ip", "-n", ns, "-o", "link", "show", "dev", "lo"}), "UP")) << "loopback up";
    }
    PacketSocket a = socket_in(testbed.namespace_path(l.a.node), end_name(l.a));
    PacketSocket b = socket_in(testbed.namespace_path(l.b.node), end_name(l.b));
    EXPECT_TRUE(frame_crosses(a, b)) << l.a.node << " -> " << l.b.node;
    EXPECT_TRUE(frame_crosses(b, a)) << l.b.node << " -> " << l.a.node;
  }
}

// A host has its plan address as /8 on eth0, a multicast route out of eth0 and no default route;
// IPv6 is off, reverse path filtering off and TCP asks for ECN. A switch has no IPv4 address but
// loopback's.
TEST_F(TestbedTest, HostsHaveTheirAddressAMulticastRouteAndNoWayOut) {
  netns::Testbed testbed(network_);
  auto sysctl = [&](const std::string& node, const std::string& key) {
    return output_of({"ip", "netns", "exec", testbed.namespace_name(node), "cat", "/proc/sys/net/" + key});
  };
  ASSERT_EQ(network_.host_address.size(), 3u);
  for (const auto& [host, address] : network_.host_address) {
    SCOPED_TRACE(host);
    const std::string ns = testbed.namespace_name(host);
    const std::string addr = output_of({"ip", "-n", ns, "-4", "-o", "addr", "show", "dev", "eth0"});
    EXPECT_TRUE(has(addr, "inet " + format_address(address) + "/8 ")) << addr;
    const std::string routes = output_of({"ip", "-n", ns, "route", "show"});
    EXPECT_TRUE(has(routes, "224.0.0.0/4 dev eth0")) << routes;
    EXPECT_FALSE(has(routes, "default")) << routes;
    EXPECT_EQ(output_of({"ip", "-n", ns, "-6", "-o", "addr", "show"}), "") << "IPv6 is off";
    EXPECT_EQ(sysctl(host, "ipv6/conf/all/disable_ipv6"), "1\n");
    EXPECT_EQ(sysctl(host, "ipv6/conf/default/disable_ipv6"), "1\n");
    EXPECT_EQ(sysctl(host, "ipv4/conf/all/rp_filter"), "0\n");
    EXPECT_EQ(sysctl(host, "ipv4/conf/default/rp_filter"), "0\n");
    EXPECT_EQ(sysctl(host, "ipv4/tcp_ecn"), "1\n");
  }
  for (const std::string sw : {"tor0", "core"}) {
    const std::string ns = testbed.namespace_name(sw);
    EXPECT_EQ(output_of({"ip", "-n", ns, "-4", "-o", "addr", "show", "scope", "global"}), "") << sw;
    EXPECT_EQ(output_of({"ip", "-n", ns, "-6", "-o", "addr", "show"}), "") << sw;
    EXPECT_EQ(sysctl(sw, "ipv6/conf/all/disable_ipv6"), "1\n") << sw;
  }
}

// A host's rate is a tbf on its eth0 (2 ms of burst, at least 96 KiB; a queue of 1000 full
// frames, which tc shows as its latency); a new rate replaces it, 0 removes it, twice too.
TEST_F(TestbedTest, AHostRateIsATokenBucketOnEth0AndZeroRemovesIt) {
  netns::Testbed testbed(network_);
  const std::vector<std::string> show{"tc", "-n", testbed.namespace_name("w0"), "qdisc", "show", "dev", "eth0"};
  EXPECT_FALSE(has(output_of(show), "tbf"));
  testbed.set_host_rate("w0", 1.0);
  std::string qdisc = output_of(show);
  EXPECT_TRUE(has(qdisc, "qdisc tbf ")) << qdisc;
  EXPECT_TRUE(has(qdisc, "rate 1Gbit burst 250000b lat 10.1ms")) << qdisc;
  testbed.set_host_rate("w0", 0.2);
  qdisc = output_of(show);
  EXPECT_TRUE(has(qdisc, "rate 200Mbit burst 96Kb lat 56.6ms")) << qdisc;
  EXPECT_EQ(std::count(qdisc.begin(), qdisc.end(), '\n'), 1) << "replaced, not added: " << qdisc;
  EXPECT_FALSE(has(output_of({"tc", "-n", testbed.namespace_name("w1"), "qdisc", "show", "dev", "eth0"}), "tbf"))
      << "only w0's";
  testbed.set_host_rate("w0", 0);
  EXPECT_FALSE(has(output_of(show), "tbf"));
  EXPECT_NO_THROW(testbed.set_host_rate("w0", 0)) << "no limit to remove is fine";
}

// A command that fails is named in one sentence with what it said; a testbed that fails half-way
// removes what it built; a node name that cannot name a namespace is refused before anything.
TEST_F(TestbedTest, FailuresNameTheCommandAndLeaveNothing) {
  {
    netns::Testbed testbed(network_);
    try {
      testbed.set_host_rate("nobody", 1.0);
      ADD_FAILURE() << "a rate for a host that does not exist";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("`tc -n " + own_prefix() + "nobody qdisc replace dev eth0 root tbf rate 1000000kbit", 0), 0u)
          << what;
      EXPECT_TRUE(has(what, "` failed: ")) << what;
      EXPECT_FALSE(has(what, "\n")) << what;
    }
  }
  NetworkPlan too_large = network_;
  too_large.mtu_bytes = 70000;  // a veth carries 65535
  try {
    netns::Testbed testbed(too_large);
    ADD_FAILURE() << "built links of MTU 70000";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("`ip -n " + own_prefix(), 0), 0u) << e.what();
    EXPECT_TRUE(has(e.what(), " -batch -` failed: ")) << e.what();
  }
  EXPECT_TRUE(netns::namespaces_with_prefix(own_prefix()).empty()) << "a failed testbed left namespaces";
  // A leftover under this pid (a dead run's, the pid since reused) stops `ip netns add` part way:
  // the namespaces it had made go with it.
  ASSERT_EQ(std::system(("ip netns add " + own_prefix() + "w0").c_str()), 0);
  EXPECT_THROW(netns::Testbed testbed(network_), std::runtime_error);
  EXPECT_TRUE(netns::namespaces_with_prefix(own_prefix()).empty()) << "a testbed stopped part way left namespaces";
  NetworkPlan bad_name = network_;
  bad_name.host_address["w 0"] = bad_name.host_address.at("w0");
  try {
    netns::Testbed testbed(bad_name);
    ADD_FAILURE() << "a namespace named 'w 0'";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "'w 0' cannot name a network namespace: use letters, digits, '.', '_' and '-' only");
  }
  EXPECT_TRUE(netns::namespaces_with_prefix(own_prefix()).empty());
}

// A non-blocking UDP socket in a namespace, with buffers of these sizes (bytes; 0: the default).
int udp_socket_in(const std::string& path, int send_bytes, int recv_bytes) {
  netns::ThreadInNamespace in(path);
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (send_bytes > 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &send_bytes, sizeof send_bytes);
  if (recv_bytes > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &recv_bytes, sizeof recv_bytes);
  return fd;
}

sockaddr_in ipv4(const char* dotted, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, dotted, &a.sin_addr);
  return a;
}

// What a host's stack dropped: its tbf's drops (a burst far past its queue at 1 Mbit/s) and UDP
// datagrams that found a full socket buffer, each read in that host's namespace only.
TEST_F(TestbedTest, HostDropsAreItsTbfsAndItsFullSocketBuffers) {
  netns::Testbed testbed(network_);
  EXPECT_EQ(testbed.host_drops("w0").nic_queue, 0u);
  EXPECT_EQ(testbed.host_drops("w0").socket_buffers, 0u);
  testbed.set_host_rate("w0", 0.001);
  const int sender = udp_socket_in(testbed.namespace_path("w0"), 32 << 20, 0);
  ASSERT_GE(sender, 0);
  const sockaddr_in group = ipv4("239.1.2.3", 9999);  // out of eth0, no neighbour to resolve
  const std::vector<char> payload(1400, 'x');
  for (int i = 0; i < 3000; ++i) {
    ::sendto(sender, payload.data(), payload.size(), 0, reinterpret_cast<const sockaddr*>(&group), sizeof group);
  }
  const std::string stats = output_of({"tc", "-n", testbed.namespace_name("w0"), "-s", "qdisc", "show", "dev", "eth0"});
  const std::uint64_t nic_queue = testbed.host_drops("w0").nic_queue;
  EXPECT_GT(nic_queue, 1000u) << stats;  // 1.5 MB of queue and 96 KiB of burst of 4.3 MB sent
  EXPECT_TRUE(has(stats, "(dropped " + std::to_string(nic_queue) + ",")) << stats;

  const int receiver = udp_socket_in(testbed.namespace_path("w0"), 0, 1);  // room for one datagram
  const sockaddr_in local = ipv4("127.0.0.1", 9998);
  ASSERT_EQ(::bind(receiver, reinterpret_cast<const sockaddr*>(&local), sizeof local), 0);
  for (int i = 0; i < 50; ++i) {
    ::sendto(sender, payload.data(), 1000, 0, reinterpret_cast<const sockaddr*>(&local), sizeof local);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (testbed.host_drops("w0").socket_buffers == 0 && Clock::now() < deadline) ::usleep(1000);
  EXPECT_GT(testbed.host_drops("w0").socket_buffers, 0u);
  // From another thread too (the runner reads them from its own): /proc/net follows the main
  // thread's namespace, not the reader's, and gave the machine's count.
  std::uint64_t from_a_thread = 0;
  std::thread([&] { from_a_thread = testbed.host_drops("w0").socket_buffers; }).join();
  EXPECT_EQ(from_a_thread, testbed.host_drops("w0").socket_buffers);
  std::thread([&] { from_a_thread = testbed.host_drops("w1").socket_buffers; }).join();
  EXPECT_EQ(from_a_thread, 0u) << "w1's count, read from another thread";
  EXPECT_EQ(testbed.host_drops("w1").socket_buffers, 0u) << "w0's drops are w0's alone";
  EXPECT_EQ(testbed.host_drops("w1").nic_queue, 0u);
  ::close(sender);
  ::close(receiver);
}

// The daemons of kScenario on loopback (no namespaces needed) and a controller over them whose
// reports the test can wait for.
class TestbedControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net_.plan();
    net_.start({"ps"});
    controller_ = std::make_unique<TestbedController>(
        scenario_, net_.orchestrator(), mutex_,
        ::testing::TempDir() + "testbed_test_" + std::to_string(::getpid()) + ".sock", [this](const std::string& s) {
          const std::lock_guard lock(reports_mutex_);
          reports_.push_back(s);
          reported_.notify_all();
        });
  }
  // Waits (5 s at most) for `count` reports; then the removal they announce is done too (the
  // controller holds the orchestrator's mutex from the report to the end of the removal).
  std::vector<std::string> reports(std::size_t count) {
    {
      std::unique_lock lock(reports_mutex_);
      reported_.wait_for(lock, std::chrono::seconds(5), [&] { return reports_.size() >= count; });
    }
    const std::lock_guard done(mutex_);
    const std::lock_guard lock(reports_mutex_);
    return reports_;
  }
  // Whether each switch of the job's path (both) and its PS hold job `id`.
  bool installed(JobId id) {
    const std::lock_guard lock(mutex_);
    bool all = true;
    for (const std::string sw : {"tor0", "core"}) {
      const control::SwitchStats stats = net_.orchestrator().switch_client(sw).stats();
      all = all && std::any_of(stats.jobs.begin(), stats.jobs.end(),
                               [&](const control::SwitchJobStats& j) { return j.job == id && j.installed; });
    }
    return all && net_.orchestrator().ps_client("ps").stats().jobs.contains(id);
  }
  bool removed(JobId id) {
    const std::lock_guard lock(mutex_);
    for (const std::string sw : {"tor0", "core"}) {
      for (const control::SwitchJobStats& j : net_.orchestrator().switch_client(sw).stats().jobs) {
        if (j.job == id && j.installed) return false;
      }
    }
    return !net_.orchestrator().ps_client("ps").stats().jobs.contains(id);
  }

  const Scenario scenario_ = parse_scenario_yaml(kScenario);
  ProcessNetwork net_{scenario_, ATP_BINARY, loopback_placement()};
  std::mutex mutex_;
  std::mutex reports_mutex_;
  std::condition_variable reported_;
  std::vector<std::string> reports_;
  std::unique_ptr<TestbedController> controller_;
};

// Rank 0's request installs a job of its hosts on the switches and the PS, its aggregations can be
// asked for, and when its connection closes the job is reported and removed.
TEST_F(TestbedControllerTest, InstallsARanksJobAndRemovesItWhenItsConnectionCloses) {
  TestbedJob job;
  {
    TestbedClient rank0(controller_->path());
    TestbedJobRequest request;
    request.hosts = {"w0", "w1"};
    job = rank0.install(request);
    EXPECT_NE(job.job, 0u);
    EXPECT_EQ(job.configs.size(), 2u) << "one endpoint config per rank";
    EXPECT_TRUE(installed(job.job));
    const std::map<std::string, std::uint64_t> none{{"core", 0}, {"tor0", 0}};
    EXPECT_EQ(rank0.aggregations(job.job), none) << "no packet sent yet";
    EXPECT_TRUE(reports(0).empty()) << "nothing ends while the connection is open";
  }
  const std::vector<std::string> said = reports(1);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "job " + std::to_string(job.job) + " of w0, w1 ended; packets aggregated by switch: core 0, tor0 0");
  EXPECT_TRUE(removed(job.job));
}

// Requests that cannot be met are one sentence each, and the connection still serves the next.
TEST_F(TestbedControllerTest, RefusesJobsItCannotPlanInOneSentence) {
  TestbedClient rank0(controller_->path());
  TestbedJobRequest request;
  try {
    rank0.install(request);
    ADD_FAILURE() << "a job of no hosts";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "the testbed got a job of no hosts");
  }
  request.hosts = {"w0", "ps"};
  try {
    rank0.install(request);
    ADD_FAILURE() << "a job of a host that is no worker";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "the ranks' hosts (w0, ps) are not workers of one job of the testbed's file");
  }
  request.hosts = {"w1"};  // a subgroup of the file's job
  const TestbedJob job = rank0.install(request);
  EXPECT_EQ(job.configs.size(), 1u);
  EXPECT_TRUE(installed(job.job));
}

// Stopping the controller removes the jobs of connections still open.
TEST_F(TestbedControllerTest, StoppingRemovesTheJobsStillInstalled) {
  TestbedClient rank0(controller_->path());
  TestbedJobRequest request;
  request.hosts = {"w0", "w1"};
  const JobId id = rank0.install(request).job;
  ASSERT_TRUE(installed(id));
  controller_.reset();
  EXPECT_EQ(reports(1).size(), 1u);
  EXPECT_TRUE(removed(id));
}

}  // namespace
}  // namespace atp
