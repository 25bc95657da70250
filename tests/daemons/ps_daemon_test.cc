// Tests of the `atp ps` daemon on loopback: fake workers' gradient packets come from its uplink
// (the only source it accepts), and its results must reach it; jobs installed by API and HTTP.
#include "atp/daemons/ps_daemon.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "atp/control/control.h"
#include "atp/io/log.h"
#include "atp/io/machine.h"
#include "atp/plan/plan.h"
#include "atp/wire.h"
#include "support/exposition_format.h"
#include "support/test_access.h"

namespace atp {
namespace {

constexpr int kWaitMs = 5000;  // bound on any wait: a lost packet fails the test, it never hangs

// A test socket on 127.0.0.1 with a bounded blocking receive.
class Host {
 public:
  explicit Host(const SocketAddress& local = SocketAddress::loopback(0)) : socket_(local) {}
  SocketAddress endpoint() const { return socket_.local_endpoint(); }
  void send(const SocketAddress& to, std::span<const std::uint8_t> bytes) { ASSERT_TRUE(socket_.send_to(to, bytes)); }
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
// `packet` with its header changed by `edit` (the values stay).
template <class Edit>
std::vector<std::uint8_t> edited(std::vector<std::uint8_t> packet, Edit edit) {
  Header h;
  EXPECT_EQ(decode_header(packet, h), DecodeError::kOk);
  edit(h);
  encode_header(h, packet);
  return packet;
}

std::vector<std::uint8_t> gradient(const Planned& p, std::size_t w, Seq seq, std::span<const std::int32_t> values) {
  const WorkerConfig& wc = p.job.workers[w];
  const PsRoute& route = wc.ps[0];
  Header h;
  h.job = wc.job;
  h.seq = seq;
  h.node = route.node;
  h.bitmap = 1;
  h.fan_in = 1;
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
  c.data = SocketAddress::loopback(0);
  c.control = SocketAddress::loopback(0);
  c.serve_control = serve_control;
  c.uplink = uplink.endpoint();
  c.access = test::test_access();
  return c;
}

// A started PS without a control plane, with `job` installed: the uplink it sends to, the daemon
// and its data endpoint.
struct StartedPs {
  explicit StartedPs(const PsConfig& job) : daemon(config_for(uplink, false)) {
    daemon.add_job(job);
    daemon.start();
    data = daemon.data_endpoint();
  }
  Host uplink;
  PsDaemon daemon;
  SocketAddress data;
};

// A minimal HTTP/1.1 client (the test does not depend on the daemon's HTTP library), sending
// `token`: returns "STATUS BODY", e.g. "201 {...}".
std::string http(const SocketAddress& server, const std::string& method, const std::string& path,
                 const std::string& body = "", const std::string& token = test::kOperatorToken) {
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
  const std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + test::bearer(token) +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
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
  StartedPs started(p->job.ps[0]);
  auto& [uplink, daemon, ps] = started;

  const std::vector<std::int32_t> a{1, -2, 2147483000, 7}, b{10, 20, 600, -7};
  uplink.send(ps, gradient(*p, 0, 0, a));
  uplink.send(ps, gradient(*p, 1, 0, b));
  expect_result(uplink.receive(), 1, 0, {11, 18, 2147483600, 0});

  // A second fragment, arriving in the other order.
  const std::vector<std::int32_t> c{1, 2, 3, 4};
  uplink.send(ps, gradient(*p, 1, 1, c));
  uplink.send(ps, gradient(*p, 0, 1, c));
  expect_result(uplink.receive(), 1, 1, {2, 4, 6, 8});

  const control::PsStats stats = daemon.stats();
  ASSERT_EQ(stats.jobs.count(1), 1u);
  EXPECT_EQ(stats.jobs.at(1).aggregations, 4u);
  EXPECT_EQ(stats.jobs.at(1).completions, 2u);
  EXPECT_EQ(stats.daemon.datagrams_received, 4u);
  EXPECT_EQ(stats.daemon.datagrams_sent, 2u);
}

TEST(PsDaemon, CountsAndDropsMalformedAndUnknownJobPackets) {
  const auto p = plan(1, 2, 4);
  const auto other = plan(99, 2, 4);
  StartedPs started(p->job.ps[0]);
  auto& [uplink, daemon, ps] = started;

  const std::vector<std::int32_t> a{1, 2, 3, 4};
  const std::vector<std::uint8_t> garbage{'h', 'e', 'l', 'l', 'o'};
  std::vector<std::uint8_t> truncated = gradient(*p, 0, 0, a);
  truncated.pop_back();
  const std::vector<std::uint8_t> wrong_dst = edited(gradient(*p, 0, 0, a), [](Header& h) { h.dst = 0x0A0000FE; });
  uplink.send(ps, garbage);
  uplink.send(ps, truncated);
  uplink.send(ps, std::vector<std::uint8_t>{});  // an empty datagram
  uplink.send(ps, gradient(*other, 0, 0, a));    // job 99 is not installed
  uplink.send(ps, wrong_dst);                    // the endpoint's own check
  // The same socket's datagrams are handled in order: once the result is out, all were seen.
  uplink.send(ps, gradient(*p, 0, 0, a));
  uplink.send(ps, gradient(*p, 1, 0, a));
  expect_result(uplink.receive(), 1, 0, {2, 4, 6, 8});

  const control::PsStats stats = daemon.stats();
  EXPECT_EQ(stats.daemon.malformed, 3u);
  EXPECT_EQ(stats.daemon.unknown_job, 1u);
  EXPECT_EQ(stats.jobs.at(1).dropped, 1u);
  EXPECT_EQ(stats.jobs.at(1).completions, 1u);
}

// What StatsAndMetricsKeepTheirShape expects.
constexpr const char* kSampleStats = R"({
  "daemon": {
    "datagrams_received": 3,
    "datagrams_sent": 1,
    "foreign_source": 0,
    "malformed": 1,
    "relayed_to_local_worker": 0,
    "send_failures": 0,
    "unknown_job": 0
  },
  "data": "DATA",
  "jobs": {
    "1": {
      "aggregations": 2,
      "collisions": 0,
      "completions": 1,
      "dropped": 0,
      "name": "",
      "overflows": 0,
      "overlaps_dropped": 0,
      "packets_received": 2,
      "parameters_sent": 1,
      "resend_requests": 0,
      "results_resent": 0,
      "shape_mismatches": 0,
      "stale": 0
    }
  },
  "uplink": "UPLINK"
}
)";
constexpr const char* kSampleMetrics = R"(# HELP atp_build_info The atp that serves these metrics: its version.
# TYPE atp_build_info gauge
atp_build_info{version="VERSION"} 1
# HELP atp_ps_dropped_datagrams_total Datagrams the PS dropped, by reason.
# TYPE atp_ps_dropped_datagrams_total counter
atp_ps_dropped_datagrams_total{reason="malformed"} 1
atp_ps_dropped_datagrams_total{reason="unknown_job"} 0
atp_ps_dropped_datagrams_total{reason="foreign_source"} 0
atp_ps_dropped_datagrams_total{reason="send_failed"} 0
# HELP atp_ps_job_aggregations_total A job's packets merged into a fragment's sum.
# TYPE atp_ps_job_aggregations_total counter
atp_ps_job_aggregations_total{atp_job="1",atp_job_id="1"} 2
# HELP atp_ps_job_collisions_total A job's fragments completed with a collision (index rehashed).
# TYPE atp_ps_job_collisions_total counter
atp_ps_job_collisions_total{atp_job="1",atp_job_id="1"} 0
# HELP atp_ps_job_completions_total A job's fragments completed.
# TYPE atp_ps_job_completions_total counter
atp_ps_job_completions_total{atp_job="1",atp_job_id="1"} 1
# HELP atp_ps_job_dropped_packets_total A job's packets the PS discarded, by reason.
# TYPE atp_ps_job_dropped_packets_total counter
atp_ps_job_dropped_packets_total{atp_job="1",atp_job_id="1",reason="overlap"} 0
atp_ps_job_dropped_packets_total{atp_job="1",atp_job_id="1",reason="stale"} 0
atp_ps_job_dropped_packets_total{atp_job="1",atp_job_id="1",reason="invalid"} 0
# HELP atp_ps_job_overflows_total A job's fragments that overflowed int32 and went float32.
# TYPE atp_ps_job_overflows_total counter
atp_ps_job_overflows_total{atp_job="1",atp_job_id="1"} 0
# HELP atp_ps_job_received_packets_total A job's gradient packets the PS received.
# TYPE atp_ps_job_received_packets_total counter
atp_ps_job_received_packets_total{atp_job="1",atp_job_id="1"} 2
# HELP atp_ps_job_resend_requests_total Resend requests a job's PS sent to workers whose contribution it lacked.
# TYPE atp_ps_job_resend_requests_total counter
atp_ps_job_resend_requests_total{atp_job="1",atp_job_id="1"} 0
# HELP atp_ps_job_resent_results_total A job's results and requests sent again to a worker.
# TYPE atp_ps_job_resent_results_total counter
atp_ps_job_resent_results_total{atp_job="1",atp_job_id="1"} 0
# HELP atp_ps_job_sent_parameters_total A job's parameter packets multicast.
# TYPE atp_ps_job_sent_parameters_total counter
atp_ps_job_sent_parameters_total{atp_job="1",atp_job_id="1"} 1
# HELP atp_ps_job_shape_mismatches_total A job's fragments whose workers' rounds differed.
# TYPE atp_ps_job_shape_mismatches_total counter
atp_ps_job_shape_mismatches_total{atp_job="1",atp_job_id="1"} 0
# HELP atp_ps_jobs Jobs installed on the PS.
# TYPE atp_ps_jobs gauge
atp_ps_jobs 1
# HELP atp_ps_received_datagrams_total UDP datagrams the PS received.
# TYPE atp_ps_received_datagrams_total counter
atp_ps_received_datagrams_total 3
# HELP atp_ps_relayed_datagrams_total Parameter packets relayed to a worker on the PS's host.
# TYPE atp_ps_relayed_datagrams_total counter
atp_ps_relayed_datagrams_total 0
# HELP atp_ps_sent_datagrams_total UDP datagrams the PS sent.
# TYPE atp_ps_sent_datagrams_total counter
atp_ps_sent_datagrams_total 1
)";

