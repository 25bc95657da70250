// Tests of the daemons' control-plane codec (control.h): switch and PS job plans, port settings,
// and the worker configs rank 0 of a PyTorch job hands the other ranks through the rendezvous store.
#include "atp/runtime/control.h"

#include <gtest/gtest.h>

#include <string>

namespace atp::control {
namespace {

TEST(ControlCodec, RoundTripsAndNamesBadFields) {
  SwitchJobPlan plan;
  plan.entry.job = 7;
  plan.entry.admitted_ports = {0, 2};
  plan.entry.roles = {{0x0A000003u, 1}};
  plan.multicast_ports = {0, 1};
  const SwitchJobPlan back = switch_job_from_json(to_json(plan));
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
  ps.aggregators = {40, 100};
  ps.max_window_seqs = 77;
  ps.index_policy = IndexPolicy::kHashedSlots;
  const PsConfig ps_back = ps_job_from_json(to_json(ps));
  EXPECT_EQ(ps_back.index_policy, IndexPolicy::kHashedSlots);
  EXPECT_EQ(ps_back.job, 3);
  EXPECT_EQ(ps_back.self, ps.self);
  EXPECT_EQ(ps_back.multicast_group, ps.multicast_group);
  EXPECT_EQ(ps_back.group_sizes, ps.group_sizes);
  EXPECT_EQ(ps_back.values_per_packet, 256);
  EXPECT_EQ(ps_back.aggregators, (AggregatorRange{40, 100}));
  EXPECT_EQ(ps_back.max_window_seqs, 77u);

  auto error_of = [](const std::string& text) {
    try {
      ps_job_from_json(text);
    } catch (const ControlError& e) {
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
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "group_sizes": [2],
                         "index": "random"})")
                .find("index: must be"),
            std::string::npos);

