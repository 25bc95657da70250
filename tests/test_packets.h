// Packets the daemon tests send by hand, built from a job plan the way the endpoints build them,
// shared by the switch tests on UDP ports (switch_daemon_test) and on interfaces (switch_l2_test).
#pragma once

#include <cstdint>
#include <vector>

#include "atp/plan.h"
#include "atp/wire.h"

namespace atp::test {

// Worker `wc`'s gradient packet for fragment `seq` towards its first PS, at aggregator
// `aggregator_index` (header fields from the job plan).
inline std::vector<std::uint8_t> gradient_packet(const WorkerConfig& wc, Seq seq, std::uint32_t aggregator_index,
                                                 const std::vector<std::int32_t>& values) {
  Header h;
  h.job = wc.job;
  h.seq = seq;
  h.bitmap0 = wc.ps[0].bitmap0;
  h.bitmap1 = wc.ps[0].bitmap1;
  h.fan_in0 = wc.ps[0].fan_in0;
  h.fan_in1 = wc.ps[0].fan_in1;
  h.edge_switch_identifier = wc.ps[0].edge_switch_identifier;
  h.aggregator_index = aggregator_index;
  h.src = wc.self;
  h.dst = wc.ps[0].ps;
  return build_packet(h, values);
}

}  // namespace atp::test