// GET /stats and GET /metrics of a sample PS, word for word: what every reader of them was
// written against. Their shape changes only on purpose. The data and uplink addresses are replaced by names.
TEST(PsDaemon, StatsAndMetricsKeepTheirShape) {
  const auto p = plan(1, 2, 4);
  StartedPs started(p->job.ps[0]);
  auto& [uplink, daemon, ps] = started;
  const std::vector<std::int32_t> a{1, 2, 3, 4};
  uplink.send(ps, std::vector<std::uint8_t>{'h', 'i'});
  uplink.send(ps, gradient(*p, 0, 0, a));
  uplink.send(ps, gradient(*p, 1, 0, a));
  expect_result(uplink.receive(), 1, 0, {2, 4, 6, 8});
  std::string stats = daemon.stats_json();
  stats.replace(stats.find(ps.to_string()), ps.to_string().size(), "DATA");
  stats.replace(stats.find(uplink.endpoint().to_string()), uplink.endpoint().to_string().size(), "UPLINK");
  EXPECT_EQ(stats, kSampleStats);
  std::string metrics = daemon.metrics_text();
  metrics.replace(metrics.find("version=\"" ATP_VERSION "\""), 10 + std::strlen(ATP_VERSION), "version=\"VERSION\"");
  EXPECT_EQ(metrics, kSampleMetrics);
  EXPECT_EQ(test::exposition_errors(metrics), std::vector<std::string>{});
}

