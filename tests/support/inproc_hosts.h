// Nodes of the in-process network for tests that wire a planned job by hand: a switch running
// the pipeline with the plan's routes and the job's entry, and a host endpoint's uplink.
#pragma once

#include <map>
#include <span>

#include "atp/packet_sink.h"
#include "atp/plan/plan.h"
#include "atp/sim/simulated_network.h"
#include "atp/switch.h"

namespace atp::test {

// A switch node of a hand-built job: the pipeline with the plan's routes, the job's multicast
// group (where the plan has one) and its entry.
class SwitchHost final : public sim::Node {
 public:
  SwitchHost(const SwitchConfig& config, const std::map<Address, PortId>& routes, const SwitchJobPlan* job,
             JobId job_id)
      : pipeline(config) {
    for (const auto& [dst, port] : routes) pipeline.add_route(dst, port);
    if (job != nullptr) {
      if (!job->multicast_ports.empty())
        pipeline.add_multicast_group(multicast_group_address(job_id), job->multicast_ports);
      pipeline.install_job(job->entry);
    }
  }
  void on_packet(PortId port, std::span<std::uint8_t> p, Time now, PortSink& out) override {
    pipeline.process(port, p, now, out);
  }
  void on_timeout(Time now, PortSink& out) override { pipeline.on_timeout(now, out); }
  Time next_deadline() const override { return pipeline.next_deadline(); }

  SwitchPipeline pipeline;
};

// A host's single uplink: whatever an endpoint sends leaves on port 0.
class Uplink final : public PacketSink {
 public:
  explicit Uplink(PortSink& ports) : ports_(ports) {}
  void send(std::span<const std::uint8_t> p) override { ports_.send(0, p); }

 private:
  PortSink& ports_;
};

}  // namespace atp::test
