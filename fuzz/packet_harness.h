// One fuzz input fed to every piece of the core that parses network bytes: the decoder, a
// switch pair (one above the other), a Rina ToR, a worker, a PS and a Rina worker. Shared by the libFuzzer target and
// the seeded gtest.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "atp/ps.h"
#include "atp/rina/worker.h"
#include "atp/switch.h"
#include "atp/wire.h"
#include "atp/worker.h"

namespace atp::fuzz {

// Everything a switch sends must itself decode: a switch never emits garbage.
class CheckingPortSink final : public PortSink {
 public:
  void send(PortId, std::span<const std::uint8_t> packet) override {
    Header h;
    if (decode_header(packet, h) != DecodeError::kOk) std::abort();
    ++sent;
  }
  std::uint64_t sent = 0;
};
class CheckingPacketSink final : public PacketSink {
 public:
  void send(std::span<const std::uint8_t> packet) override {
    Header h;
    if (decode_header(packet, h) != DecodeError::kOk) std::abort();
    ++sent;
  }
  std::uint64_t sent = 0;
};

// Long-lived state, so that a sequence of inputs can build up aggregator state.
struct Harness {
  Harness()
      : level0(config(16)),
        level1(config(16)),
        rina(config(16)),
        worker(worker_config()),
        ps(ps_config()),
        rina_worker(rina_config()) {
    for (SwitchPipeline* s : {&level0, &level1, &rina}) {
      s->add_route(kPs, 0);
      s->add_route(kWorker, 1);
      s->add_multicast_group(multicast_group_address(kJob), {1, 2});
    }
    level0.install_job({kJob, {0, 1, 2}, {{kPs, 2, {{4, 1}, {5, 1}}}}, {}});
    level1.install_job({kJob, {0, 1, 2}, {{kPs, 1, {{2, 2}, {3, 1}}}}, {}});
    rina.install_job({kJob, {0, 1, 2}, {}, {1, 2}});  // a rack of two workers on ports 1 and 2
    std::vector<float> input(200, 0.25f);
    worker.start(input, time_from_ns(0), host_sink);
    rina_worker.start(input, time_from_ns(0), host_sink);
  }

  // The job's tree (PsConfig::tree): node 1, level1, above node 2, level0, and worker 3; level0
  // above workers 4 (`worker`) and 5.
  static constexpr JobId kJob = 3;
  static constexpr Address kPs = 0x0A000009;
  static constexpr Address kWorker = 0x0A000001;

  static SwitchConfig config(std::uint32_t aggregators) {
    SwitchConfig c;
    c.num_aggregators = aggregators;
    c.aggregator_width = 64;
    c.reclaim_timeout = std::chrono::microseconds(100);
    return c;
  }
  static WorkerConfig worker_config() {
    WorkerConfig c;
    c.job = kJob;
    c.self = kWorker;
    c.ps = {PsRoute{kPs, 4}};
    c.values_per_packet = 8;
    c.aggregators = {0, 16};
    c.congestion.initial_window = 4;
    return c;
  }
  // Rank 1 of a ring of a rack (ranks 0, 1) and an autonomous worker (rank 2).
  static RinaConfig rina_config() {
    RinaConfig c;
    c.job = kJob;
    c.rank = 1;
    c.workers = {0x0A000002, kWorker, kPs};
    c.members = {{0, 1}, {2}};
    c.values_per_packet = 8;
    c.aggregator_slots = 16;
    c.congestion.initial_window = 4;
    return c;
  }
  static PsConfig ps_config() {
    PsConfig c;
    c.job = kJob;
    c.self = kPs;
    c.multicast_group = multicast_group_address(kJob);
    c.tree = {0, 0, 1, 1, 2, 2};
    c.values_per_packet = 8;
    c.aggregators = {0, 16};
    c.max_window_seqs = 32;
    return c;
  }

  void feed(std::span<const std::uint8_t> data) {
    now += Duration(7000);
    Header h;
    (void)decode_header(data, h);
    std::vector<std::uint8_t> buffer(data.begin(), data.end());
    for (PortId port : {PortId{0}, PortId{1}, PortId{2}, PortId{9}}) {
      std::vector<std::uint8_t> copy = buffer;
      level0.process(port, copy, now, port_sink);
      copy = buffer;
      level1.process(port, copy, now, port_sink);
      copy = buffer;
      rina.process(port, copy, now, port_sink);
    }
    worker.on_packet(buffer, now, host_sink);
    ps.on_packet(buffer, now, host_sink);
    rina_worker.on_packet(buffer, now, host_sink);
    if (rina_worker.next_deadline() <= now) rina_worker.on_timeout(now, host_sink);
    if (level0.next_deadline() <= now) level0.on_timeout(now, port_sink);
    if (rina.next_deadline() <= now) rina.on_timeout(now, port_sink);
    if (worker.next_deadline() <= now) worker.on_timeout(now, host_sink);
    if (level0.table().in_use() > level0.table().size()) std::abort();
    if (rina.table().in_use() > rina.table().size()) std::abort();
  }

  SwitchPipeline level0, level1, rina;
  WorkerEndpoint worker;
  PsEndpoint ps;
  RinaWorker rina_worker;
  CheckingPortSink port_sink;
  CheckingPacketSink host_sink;
  Time now = time_from_ns(0);
};

}  // namespace atp::fuzz