TEST(PsDaemon, ServesTwoJobsAtOnce) {
  const auto one = plan(1, 2, 4);
  const auto two = plan(2, 3, 8);
  Host uplink;
  PsDaemon daemon(config_for(uplink, false));
  daemon.add_job(one->job.ps[0]);
  daemon.add_job(two->job.ps[0]);
  daemon.start();
  const SocketAddress ps = daemon.data_endpoint();

  const std::vector<std::int32_t> a{1, 2, 3, 4}, b{5, 6, 7, 8, 9, 10, 11, 12};
  uplink.send(ps, gradient(*two, 0, 5, b));
  uplink.send(ps, gradient(*one, 0, 5, a));
  uplink.send(ps, gradient(*two, 1, 5, b));
  uplink.send(ps, gradient(*one, 1, 5, a));
  expect_result(uplink.receive(), 1, 5, {2, 4, 6, 8});  // job 1 completes first: job 2 waits for w2
  uplink.send(ps, gradient(*two, 2, 5, b));
  expect_result(uplink.receive(), 2, 5, {15, 18, 21, 24, 27, 30, 33, 36});

  EXPECT_TRUE(daemon.remove_job(1));
  EXPECT_FALSE(daemon.remove_job(1));
  EXPECT_EQ(daemon.stats().jobs.size(), 1u);
}

