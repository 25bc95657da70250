// Tests of the `atp ps` daemon on loopback: fake workers send gradient packets straight to a
// PsDaemon, whose results must reach its uplink; jobs installed through the API and over HTTP.
#include "atp/runtime/ps_daemon.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "atp/plan.h"
#include "atp/runtime/control.h"
#include "atp/wire.h"

namespace atp {
namespace {

constexpr int kWaitMs = 5000;  // bound on any wait: a lost packet fails the test, it never hangs

// A test socket on 127.0.0.1 with a bounded blocking receive.
class Host {
 public:
  Host() : socket_(UdpEndpoint::loopback(0)) {}
  UdpEndpoint endpoint() const { return socket_.local_endpoint(); }
  void send(const UdpEndpoint& to, std::span<const std::uint8_t> bytes) { ASSERT_TRUE(socket_.send_to(to, bytes)); }
  // The next datagram, or nullopt after kWaitMs.
  std::optional<std::vector<std::uint8_t>> receive() {
    if (next_ == batch_.size()) {
      pollfd p{socket_.fd(), POLLIN, 0};
      if (::poll(&p, 1, kWaitMs) != 1) return std::nullopt;
      if (socket_.recv_batch(batch_) == 0) return std::nullopt;
      next_ = 0;
    }
    const auto bytes = batch_.bytes(next_++);
    return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
  }

