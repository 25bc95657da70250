// Tests of the switch daemon's config codec (control/switch_config.h): what to_yaml writes,
// parse_switch_config reads back the same, on both kinds of ports. The parser's refusals are
// tested with the daemon (switch_daemon_test).
#include "atp/control/switch_config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "atp/io/egress_fields.h"
#include "atp/wire.h"

namespace atp::control {
namespace {

using namespace std::chrono_literals;

void expect_same_direction(const EgressConfig& a, const EgressConfig& b, const std::string& where) {
  for (const EgressField& f : kEgressFields) EXPECT_EQ(f.get(a), f.get(b)) << where << "." << f.key;
}

// Every field of the file's part of `a` and `b` is the same.
void expect_same(const SwitchDaemonConfig& a, const SwitchDaemonConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.pipeline.num_aggregators, b.pipeline.num_aggregators);
  EXPECT_EQ(a.pipeline.aggregator_width, b.pipeline.aggregator_width);
  EXPECT_EQ(a.pipeline.reclaim_timeout, b.pipeline.reclaim_timeout);
  EXPECT_EQ(a.pipeline.atp_capable, b.pipeline.atp_capable);
  EXPECT_EQ(a.listen, b.listen);
  EXPECT_EQ(a.control_host, b.control_host);
  EXPECT_EQ(a.control_port, b.control_port);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.routes, b.routes);
  EXPECT_EQ(a.host_pool.to_string(), b.host_pool.to_string());
  ASSERT_EQ(a.ports.size(), b.ports.size());
  for (std::size_t i = 0; i < a.ports.size(); ++i) {
    const std::string where = "ports[" + std::to_string(i) + "]";
    EXPECT_EQ(a.ports[i].peer, b.ports[i].peer) << where;
    EXPECT_EQ(a.ports[i].interface, b.ports[i].interface) << where;
    expect_same_direction(a.ports[i].egress, b.ports[i].egress, where);
    ASSERT_EQ(a.ports[i].ingress.has_value(), b.ports[i].ingress.has_value()) << where;
    if (a.ports[i].ingress) expect_same_direction(*a.ports[i].ingress, *b.ports[i].ingress, where + ".ingress");
  }
}

// Settings whose numbers a decimal text must carry exactly (0.1, 1e-9 are not binary fractions).
EgressConfig settings(double loss) {
  EgressConfig e;
  e.rate_gbps = 2.5;
  e.buffer_packets = 64;
  e.ecn_threshold_packets = 16;
  e.delay = 125us;
  e.loss = loss;
  e.duplicate = 0.1;
  e.reorder = 1e-9;
  return e;
}

TEST(SwitchConfigFile, RoundTripsAUdpSwitch) {
  SwitchDaemonConfig c;
  c.name = "s0";
  c.pipeline.num_aggregators = 4096;
  c.pipeline.aggregator_width = 62;
  c.pipeline.reclaim_timeout = 100ms;
  c.pipeline.atp_capable = false;
  c.listen = SocketAddress::parse("127.0.0.1:9000");
  c.control_host = "127.0.0.2";
  c.control_port = 9100;
  c.seed = 42;
  c.threads = 2;
  c.ports.push_back({SocketAddress::parse("127.0.0.1:40001"), settings(0.01), settings(1.0 / 3), "", ""});
  c.ports.push_back({SocketAddress::parse("127.0.0.1:40002"), EgressConfig{}, std::nullopt, "", ""});
  c.routes = {{0x0A000001, 0}, {0x0A000002, 1}};
  c.host_pool = {0x0A010000, 16};
  const std::string text = to_yaml(c);
  const SwitchDaemonConfig back = parse_switch_config(text, "s0.yaml");
  expect_same(back, c);
  EXPECT_EQ(to_yaml(back), text);
}

TEST(SwitchConfigFile, RoundTripsASwitchOnInterfacesAndOneWithoutPorts) {
  SwitchDaemonConfig c;
  c.name = "tor-1";
  c.ports.push_back({{}, settings(0), std::nullopt, "sw0-p0", ""});
  c.ports.push_back({{}, EgressConfig{}, settings(0.5), "sw0-p1", ""});
  c.routes = {{0x0A000003, 1}};
  const std::string text = to_yaml(c);
  EXPECT_EQ(text.find("listen"), std::string::npos) << text;  // no UDP socket: parse_switch_config refuses one
  expect_same(parse_switch_config(text, "tor.yaml"), c);
  const SwitchDaemonConfig plain;  // hosts attach at run time (POST /hosts)
  expect_same(parse_switch_config(to_yaml(plain), "plain.yaml"), plain);
}