// With an uplink, the PS's socket is connected to it: another local process's datagrams do not
// reach the PS. Before, forged gradients sent ahead of the workers' were summed into the result.
TEST(PsDaemon, AcceptsDatagramsFromItsUplinkOnly) {
  const auto p = plan(1, 2, 4);
  Host intruder;
  StartedPs started(p->job.ps[0]);
  auto& [uplink, daemon, ps] = started;

  const std::vector<std::int32_t> forged{1000, 1000, 1000, 1000}, a{1, 2, 3, 4};
  intruder.send(ps, gradient(*p, 0, 0, forged));
  intruder.send(ps, gradient(*p, 1, 0, forged));
  uplink.send(ps, gradient(*p, 0, 0, a));
  uplink.send(ps, gradient(*p, 1, 0, a));
  expect_result(uplink.receive(), 1, 0, {2, 4, 6, 8});
  control::PsStats stats = daemon.stats();
  EXPECT_EQ(stats.daemon.datagrams_received, 2u);
  EXPECT_EQ(stats.jobs.at(1).packets_received, 2u);

  // The same packets, for the next fragment, from the uplink: received and summed.
  uplink.send(ps, gradient(*p, 0, 1, forged));
  uplink.send(ps, gradient(*p, 1, 1, forged));
  expect_result(uplink.receive(), 1, 1, {2000, 2000, 2000, 2000});
  stats = daemon.stats();
  EXPECT_EQ(stats.daemon.datagrams_received, 4u);
  EXPECT_EQ(stats.jobs.at(1).completions, 2u);
}

