// The job plan and the packets the switch tests send by hand (built the way the endpoints build
// them), shared by the tests on UDP ports (switch_daemon_test) and on interfaces (switch_l2_test).
#pragma once

#include <poll.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "atp/io/udp_socket.h"
#include "atp/plan/plan.h"
#include "atp/wire.h"

namespace atp::test {

// The next datagram on `socket`, waiting at most `timeout_ms`; nullopt if none came.
inline std::optional<std::vector<std::uint8_t>> receive(UdpSocket& socket, int timeout_ms) {
  UdpRecvBatch batch(1);
  pollfd p{socket.fd(), POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0 || socket.recv_batch(batch) == 0) return std::nullopt;
  auto bytes = batch.bytes(0);
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

// The plan both switch tests use: one switch s0 (16 aggregators of 8 values, `sc` otherwise)
// with hosts w0, w1, ps0, h3 on ports 0..3; job j1 (id 1, 4 values per packet) has workers w0,
// w1 and PS ps0. `network` points into `topology`, so the caller keeps both alive.
inline JobPlan plan_one_switch_job(SwitchConfig sc, Topology& topology, NetworkPlan& network) {
  sc.num_aggregators = 16;
  sc.aggregator_width = 8;
  topology.switches = {{"s0", sc}};
  topology.hosts = {{"w0", "s0"}, {"w1", "s0"}, {"ps0", "s0"}, {"h3", "s0"}};
  network = plan_network(topology);
  JobSpec spec;
  spec.name = "j1";
  spec.id = 1;
  spec.workers = {"w0", "w1"};
  spec.ps = {"ps0"};
  spec.values_per_packet = 4;
  return plan_job(network, spec);
}

// Worker `wc`'s gradient packet for fragment `seq` towards its first PS, at aggregator
// `aggregator_index` (header fields from the job plan).
inline std::vector<std::uint8_t> gradient_packet(const WorkerConfig& wc, Seq seq, std::uint32_t aggregator_index,
                                                 const std::vector<std::int32_t>& values) {
  Header h;
  h.job = wc.job;
  h.seq = seq;
  h.node = wc.ps[0].node;
  h.bitmap = 1;
  h.fan_in = 1;
  h.aggregator_index = aggregator_index;
  h.src = wc.self;
  h.dst = wc.ps[0].ps;
  return build_packet(h, values);
}

}  // namespace atp::test