// A port's egress that the file leaves unset is a switch port's queue (switch_port_egress: marks
// from a depth sized for the port's rate, holds 1 MB); its ingress (the peer's NIC) has neither. A buffer in packets
// replaces the default in bytes.
TEST(SwitchConfigFile, APortsQueueDefaultsToASwitchPortsIngressToNone) {
  const SwitchDaemonConfig c = parse_switch_config(
      "ports: [{interface: sw0-p0, rate_gbps: 1, ingress: {rate_gbps: 1}}, {interface: sw0-p1, buffer_packets: 0},\n"
      "        {interface: sw0-p2, rate_gbps: 100}, {interface: sw0-p3, rate_gbps: 100, ecn_threshold_packets: 7}]\n",
      "q.yaml");
  ASSERT_EQ(c.ports.size(), 4u);
  EXPECT_EQ(c.ports[0].egress.buffer_bytes, kSwitchPortBufferBytes);
  EXPECT_EQ(c.ports[0].egress.buffer_packets, 0u);
  EXPECT_EQ(c.ports[0].egress.ecn_threshold_packets, kSwitchPortEcnThresholdPackets);
  ASSERT_TRUE(c.ports[0].ingress.has_value());
  EXPECT_EQ(c.ports[0].ingress->buffer_packets, 0u);
  EXPECT_EQ(c.ports[0].ingress->ecn_threshold_packets, 0u);
  EXPECT_EQ(c.ports[1].egress.buffer_packets, 0u);
  EXPECT_EQ(c.ports[1].egress.buffer_bytes, 0u);
  EXPECT_EQ(c.ports[1].egress.ecn_threshold_packets, kSwitchPortEcnThresholdPackets);
  EXPECT_EQ(c.ports[2].egress.ecn_threshold_packets, switch_port_ecn_threshold(100));  // sized for its rate
  EXPECT_EQ(c.ports[3].egress.ecn_threshold_packets, 7u);                              // as the file says
}

// The reclaim timeout and a port's delay_us keep their nanoseconds (egress_fields.h): 500 ns was
// written as 0 microseconds, which the switch reads as "never reclaim".
TEST(SwitchConfigFile, ReclaimTimeoutAndDelaysKeepTheirNanoseconds) {
  SwitchDaemonConfig c;
  c.ports.push_back({SocketAddress::parse("127.0.0.1:40001"), EgressConfig{}, std::nullopt, "", ""});
  c.ports[0].egress.delay = 2999ns;
  for (const Duration timeout : {Duration(500ns), Duration(1ns), Duration(1500ns), Duration(1005ns), Duration(100ms),
                                 Duration(0ns), Duration(std::chrono::microseconds(kMaxReclaimTimeoutUs)),
                                 Duration(std::chrono::microseconds(kMaxReclaimTimeoutUs)) - 1ns,
                                 Duration(std::chrono::microseconds(kMaxReclaimTimeoutUs - 1)) + 999ns}) {
    c.pipeline.reclaim_timeout = timeout;
    const std::string text = to_yaml(c);
    const SwitchDaemonConfig back = parse_switch_config(text, "s.yaml");
    EXPECT_EQ(back.pipeline.reclaim_timeout, timeout) << text;
    EXPECT_EQ(back.ports[0].egress.delay, 2999ns);
  }
  c.pipeline.reclaim_timeout = 500ns;
  EXPECT_NE(to_yaml(c).find("reclaim_timeout_us: 0.5\n"), std::string::npos) << to_yaml(c);
  c.pipeline.reclaim_timeout = 100ms;  // a whole number of microseconds is written as before
  EXPECT_NE(to_yaml(c).find("reclaim_timeout_us: 100000\n"), std::string::npos) << to_yaml(c);
}

// Scenario seeds take all 64 bits: a seed of 2^63 or more made every switch refuse its config.
TEST(SwitchConfigFile, RoundTripsSeedsOverAllOfUint64) {
  for (const std::uint64_t seed : {std::uint64_t{1} << 63, (std::uint64_t{1} << 63) + 1, UINT64_MAX}) {
    SwitchDaemonConfig c;
    c.seed = seed;
    EXPECT_EQ(parse_switch_config(to_yaml(c), "s.yaml").seed, seed) << to_yaml(c);
  }
}

}  // namespace
}  // namespace atp::control