// Addressed by IP (no uplink to connect to), the PS takes a gradient only from its header's src at
// the ATP port, and only with one of the job's workers as src. Before, any local process could
// send a job's gradients from any port and the PS summed them into the result. The "hosts" are
// loopback addresses: 127.0.0.21-22 the workers, 127.0.0.24 stands in for the multicast group.
TEST(PsDaemon, AddressedByIpTakesGradientsOnlyFromTheJobsWorkersAtTheAtpPort) {
  const auto p = plan(1, 2, 4);
  const Address w0 = 0x7F000015, w1 = 0x7F000016, stranger = 0x7F000017, group = 0x7F000018;
  PsConfig job = p->job.ps[0];
  job.workers = {w0, w1};
  job.multicast_group = group;
  PsDaemonConfig config;
  config.data = SocketAddress{0x7F000014, 0};
  config.serve_control = false;
  config.access = test::test_access();
  PsDaemon daemon(config);
  daemon.add_job(job);
  daemon.start();
  const SocketAddress ps = daemon.data_endpoint();
  Host worker0({w0, kUdpPort}), worker1({w1, kUdpPort}), outsider({stranger, kUdpPort}), results({group, kUdpPort});
  Host any_port;  // 127.0.0.1, a port the kernel picks

  const std::vector<std::int32_t> forged{1000, 1000, 1000, 1000}, a{1, 2, 3, 4}, b{10, 20, 30, 40};
  const auto from = [&](std::size_t w, Address src, std::span<const std::int32_t> values) {
    return edited(gradient(*p, w, 0, values), [src](Header& h) { h.src = src; });
  };
  any_port.send(ps, from(0, w0, forged));        // the worker's address, but not its socket
  outsider.send(ps, from(1, stranger, forged));  // its own address, not one of the job's workers
  worker0.send(ps, from(0, w0, a));
  worker1.send(ps, from(1, w1, b));
  const auto result = results.receive();
  ASSERT_TRUE(result.has_value()) << "no result within " << kWaitMs << " ms";
  Header h;
  ASSERT_EQ(decode_header(*result, h), DecodeError::kOk);
  EXPECT_TRUE(h.is_ack);
  std::vector<std::int32_t> got(h.value_count);
  load_values(*result, got);
  EXPECT_EQ(got, (std::vector<std::int32_t>{11, 22, 33, 44}));
  const control::PsStats stats = daemon.stats();
  EXPECT_EQ(stats.daemon.foreign_source, 1u);
  EXPECT_EQ(stats.jobs.at(1).dropped, 1u);
  EXPECT_EQ(stats.jobs.at(1).aggregations, 2u);
}

// PsStats::shape_mismatches is in GET /stats and GET /metrics like the other job counters.
TEST(PsDaemon, ReportsShapeMismatchesInStatsAndMetrics) {
  const auto p = plan(1, 2, 4);
  StartedPs started(p->job.ps[0]);
  auto& [uplink, daemon, ps] = started;

  // Worker 0's round ends at seq 0 with 2 real values; worker 1's goes on.
  const std::vector<std::int32_t> a{1, 2, 0, 0};
  uplink.send(ps, edited(gradient(*p, 0, 0, a), [](Header& h) { h.round_shape = 2; }));
  uplink.send(ps, gradient(*p, 1, 0, a));
  const auto notice = uplink.receive();
  ASSERT_TRUE(notice.has_value()) << "no mismatch notice within " << kWaitMs << " ms";
  Header n;
  ASSERT_EQ(decode_header(*notice, n), DecodeError::kOk);
  EXPECT_EQ(n.round_shape, kRoundShapeMismatch);

  EXPECT_EQ(daemon.stats().jobs.at(1).shape_mismatches, 1u);
  const nlohmann::json stats = nlohmann::json::parse(daemon.stats_json());
  EXPECT_EQ(stats["jobs"]["1"]["shape_mismatches"], 1) << stats.dump();
  const std::string metrics = daemon.metrics_text();
  EXPECT_NE(metrics.find("atp_ps_job_shape_mismatches_total{atp_job=\"1\",atp_job_id=\"1\"} 1"), std::string::npos)
      << metrics;
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
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  const SocketAddress control = daemon.control_endpoint();
  ASSERT_NE(control.port, 0);

  EXPECT_EQ(http(control, "POST", "/jobs", control::to_json(p->job.ps[0])).substr(0, 3), "201");
  EXPECT_EQ(http(control, "POST", "/jobs", control::to_json(p->job.ps[0])).substr(0, 3), "409");
  EXPECT_EQ(http(control, "POST", "/jobs", "{not json").substr(0, 3), "400");

  const std::vector<std::int32_t> a{1, 2, 3, 4};
  uplink.send(daemon.data_endpoint(), gradient(*p, 0, 0, a));
  uplink.send(daemon.data_endpoint(), gradient(*p, 1, 0, a));
  expect_result(uplink.receive(), 3, 0, {2, 4, 6, 8});

  const std::string metrics = http(control, "GET", "/metrics");
  EXPECT_EQ(metrics.substr(0, 3), "200");
  EXPECT_NE(metrics.find("atp_ps_job_completions_total{atp_job=\"3\",atp_job_id=\"3\"} 1"), std::string::npos)
      << metrics;
  EXPECT_EQ(test::exposition_errors(metrics.substr(4)), std::vector<std::string>{});  // "200 " before the text
  const std::string stats = http(control, "GET", "/stats");
  EXPECT_EQ(stats.substr(0, 3), "200");
  EXPECT_NE(stats.find("\"completions\": 1"), std::string::npos) << stats;

  EXPECT_EQ(http(control, "DELETE", "/jobs/3").substr(0, 3), "200");
  EXPECT_EQ(http(control, "DELETE", "/jobs/3").substr(0, 3), "404");
  EXPECT_TRUE(daemon.stats().jobs.empty());
  daemon.stop();
  daemon.stop();  // idempotent
}

