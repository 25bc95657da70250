// Tests of the software switch daemon and the control codec: real UDP sockets on loopback with
// kernel-chosen ports, fake workers and PS, jobs installed over HTTP. Polls with bounds, no sleeps.
#include "atp/runtime/switch_daemon.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "atp/plan.h"
#include "atp/runtime/control.h"
#include "atp/runtime/udp_socket.h"
#include "atp/wire.h"

namespace atp {
namespace {

using nlohmann::json;

// The next datagram on `socket`, waiting at most `timeout_ms`; nullopt if none came.
std::optional<std::vector<std::uint8_t>> receive(UdpSocket& socket, int timeout_ms = 2000) {
  UdpRecvBatch batch(1);
  pollfd p{socket.fd(), POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0 || socket.recv_batch(batch) == 0) return std::nullopt;
  auto bytes = batch.bytes(0);
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

std::vector<std::int32_t> values_of(const std::vector<std::uint8_t>& packet, Header& h) {
  EXPECT_EQ(decode_header(packet, h), DecodeError::kOk);
  std::vector<std::int32_t> values(h.value_count);
  load_values(packet, values);
  return values;
}

// One switch s0 with hosts w0, w1 (the job's workers), ps0 (its PS) and h3 (not in the job):
// ports 0..3 in host order, each a fake host socket.
class SwitchDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SwitchConfig sc;
    sc.num_aggregators = 16;
    sc.aggregator_width = 8;
    topology_.switches = {{"s0", sc}};
    topology_.hosts = {{"w0", "s0"}, {"w1", "s0"}, {"ps0", "s0"}, {"h3", "s0"}};
    network_ = plan_network(topology_);
    JobSpec spec;
    spec.name = "j1";
    spec.id = 1;
    spec.workers = {"w0", "w1"};
    spec.ps = {"ps0"};
    spec.values_per_packet = 4;
    job_ = plan_job(network_, spec);

    for (int i = 0; i < 4; ++i) hosts_.emplace_back(UdpEndpoint::loopback(0));
    SwitchDaemonConfig config;
    config.name = "s0";
    config.pipeline = sc;
    for (auto& h : hosts_) config.ports.push_back({h.local_endpoint(), {}});
    for (const auto& [dst, port] : network_.routes.at("s0")) config.routes.emplace_back(dst, port);
    daemon_.emplace(config);
    daemon_->start();
    const std::string control = daemon_->control_endpoint();
    client_.emplace(control.substr(0, control.rfind(':')), std::stoi(control.substr(control.rfind(':') + 1)));
  }

  json stats() {
    auto res = client_->Get("/stats");
    EXPECT_TRUE(res && res->status == 200);
    return res ? json::parse(res->body) : json{};
  }
  // Polls /stats until pred holds (bounded: the packets were sent before, loopback delivers).
  json stats_when(const std::function<bool(const json&)>& pred) {
    json s;
    for (int i = 0; i < 500; ++i) {
      s = stats();
      if (pred(s)) return s;
      pollfd none{-1, 0, 0};
      ::poll(&none, 0, 2);  // wait 2 ms between polls
    }
    ADD_FAILURE() << "condition not reached; last stats: " << s.dump();
    return s;
  }

