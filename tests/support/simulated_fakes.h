// Stand-ins for the simulated runner's unit tests (tests/backends/simulated_*_test.cc): a network
// that runs what the nodes schedule when the test says, a port sink that keeps what was sent, and
// an endpoint the test steers.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../src/backends/simulated/nodes.h"
#include "atp/wire.h"

namespace atp::test {

using sim::NodeId;

inline Time at(Duration d) { return Time(d); }

// What a node sent, by port.
class RecordingPorts final : public PortSink {
 public:
  void send(PortId port, std::span<const std::uint8_t> packet) override {
    sent.push_back({port, std::vector<std::uint8_t>(packet.begin(), packet.end())});
  }
  std::vector<std::pair<PortId, std::vector<std::uint8_t>>> sent;
};

// A network that moves no packets: it keeps what is scheduled (run by run_until, in time order,
// ties in the order scheduled), the nodes woken, and what is sent through sink_for.
class ScriptedNetwork final : public sim::Network {
 public:
  NodeId add_switch(std::string, std::unique_ptr<sim::Node>, std::map<Address, PortId>) override { return 0; }
  NodeId add_host(std::string, std::unique_ptr<sim::Node>, Address) override { return 0; }
  std::pair<std::size_t, std::size_t> connect(NodeId, PortId, NodeId, PortId, const sim::ChannelConfig&,
                                              const sim::ChannelConfig&) override {
    return {};
  }
  void set_channel_config(std::size_t, const sim::ChannelConfig&) override {}
  sim::ChannelCounters channel_counters(std::size_t) const override { return {}; }
  void schedule(Time t, std::function<void(Time)> f) override { events.emplace(std::max(t, now_), std::move(f)); }
  void wake(NodeId node) override { woken.push_back(node); }
  PortSink& sink_for(NodeId) override { return sent; }
  Time now() const override { return now_; }
  std::uint64_t run_until(Time limit) override {
    std::uint64_t n = 0;
    while (!events.empty() && events.begin()->first <= limit) {
      auto event = events.extract(events.begin());
      now_ = event.key();
      event.mapped()(now_);
      ++n;
    }
    now_ = std::max(now_, limit);
    return n;
  }
  std::uint64_t events_processed() const override { return 0; }
  std::uint32_t mtu_bytes() const override { return 0; }

  std::multimap<Time, std::function<void(Time)>> events;
  std::vector<NodeId> woken;
  RecordingPorts sent;

 private:
  Time now_{};
};

// An endpoint the test steers: start() records the input and succeeds unless `busy`; a packet
// ends the round (kIdle with `result_values`), or fails it when `error_text` is set.
class FakeEndpoint final : public Endpoint {
 public:
  bool start(std::span<const float> input, Time, PacketSink&) override {
    if (busy) return false;
    starts.emplace_back(input.begin(), input.end());
    state_ = WorkerState::kRunning;
    return true;
  }
  bool start_in_place(std::span<float> values, Time now, PacketSink& out) override { return start(values, now, out); }
  void on_packet(std::span<const std::uint8_t>, Time, PacketSink&) override { ADD_FAILURE() << "undecoded packet"; }
  void on_packet(const Header&, std::span<const std::uint8_t>, Time, PacketSink&) override {
    ++packets;
    state_ = error_text.empty() ? WorkerState::kIdle : WorkerState::kFailed;
  }
  void on_timeout(Time, PacketSink&) override { ++timeouts; }
  void on_host_queue_full(Time) override { ++queue_full; }
  Time next_deadline() const override { return deadline; }
  WorkerState state() const override { return state_; }
  const std::string& error() const override { return error_text; }
  std::span<const float> result() const override { return result_values; }
  bool picks_exponents() const override { return picks; }
  const std::vector<std::int16_t>& result_exponents() const override { return exponents; }
  std::vector<std::int16_t> next_exponents(std::uint32_t) const override { return {}; }
  const std::vector<std::uint32_t>& float_fragments() const override { return floats; }
  std::string_view protocol() const override { return "fake"; }
  JobId job() const override { return 1; }
  Address self() const override { return 0; }
  std::vector<Address> sources() const override { return {}; }
  std::uint16_t values_per_packet() const override { return 4; }
  Seq resume_seq() const override { return 0; }
  Linger linger() const override { return {}; }
  std::uint32_t window() const override { return 1; }
  EndpointCounts counts() const override { return counts_value; }
  std::vector<EndpointCounter> counters() const override { return {}; }

  bool busy = false;
  std::vector<std::vector<float>> starts;
  std::vector<float> result_values;
  Time deadline = kNever;
  int packets = 0, timeouts = 0, queue_full = 0;
  std::string error_text;
  EndpointCounts counts_value;
  bool picks = false;                   // picks_exponents (Rina's)
  std::vector<std::int16_t> exponents;  // result_exponents
  std::vector<std::uint32_t> floats;    // float_fragments

 private:
  WorkerState state_ = WorkerState::kIdle;
};

// A parameter packet of job `job` (what a worker hears), or a gradient (what a PS hears).
inline std::vector<std::uint8_t> packet_of(JobId job, bool parameter) {
  Header h;
  h.job = job;
  h.is_ack = parameter;
  h.fan_in = 1;
  h.bitmap = 1;
  return build_packet(h, std::vector<std::int32_t>{1, 2, 3, 4});
}

}  // namespace atp::test