// The error sentence of an answer from http(), "" when the body has none.
std::string error_of(const std::string& answer) {
  const nlohmann::json body =
      nlohmann::json::parse(answer.substr(std::min<std::size_t>(4, answer.size())), nullptr, false);
  return body.is_object() && body.contains("error") && body["error"].is_string() ? body["error"].get<std::string>()
                                                                                 : "";
}

// A body nested 100,000 deep killed the PS (depth 50,000 got a 400); 1e400 answered 500 with an
// empty body; a job id too large for an unsigned long threw out of the handler. Each is now a
// status and one sentence, and the daemon goes on.
TEST(PsDaemon, BadRequestsAreAStatusAndOneSentence) {
  const auto p = plan(3, 2, 4);
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  const SocketAddress control = daemon.control_endpoint();
  const std::string deep = "{\"job\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const struct {
    std::string method, path, body, status, error;
  } cases[] = {
      {"POST", "/jobs", deep, "400", "PS job: body nests deeper than 32 levels"},
      {"POST", "/jobs", R"({"job": 1e400})", "400", "PS job: not valid JSON"},
      {"POST", "/jobs", "{\"job\": \"\xff\"}", "400", "PS job: not valid JSON"},
      {"POST", "/jobs", std::string(2 << 20, ' '), "413", "the request body is 2097152 bytes, more than the 1048576"},
      {"DELETE", "/jobs/99999999999999999999999", "", "404", "job 99999999999999999999999 is not installed"},
      {"GET", "/nowhere", "", "404", "no such endpoint: GET /nowhere"},
  };
  for (const auto& c : cases) {
    const std::string answer = http(control, c.method, c.path, c.body);
    EXPECT_EQ(answer.substr(0, 3), c.status) << c.method << " " << c.path << ": " << answer.substr(0, 200);
    EXPECT_EQ(error_of(answer).substr(0, c.error.size()), c.error) << answer.substr(0, 200);
  }
  EXPECT_EQ(http(control, "POST", "/jobs", control::to_json(p->job.ps[0])).substr(0, 3), "201");
}

// PsEndpoint's constructor refuses a job whose worst-case memory exceeds its per-job budget
// (std::invalid_argument): POST /jobs answers 400 with that sentence, not 409 (a conflict) and
// not a PS that later runs out of memory.
TEST(PsDaemon, AJobTheEndpointRefusesIsA400WithItsSentence) {
  const auto p = plan(4, 2, 4);
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  PsConfig huge = p->job.ps[0];
  huge.max_window_seqs = 4294967295u;
  huge.values_per_packet = 4096;
  const std::string answer = http(daemon.control_endpoint(), "POST", "/jobs", control::to_json(huge));
  EXPECT_EQ(answer.substr(0, 3), "400") << answer;
  EXPECT_EQ(error_of(answer).substr(0, 7), "job 4: ") << answer;
  EXPECT_TRUE(daemon.stats().jobs.empty());
  EXPECT_THROW(daemon.add_job(huge), PsJobRefused);
  EXPECT_EQ(http(daemon.control_endpoint(), "POST", "/jobs", control::to_json(p->job.ps[0])).substr(0, 3), "201");
}