  void install_job() {
    auto res = client_->Post("/jobs", control::to_json(job_.switches.at("s0")), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }

  // Worker w's gradient packet for fragment `seq` (header fields from the job plan).
  std::vector<std::uint8_t> gradient(std::size_t w, Seq seq, const std::vector<std::int32_t>& values) {
    const WorkerConfig& wc = job_.workers[w];
    Header h;
    h.job = wc.job;
    h.seq = seq;
    h.bitmap0 = wc.ps[0].bitmap0;
    h.bitmap1 = wc.ps[0].bitmap1;
    h.fan_in0 = wc.ps[0].fan_in0;
    h.fan_in1 = wc.ps[0].fan_in1;
    h.edge_switch_identifier = wc.ps[0].edge_switch_identifier;
    h.aggregator_index = seq % 16;
    h.src = wc.self;
    h.dst = wc.ps[0].ps;
    return build_packet(h, values);
  }

  void send(std::size_t host, const std::vector<std::uint8_t>& packet) {
    ASSERT_TRUE(hosts_[host].send_to(daemon_->data_endpoint(), packet));
  }

  Topology topology_;
  NetworkPlan network_;
  JobPlan job_;
  std::vector<UdpSocket> hosts_;  // w0, w1, ps0, h3
  std::optional<SwitchDaemon> daemon_;
  std::optional<httplib::Client> client_;
};

TEST_F(SwitchDaemonTest, AggregatesGradientsAndMulticastsParameters) {
  install_job();
  const std::vector<std::int32_t> a{1, 2, 3, -4}, b{10, 20, 30, 40};
  send(0, gradient(0, 0, a));
  send(1, gradient(1, 0, b));

  auto sum = receive(hosts_[2]);
  ASSERT_TRUE(sum);
  Header h;
  EXPECT_EQ(values_of(*sum, h), (std::vector<std::int32_t>{11, 22, 33, 36}));
  EXPECT_FALSE(h.is_ack);
  EXPECT_EQ(h.dst, job_.ps[0].self);

  // The PS's result goes to the job's multicast group: both workers get it.
  Header p;
  p.is_ack = true;
  p.job = 1;
  p.seq = 0;
  p.aggregator_index = 0;
  p.src = job_.ps[0].self;
  p.dst = multicast_group_address(1);
  const std::vector<std::int32_t> result{11, 22, 33, 36};
  send(2, build_packet(p, result));
  for (std::size_t w : {0u, 1u}) {
    auto got = receive(hosts_[w]);
    ASSERT_TRUE(got) << "worker " << w;
    Header g;
    EXPECT_EQ(values_of(*got, g), result);
    EXPECT_TRUE(g.is_ack);
  }

  const json s = stats_when([](const json& j) { return j["ports"][1]["tx_packets"] == 1; });
  ASSERT_EQ(s["jobs"].size(), 1u);
  EXPECT_EQ(s["jobs"][0]["job"], 1);
  EXPECT_EQ(s["jobs"][0]["aggregations"], 2);
  EXPECT_EQ(s["jobs"][0]["completions"], 1);
  EXPECT_EQ(s["jobs"][0]["collisions"], 0);
  EXPECT_EQ(s["ports"][2]["tx_packets"], 1);  // exactly one packet reached the PS: the sum
  EXPECT_EQ(s["ports"][2]["rx_packets"], 1);
  EXPECT_EQ(s["ports"][0]["rx_packets"], 1);
  EXPECT_EQ(s["ports"][0]["tx_packets"], 1);
  EXPECT_EQ(s["ports"][3]["tx_packets"], 0);
  EXPECT_EQ(s["switch"]["malformed"], 0);

  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("# TYPE atp_switch_job_aggregations_total counter"), std::string::npos);
  EXPECT_NE(metrics->body.find("atp_switch_job_aggregations_total{switch=\"s0\",job=\"1\"} 2"), std::string::npos);
  EXPECT_NE(metrics->body.find("atp_switch_port_tx_packets_total{switch=\"s0\",port=\"2\"} 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("atp_switch_port_queue_depth{switch=\"s0\",port=\"0\"}"), std::string::npos);
  EXPECT_NE(metrics->body.find("atp_switch_malformed_total{switch=\"s0\"} 0"), std::string::npos);
}

TEST_F(SwitchDaemonTest, MalformedAndSpoofedPacketsAreCountedAndHaveNoEffect) {
  install_job();
  send(0, {0xde, 0xad, 0xbe, 0xef});  // not an ATP packet
  auto other_job = gradient(0, 0, {5, 5, 5, 5});
  Header h;
  ASSERT_EQ(decode_header(other_job, h), DecodeError::kOk);
  h.job = 99;
  send(0, build_packet(h, std::vector<std::int32_t>{5, 5, 5, 5}));  // a job not installed
  send(3, gradient(1, 0, {1000, 1000, 1000, 1000}));                // w1's packet from h3's port
  UdpSocket stranger(UdpEndpoint::loopback(0));                     // no port's peer
  ASSERT_TRUE(stranger.send_to(daemon_->data_endpoint(), gradient(1, 0, {7, 7, 7, 7})));

  json s = stats_when([](const json& j) {
    return j["switch"]["malformed"] == 1 && j["switch"]["unknown_job"] == 1 && j["switch"]["not_admitted"] == 1 &&
           j["switch"]["unknown_source"] == 1;
  });
  EXPECT_EQ(s["jobs"][0]["aggregations"], 0);
  EXPECT_EQ(s["switch"]["aggregators_in_use"], 0);

  send(0, gradient(0, 0, {1, 1, 1, 1}));
  send(1, gradient(1, 0, {2, 2, 2, 2}));
  auto sum = receive(hosts_[2]);
  ASSERT_TRUE(sum);
  Header r;
  EXPECT_EQ(values_of(*sum, r), (std::vector<std::int32_t>{3, 3, 3, 3}));
  s = stats();
  EXPECT_EQ(s["ports"][2]["tx_packets"], 1);

  // After DELETE the job's packets are unknown.
  auto del = client_->Delete("/jobs/1");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  auto missing = client_->Delete("/jobs/1");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  send(0, gradient(0, 1, {1, 1, 1, 1}));
  stats_when([](const json& j) { return j["switch"]["unknown_job"] == 2; });
}

TEST_F(SwitchDaemonTest, BadJobRequestsAreRefusedWithTheField) {
  auto res = client_->Post("/jobs", R"({"job": 1, "admitted_ports": [0], "roles": [{"ps": "10.0.0.3", "level": 7}],
                                       "multicast_ports": [0]})",
                           "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("roles[0].level"), std::string::npos) << res->body;
  res = client_->Post("/jobs", R"({"job": 1, "admitted_ports": [9], "roles": [], "multicast_ports": []})",
                      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("admitted_ports"), std::string::npos) << res->body;
  res = client_->Post("/jobs", "not json", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

TEST(ControlCodec, RoundTripsAndNamesBadFields) {
  SwitchJobPlan plan;
  plan.entry.job = 7;
  plan.entry.admitted_ports = {0, 2};
  plan.entry.roles = {{0x0A000003u, 1}};
  plan.multicast_ports = {0, 1};
  const SwitchJobPlan back = control::switch_job_from_json(control::to_json(plan));
  EXPECT_EQ(back.entry.job, 7);
  EXPECT_EQ(back.entry.admitted_ports, plan.entry.admitted_ports);
  ASSERT_EQ(back.entry.roles.size(), 1u);
  EXPECT_EQ(back.entry.roles[0].ps, 0x0A000003u);
  EXPECT_EQ(back.entry.roles[0].level, 1);
  EXPECT_EQ(back.multicast_ports, plan.multicast_ports);

  PsConfig ps;
  ps.job = 3;
  ps.self = 0x0A000005u;
  ps.multicast_group = multicast_group_address(3);
  ps.group_sizes = {4, 2};
  ps.values_per_packet = 256;
  ps.num_aggregators = 100;
  ps.max_window_seqs = 77;
  const PsConfig ps_back = control::ps_job_from_json(control::to_json(ps));
  EXPECT_EQ(ps_back.job, 3);
  EXPECT_EQ(ps_back.self, ps.self);
  EXPECT_EQ(ps_back.multicast_group, ps.multicast_group);
  EXPECT_EQ(ps_back.group_sizes, ps.group_sizes);
  EXPECT_EQ(ps_back.values_per_packet, 256);
  EXPECT_EQ(ps_back.num_aggregators, 100u);
  EXPECT_EQ(ps_back.max_window_seqs, 77u);

  auto error_of = [](const std::string& text) {
    try {
      control::ps_job_from_json(text);
    } catch (const control::ControlError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "group_sizes": [2],
                         "windoww": 3})")
                .find("windoww: unknown key"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"job": 1, "self": "10.0.0", "multicast_group": "224.0.0.1", "group_sizes": [2]})").find("self:"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"job": 70000, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "group_sizes": [2]})")
                .find("job: must be between 0 and 65535"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"self": "10.0.0.1", "multicast_group": "224.0.0.1", "group_sizes": [2]})").find("job: missing"),
      std::string::npos);
}