  PortSettings settings;
  settings.egress = EgressConfig{.rate_gbps = 2.5,
                                 .buffer_packets = 64,
                                 .ecn_threshold_packets = 16,
                                 .delay = std::chrono::microseconds(30),
                                 .loss = 0.1,
                                 .duplicate = 0.2,
                                 .reorder = 0.3};
  const PortSettings settings_back = port_settings_from_json(to_json(settings));
  ASSERT_TRUE(settings_back.egress);
  EXPECT_FALSE(settings_back.ingress);
  EXPECT_EQ(settings_back.egress->rate_gbps, 2.5);
  EXPECT_EQ(settings_back.egress->buffer_packets, 64u);
  EXPECT_EQ(settings_back.egress->ecn_threshold_packets, 16u);
  EXPECT_EQ(settings_back.egress->delay, std::chrono::microseconds(30));
  EXPECT_EQ(settings_back.egress->loss, 0.1);
  EXPECT_EQ(settings_back.egress->duplicate, 0.2);
  EXPECT_EQ(settings_back.egress->reorder, 0.3);
}

TEST(HostCodec, RoundTripsAndRefusesPortZero) {
  const UdpEndpoint peer = UdpEndpoint::parse("127.0.0.1:40001");
  EXPECT_EQ(host_from_json(host_to_json(peer)), peer);
  EXPECT_THROW(host_from_json(host_to_json(UdpEndpoint::loopback(0))), ControlError);
}

WorkerConfig sample() {
  WorkerConfig c;
  c.job = 513;
  c.self = 0x0A000009;
  c.ps = {PsRoute{0x0A000001, 4, 1, 3, 1, 0}, PsRoute{0x0A000002, 8, 2, 5, 2, 7}};
  c.values_per_packet = 1024;
  c.scale = 1e6;
  c.aggregators = {100, 400};
  c.index_policy = IndexPolicy::kHashedSlots;
  c.congestion = {false, 64, 2, 512, 300, 9000};
  c.loss_recovery = LossRecovery::kTimeoutOnly;
  c.retransmit_timeout = std::chrono::milliseconds(20);
  c.max_retransmit_timeout = std::chrono::milliseconds(500);
  c.progress_timeout = std::chrono::seconds(30);
  c.initial_seq = 77;
  return c;
}

TEST(WorkerConfigCodec, RoundTripsEveryField) {
  const WorkerConfig c = sample();
  const WorkerConfig back = worker_config_from_json(to_json(c));
  EXPECT_EQ(back.job, c.job);
  EXPECT_EQ(back.self, c.self);
  ASSERT_EQ(back.ps.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.ps[i].ps, c.ps[i].ps);
    EXPECT_EQ(back.ps[i].bitmap0, c.ps[i].bitmap0);
    EXPECT_EQ(back.ps[i].bitmap1, c.ps[i].bitmap1);
    EXPECT_EQ(back.ps[i].fan_in0, c.ps[i].fan_in0);
    EXPECT_EQ(back.ps[i].fan_in1, c.ps[i].fan_in1);
    EXPECT_EQ(back.ps[i].edge_switch_identifier, c.ps[i].edge_switch_identifier);
  }
  EXPECT_EQ(back.values_per_packet, c.values_per_packet);
  EXPECT_EQ(back.scale, c.scale);
  EXPECT_EQ(back.aggregators.first, c.aggregators.first);
  EXPECT_EQ(back.aggregators.count, c.aggregators.count);
  EXPECT_EQ(back.index_policy, c.index_policy);
  EXPECT_EQ(back.congestion.enabled, c.congestion.enabled);
  EXPECT_EQ(back.congestion.initial_window, c.congestion.initial_window);
  EXPECT_EQ(back.congestion.min_window, c.congestion.min_window);
  EXPECT_EQ(back.congestion.max_window, c.congestion.max_window);
  EXPECT_EQ(back.congestion.initial_ssthresh, c.congestion.initial_ssthresh);
  EXPECT_EQ(back.congestion.mtu_bytes, c.congestion.mtu_bytes);
  EXPECT_EQ(back.loss_recovery, c.loss_recovery);
  EXPECT_EQ(back.retransmit_timeout, c.retransmit_timeout);
  EXPECT_EQ(back.max_retransmit_timeout, c.max_retransmit_timeout);
  EXPECT_EQ(back.progress_timeout, c.progress_timeout);
  EXPECT_EQ(back.initial_seq, c.initial_seq);
}

// Each bad document is refused with the field it names.
TEST(WorkerConfigCodec, NamesBadFields) {
  const std::string good = to_json(sample());
  auto replaced = [&good](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const struct {
    std::string text, field;
  } cases[] = {
      {"[]", "expected a JSON object"},
      {"{", "not valid JSON"},
      {replaced("\"job\":513", "\"job\":70000"), "job: must be between 0 and 65535"},
      {replaced("\"self\":\"10.0.0.9\"", "\"self\":\"ten\""), "self: expected an address"},
      {replaced("\"index\":\"hashed_slots\"", "\"index\":\"random\""), "index: must be"},
      {replaced("\"loss_recovery\":\"timeout\"", "\"loss_recovery\":\"fast\""), "loss_recovery: must be"},
      {replaced("\"enabled\":false", "\"enabled\":1"), "congestion.enabled: expected true or false"},
      {replaced("\"fan_in0\":3", "\"fan_in0\":300"), "ps[0].fan_in0: must be between 0 and 255"},
      {replaced("\"initial_seq\":77", "\"initial_seq\":77,\"colour\":1"), "colour: unknown key"},
      {replaced(",\"initial_seq\":77", ""), "initial_seq: missing"},
      {replaced("\"progress_timeout_ns\":30000000000", "\"progress_timeout_ns\":-1"), "progress_timeout_ns: must be"},
  };
  for (const auto& c : cases) {
    try {
      worker_config_from_json(c.text);
      ADD_FAILURE() << "accepted " << c.text;
    } catch (const ControlError& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what() << " for " << c.text;
    }
  }
}

}  // namespace
}  // namespace atp::control