// What POST /jobs can make the PS hold is bounded: past max_jobs a job is refused with a sentence.
TEST(PsDaemon, AtMostMaxJobsAreInstalled) {
  Host uplink;
  PsDaemonConfig c = config_for(uplink, true);
  c.max_jobs = 2;
  PsDaemon daemon(c);
  daemon.start();
  for (JobId id : {1, 2}) daemon.add_job(plan(id, 2, 4)->job.ps[0]);
  const std::string answer =
      http(daemon.control_endpoint(), "POST", "/jobs", control::to_json(plan(3, 2, 4)->job.ps[0]));
  EXPECT_EQ(answer.substr(0, 3), "409") << answer;
  EXPECT_EQ(error_of(answer), "job 3: this PS already serves 2 jobs, the most it takes; remove one first");
  EXPECT_TRUE(daemon.remove_job(1));
  daemon.add_job(plan(3, 2, 4)->job.ps[0]);
}

// Each job within its per-job budget: all of them at their bound must still fit the machine's
// memory, or forged packets could grow them past it together.
TEST(PsDaemon, JobsWhoseBoundsTogetherExceedTheMachinesMemoryAreRefused) {
  Host uplink;
  PsDaemonConfig c = config_for(uplink, false);
  c.max_jobs = 1 << 16;
  PsDaemon daemon(c);
  PsConfig big = plan(1, 2, 4)->job.ps[0];
  big.values_per_packet = 4096;
  std::uint32_t lo = 1, hi = kMaxWindowSeqs;  // the largest window within the per-job budget
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo + 1) / 2;
    big.max_window_seqs = mid;
    if (ps_job_memory_bound(big) <= kPsJobMemoryBudget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  big.max_window_seqs = lo;
  const std::uint64_t fit = physical_memory_bytes() / ps_job_memory_bound(big);
  if (fit > 4096) GTEST_SKIP() << "this machine's memory takes " << fit << " such jobs";
  for (std::uint64_t i = 1; i <= fit; ++i) {
    big.job = static_cast<JobId>(i);
    daemon.add_job(big);
  }
  big.job = static_cast<JobId>(fit + 1);
  try {
    daemon.add_job(big);
    FAIL() << "job " << fit + 1 << " was installed";
  } catch (const PsJobError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes of memory; remove a job first"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(daemon.remove_job(1));
  daemon.add_job(big);
}

// 48 clients trickling a request header one byte a second (more than the server has threads)
// do not keep another client's job install and stats waiting more than a few seconds.
TEST(PsDaemon, SlowClientsDoNotStarveTheControlPlane) {
  const auto p = plan(5, 2, 4);
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  const SocketAddress control = daemon.control_endpoint();
  std::vector<int> slow;
  for (int i = 0; i < 48; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(control.port);
    addr.sin_addr.s_addr = htonl(control.ip);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const std::string header = "POST /jobs HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(1000, 'a');
    for (std::size_t i = 0; !stop; ++i) {
      for (int fd : slow) ::send(fd, header.data() + i % header.size(), 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int k = 0; k < 10 && !stop; ++k) {
        pollfd none{-1, 0, 0};
        ::poll(&none, 0, 100);
      }
    }
  });
  pollfd none{-1, 0, 0};
  ::poll(&none, 0, 1500);
  const auto start = std::chrono::steady_clock::now();
  const std::string installed = http(control, "POST", "/jobs", control::to_json(p->job.ps[0]));
  const auto middle = std::chrono::steady_clock::now();
  const std::string stats = http(control, "GET", "/stats");
  const auto end = std::chrono::steady_clock::now();
  stop = true;
  trickle.join();
  for (int fd : slow) ::close(fd);
  EXPECT_EQ(installed.substr(0, 3), "201") << installed;
  EXPECT_EQ(stats.substr(0, 3), "200") << stats.substr(0, 200);
  EXPECT_LT(middle - start, std::chrono::seconds(3));
  EXPECT_LT(end - middle, std::chrono::seconds(3));
}