 private:
  UdpSocket socket_;
  UdpRecvBatch batch_{16};
  std::size_t next_ = 0;
};

// One non-ATP switch with `workers` workers and one PS ("ps"): every worker is its own group at
// the PS, so the PS aggregates individual packets, which is what fake workers send.
struct Planned {
  Topology topology;
  NetworkPlan network;
  JobPlan job;
};
std::unique_ptr<Planned> plan(JobId id, int workers, std::uint16_t values_per_packet) {
  auto p = std::make_unique<Planned>();
  SwitchConfig plain;
  plain.atp_capable = false;
  p->topology.switches.push_back({"tor", plain});
  JobSpec spec;
  spec.id = id;
  spec.values_per_packet = values_per_packet;
  for (int w = 0; w < workers; ++w) {
    p->topology.hosts.push_back({"w" + std::to_string(w), "tor"});
    spec.workers.push_back("w" + std::to_string(w));
  }
  p->topology.hosts.push_back({"ps", "tor"});
  spec.ps.push_back("ps");
  p->network = plan_network(p->topology);
  p->job = plan_job(p->network, spec);
  return p;
}

// The gradient packet worker `w` of the plan sends for `seq`.
std::vector<std::uint8_t> gradient(const Planned& p, std::size_t w, Seq seq, std::span<const std::int32_t> values) {
  const WorkerConfig& wc = p.job.workers[w];
  const PsRoute& route = wc.ps[0];
  Header h;
  h.job = wc.job;
  h.seq = seq;
  h.bitmap0 = route.bitmap0;
  h.bitmap1 = route.bitmap1;
  h.fan_in0 = route.fan_in0;
  h.fan_in1 = route.fan_in1;
  h.edge_switch_identifier = route.edge_switch_identifier;
  h.src = wc.self;
  h.dst = route.ps;
  return build_packet(h, values);
}

// Asserts that `packet` is the job's multicast result for `seq` with exactly `sum`.
void expect_result(const std::optional<std::vector<std::uint8_t>>& packet, JobId job, Seq seq,
                   const std::vector<std::int32_t>& sum) {
  ASSERT_TRUE(packet.has_value()) << "no result within " << kWaitMs << " ms";
  Header h;
  ASSERT_EQ(decode_header(*packet, h), DecodeError::kOk);
  EXPECT_TRUE(h.is_ack);
  EXPECT_EQ(h.job, job);
  EXPECT_EQ(h.seq, seq);
  EXPECT_EQ(h.dst, multicast_group_address(job));
  std::vector<std::int32_t> got(h.value_count);
  load_values(*packet, got);
  EXPECT_EQ(got, sum);
}

PsDaemonConfig config_for(const Host& uplink, bool serve_control) {
  PsDaemonConfig c;
  c.data = UdpEndpoint::loopback(0);
  c.control = UdpEndpoint::loopback(0);
  c.serve_control = serve_control;
  c.uplink = uplink.endpoint();
  return c;
}

// A minimal HTTP/1.1 client (the test does not depend on the daemon's HTTP library):
// returns "STATUS BODY", e.g. "201 {...}".
std::string http(const UdpEndpoint& server, const std::string& method, const std::string& path,
                 const std::string& body = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket failed";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port);
  addr.sin_addr.s_addr = htonl(server.ip);
  timeval timeout{kWaitMs / 1000, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  const std::string request = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                              "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\n\r\n" + body;
  std::size_t written = 0;
  while (written < request.size()) {
    const ssize_t n = ::write(fd, request.data() + written, request.size() - written);
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  const std::size_t status_at = response.find(' ');
  const std::size_t body_at = response.find("\r\n\r\n");
  if (status_at == std::string::npos || body_at == std::string::npos) return "bad response: " + response;
  return response.substr(status_at + 1, 3) + " " + response.substr(body_at + 4);
}

TEST(PsDaemon, SumsTwoWorkersAndSendsTheMulticastResultToTheUplink) {
  const auto p = plan(1, 2, 4);
  Host uplink, w0, w1;
  PsDaemon daemon(config_for(uplink, false));
  daemon.add_job(p->job.ps[0]);
  daemon.start();
  const UdpEndpoint ps = daemon.data_endpoint();

  const std::vector<std::int32_t> a{1, -2, 2147483000, 7}, b{10, 20, 600, -7};
  w0.send(ps, gradient(*p, 0, 0, a));
  w1.send(ps, gradient(*p, 1, 0, b));
  expect_result(uplink.receive(), 1, 0, {11, 18, 2147483600, 0});

  // A second fragment, arriving in the other order.
  const std::vector<std::int32_t> c{1, 2, 3, 4};
  w1.send(ps, gradient(*p, 1, 1, c));
  w0.send(ps, gradient(*p, 0, 1, c));
  expect_result(uplink.receive(), 1, 1, {2, 4, 6, 8});

  const PsDaemonStats stats = daemon.stats();
  ASSERT_EQ(stats.jobs.count(1), 1u);
  EXPECT_EQ(stats.jobs.at(1).aggregations, 4u);
  EXPECT_EQ(stats.jobs.at(1).completions, 2u);
  EXPECT_EQ(stats.daemon.datagrams_received, 4u);
  EXPECT_EQ(stats.daemon.datagrams_sent, 2u);
}

TEST(PsDaemon, CountsAndDropsMalformedAndUnknownJobPackets) {
  const auto p = plan(1, 2, 4);
  const auto other = plan(99, 2, 4);
  Host uplink, w0, w1;
  PsDaemon daemon(config_for(uplink, false));
  daemon.add_job(p->job.ps[0]);
  daemon.start();
  const UdpEndpoint ps = daemon.data_endpoint();

  const std::vector<std::int32_t> a{1, 2, 3, 4};
  const std::vector<std::uint8_t> garbage{'h', 'e', 'l', 'l', 'o'};
  std::vector<std::uint8_t> truncated = gradient(*p, 0, 0, a);
  truncated.pop_back();
  std::vector<std::uint8_t> wrong_dst = gradient(*p, 0, 0, a);
  Header h;
  ASSERT_EQ(decode_header(wrong_dst, h), DecodeError::kOk);
  h.dst = 0x0A0000FE;
  encode_header(h, wrong_dst);
  w0.send(ps, garbage);
  w0.send(ps, truncated);
  w0.send(ps, std::vector<std::uint8_t>{});  // an empty datagram
  w0.send(ps, gradient(*other, 0, 0, a));    // job 99 is not installed
  w0.send(ps, wrong_dst);                    // the endpoint's own check
  // The same socket's datagrams are handled in order: once the result is out, all were seen.
  w0.send(ps, gradient(*p, 0, 0, a));
  w1.send(ps, gradient(*p, 1, 0, a));
  expect_result(uplink.receive(), 1, 0, {2, 4, 6, 8});

  const PsDaemonStats stats = daemon.stats();
  EXPECT_EQ(stats.daemon.malformed, 3u);
  EXPECT_EQ(stats.daemon.unknown_job, 1u);
  EXPECT_EQ(stats.jobs.at(1).dropped, 1u);
  EXPECT_EQ(stats.jobs.at(1).completions, 1u);
}

TEST(PsDaemon, ServesTwoJobsAtOnce) {
  const auto one = plan(1, 2, 4);
  const auto two = plan(2, 3, 8);
  Host uplink, w0, w1, w2;
  PsDaemon daemon(config_for(uplink, false));
  daemon.add_job(one->job.ps[0]);
  daemon.add_job(two->job.ps[0]);
  daemon.start();
  const UdpEndpoint ps = daemon.data_endpoint();

  const std::vector<std::int32_t> a{1, 2, 3, 4}, b{5, 6, 7, 8, 9, 10, 11, 12};
  w0.send(ps, gradient(*two, 0, 5, b));
  w0.send(ps, gradient(*one, 0, 5, a));
  w1.send(ps, gradient(*two, 1, 5, b));
  w1.send(ps, gradient(*one, 1, 5, a));
  expect_result(uplink.receive(), 1, 5, {2, 4, 6, 8});  // job 1 completes first: job 2 waits for w2
  w2.send(ps, gradient(*two, 2, 5, b));
  expect_result(uplink.receive(), 2, 5, {15, 18, 21, 24, 27, 30, 33, 36});

  EXPECT_TRUE(daemon.remove_job(1));
  EXPECT_FALSE(daemon.remove_job(1));
  EXPECT_EQ(daemon.stats().jobs.size(), 1u);
}

TEST(PsDaemon, RefusesADuplicateJobAndAJobForAnotherAddress) {
  const auto p = plan(1, 2, 4);
  Host uplink;
  PsDaemonConfig c = config_for(uplink, false);
  c.address = p->job.ps[0].self;
  PsDaemon daemon(c);
  daemon.start();
  daemon.add_job(p->job.ps[0]);
  EXPECT_THROW(daemon.add_job(p->job.ps[0]), PsJobError);
  PsConfig elsewhere = p->job.ps[0];
  elsewhere.job = 2;
  elsewhere.self = p->job.ps[0].self + 1;
  try {
    daemon.add_job(elsewhere);
    FAIL() << "a job for another PS address was installed";
  } catch (const PsJobError& e) {
    EXPECT_NE(std::string(e.what()).find("is for PS 10.0.0."), std::string::npos) << e.what();
  }
}

TEST(PsDaemon, InstallsRemovesAndReportsJobsOverHttp) {
  const auto p = plan(3, 2, 4);
  Host uplink, w0, w1;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  const UdpEndpoint control = daemon.control_endpoint();
  ASSERT_NE(control.port, 0);

  EXPECT_EQ(http(control, "POST", "/jobs", control::to_json(p->job.ps[0])).substr(0, 3), "201");
  EXPECT_EQ(http(control, "POST", "/jobs", control::to_json(p->job.ps[0])).substr(0, 3), "409");
  EXPECT_EQ(http(control, "POST", "/jobs", "{not json").substr(0, 3), "400");

  const std::vector<std::int32_t> a{1, 2, 3, 4};
  w0.send(daemon.data_endpoint(), gradient(*p, 0, 0, a));
  w1.send(daemon.data_endpoint(), gradient(*p, 1, 0, a));
  expect_result(uplink.receive(), 3, 0, {2, 4, 6, 8});

  const std::string metrics = http(control, "GET", "/metrics");
  EXPECT_EQ(metrics.substr(0, 3), "200");
  EXPECT_NE(metrics.find("atp_ps_job_completions_total{job=\"3\"} 1"), std::string::npos) << metrics;
  const std::string stats = http(control, "GET", "/stats");
  EXPECT_EQ(stats.substr(0, 3), "200");
  EXPECT_NE(stats.find("\"completions\": 1"), std::string::npos) << stats;

  EXPECT_EQ(http(control, "DELETE", "/jobs/3").substr(0, 3), "200");
  EXPECT_EQ(http(control, "DELETE", "/jobs/3").substr(0, 3), "404");
  EXPECT_TRUE(daemon.stats().jobs.empty());
  daemon.stop();
  daemon.stop();  // idempotent
}

TEST(PsDaemon, AControlPortInUseIsOneClearError) {
  Host uplink;
  PsDaemon first(config_for(uplink, true));
  PsDaemonConfig c = config_for(uplink, true);
  c.control = first.control_endpoint();
  try {
    PsDaemon second(c);
    FAIL() << "two daemons bound one control port";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot bind HTTP " + c.control.to_string() + ": address already in use");
  }
}

TEST(PsDaemon, StopsWithoutStart) {
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.add_job(plan(1, 2, 4)->job.ps[0]);  // no loop thread yet: runs on the caller's thread
  EXPECT_EQ(daemon.stats().jobs.size(), 1u);
}

}  // namespace
}  // namespace atp