std::string config_error(const std::string& yaml) {
  try {
    parse_switch_config(yaml, "s.yaml");
  } catch (const SwitchConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SwitchConfigFile, ParsesEveryKey) {
  const SwitchDaemonConfig c = parse_switch_config(R"(
name: tor0
aggregators: 128
width: 62
reclaim_timeout_us: 5000
atp_capable: false
listen: 127.0.0.1:0
control: 127.0.0.1:0
seed: 9
ports:
  - peer: 127.0.0.1:9001
    rate_gbps: 10
    buffer_packets: 64
    ecn_threshold_packets: 16
    delay_us: 5
    loss: 0.01
    duplicate: 0.02
    reorder: 0.03
  - {peer: 127.0.0.1:9002}
routes:
  - {dst: 10.0.0.1, port: 0}
  - {dst: 10.0.0.2, port: 1}
)",
                                                   "s.yaml");
  EXPECT_EQ(c.name, "tor0");
  EXPECT_EQ(c.pipeline.num_aggregators, 128u);
  EXPECT_EQ(c.pipeline.aggregator_width, 62);
  EXPECT_EQ(c.pipeline.reclaim_timeout, std::chrono::microseconds(5000));
  EXPECT_FALSE(c.pipeline.atp_capable);
  EXPECT_EQ(c.seed, 9u);
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.ports[0].peer, UdpEndpoint::loopback(9001));
  EXPECT_EQ(c.ports[0].egress.rate_gbps, 10);
  EXPECT_EQ(c.ports[0].egress.buffer_packets, 64u);
  EXPECT_EQ(c.ports[0].egress.ecn_threshold_packets, 16u);
  EXPECT_EQ(c.ports[0].egress.delay, std::chrono::microseconds(5));
  EXPECT_DOUBLE_EQ(c.ports[0].egress.loss, 0.01);
  EXPECT_DOUBLE_EQ(c.ports[0].egress.duplicate, 0.02);
  EXPECT_DOUBLE_EQ(c.ports[0].egress.reorder, 0.03);
  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[1], (std::pair<Address, PortId>{0x0A000002u, 1}));
}