// Tenants alice and bob: each removes or replaces only its own jobs; the operator any. The
// answers to POST and DELETE /jobs are checked word for word.
TEST(PsDaemon, TenantsChangeOnlyTheirOwnJobs) {
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  const SocketAddress control = daemon.control_endpoint();
  const std::string job = control::to_json(plan(3, 2, 4)->job.ps[0]);
  EXPECT_EQ(http(control, "POST", "/jobs", job, test::kAliceToken), "201 {\"installed\":3}\n");
  EXPECT_EQ(http(control, "DELETE", "/jobs/3", "", test::kBobToken),
            "403 " +
                control::error_body("job 3 belongs to another tenant; only its owner or the operator may change "
                                    "or remove it") +
                "\n");
  // A taken id is 409 for anyone (bob picks another), saying whose it is.
  EXPECT_EQ(http(control, "POST", "/jobs", job, test::kBobToken),
            "409 " + control::error_body("job 3 is already installed by another tenant; pick another id") + "\n");
  EXPECT_EQ(http(control, "POST", "/jobs", job, test::kAliceToken).substr(0, 3), "409");
  EXPECT_EQ(http(control, "DELETE", "/jobs/3", "", "not-a-token-of-this-daemon").substr(0, 3), "401");
  EXPECT_EQ(http(control, "DELETE", "/jobs/3", "", test::kAliceToken), "200 {\"removed\":3}\n");
  EXPECT_EQ(http(control, "POST", "/jobs", job, test::kBobToken).substr(0, 3), "201");
  EXPECT_EQ(http(control, "DELETE", "/jobs/3").substr(0, 3), "200") << "the operator removes anyone's";
}

// A job on a lease its holder stops keeping alive is removed (a dead rank 0 leaves nothing).
TEST(PsDaemon, AJobOnAnExpiredLeaseIsRemoved) {
  Host uplink;
  PsDaemon daemon(config_for(uplink, true));
  daemon.start();
  atp::log::set_level(atp::log::Level::kInfo);
  testing::internal::CaptureStderr();
  const SocketAddress control = daemon.control_endpoint();
  const std::string granted = http(control, "POST", "/leases", R"({"ttl_ms": 1000})", test::kAliceToken);
  ASSERT_EQ(granted.substr(0, 3), "201") << granted;
  const std::string lease = std::to_string(nlohmann::json::parse(granted.substr(4))["lease"].get<std::uint64_t>());
  EXPECT_EQ(http(control, "POST", "/jobs?lease=" + lease, control::to_json(plan(3, 2, 4)->job.ps[0]), test::kBobToken)
                .substr(0, 3),
            "403");
  EXPECT_EQ(http(control, "POST", "/jobs?lease=" + lease, control::to_json(plan(3, 2, 4)->job.ps[0]), test::kAliceToken)
                .substr(0, 3),
            "201");
  EXPECT_EQ(http(control, "POST", "/jobs", control::to_json(plan(4, 2, 4)->job.ps[0]), test::kAliceToken).substr(0, 3),
            "201");
  EXPECT_EQ(daemon.stats().jobs.size(), 2u);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (daemon.stats().jobs.contains(3) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(daemon.stats().jobs.contains(3)) << "the lease expired 1 s after its grant";
  EXPECT_TRUE(daemon.stats().jobs.contains(4)) << "on no lease";
  EXPECT_EQ(http(control, "POST", "/leases/" + lease + "/keepalive", "", test::kAliceToken).substr(0, 3), "404");
  // Each install, removal and refusal is a line of the daemon's log, naming who and why.
  const std::string logged = testing::internal::GetCapturedStderr();
  const std::string me = "ps " + daemon.data_endpoint().to_string();
  for (const std::string& line :
       {std::string("info refused POST /jobs from 127.0.0.1 (bob): 403 lease ") + lease + " is another tenant's",
        "info " + me + ": job 3 installed by alice (lease " + lease + "): 2 workers, 4 values per packet",
        "info " + me + ": job 4 installed by alice: 2 workers", "info " + me + ": job 3 removed: its lease expired"}) {
    EXPECT_NE(logged.find(line), std::string::npos) << "no line '" << line << "' in:\n" << logged;
  }
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