TEST(SwitchConfigFile, ErrorsNameTheKey) {
  const std::string port = "ports:\n  - peer: 127.0.0.1:9001\n";
  EXPECT_NE(config_error("aggregatorz: 4\n" + port).find("s.yaml: aggregatorz: unknown key"), std::string::npos);
  EXPECT_NE(config_error(port + "    rate_gbs: 1\n").find("s.yaml: ports[0].rate_gbs: unknown key"), std::string::npos);
  EXPECT_NE(config_error(port + "    loss: 2\n").find("ports[0].loss: must be between 0 and 1"), std::string::npos);
  EXPECT_NE(config_error("width: many\n" + port).find("width: expected an integer"), std::string::npos);
  EXPECT_NE(config_error("name: x\n").find("ports: must list at least one port"), std::string::npos);
  EXPECT_NE(config_error("listen: nowhere\n" + port).find("listen: expected an address"), std::string::npos);
  EXPECT_NE(
      config_error(port + "routes:\n  - {dst: 10.0.0.1, port: 3}\n").find("routes[0].port: must be between 0 and 0"),
      std::string::npos);
  EXPECT_NE(config_error(port + "  - peer: 127.0.0.1:9001\n").find("ports[1].peer: 127.0.0.1:9001 is already"),
            std::string::npos);
}

TEST(SwitchDaemonSetup, PortInUseNamesTheAddress) {
  UdpSocket taken(UdpEndpoint::loopback(0));
  SwitchDaemonConfig config;
  config.ports.push_back({UdpEndpoint::loopback(9), {}});
  config.listen = taken.local_endpoint();
  try {
    SwitchDaemon daemon(config);
    FAIL() << "bound a UDP port in use";
  } catch (const UdpSetupError& e) {
    EXPECT_NE(std::string(e.what()).find(taken.local_endpoint().to_string()), std::string::npos) << e.what();
  }

  config.listen = UdpEndpoint::loopback(0);
  SwitchDaemon first(config);
  const std::string control = first.control_endpoint();
  config.control_port = static_cast<std::uint16_t>(std::stoi(control.substr(control.rfind(':') + 1)));
  try {
    SwitchDaemon second(config);
    FAIL() << "bound a control port in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(control), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atp
