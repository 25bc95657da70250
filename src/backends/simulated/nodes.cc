// The simulated runner's end hosts (nodes.h): packets and timers to the endpoints of the jobs on
// them, and a crash.
#include "nodes.h"

#include <algorithm>

#include "rounds.h"

namespace atp::simulated {

void HostNode::on_packet(PortId, std::span<std::uint8_t> packet, Time now, PortSink& out) {
  if (crashed) return;
  activity_.saw(now);
  Header h;
  if (decode_header(packet, h) != DecodeError::kOk) {
    ++dropped;
    return;
  }
  HostUplink uplink(out);
  if (h.is_ack || h.rina != RinaKind::kNone) {
    auto it = workers.find(h.job);
    if (it == workers.end()) {
      ++dropped;
      return;
    }
    it->second.endpoint->on_packet(h, packet, now, uplink);
    it->second.driver->after_endpoint_call(now);
  } else {
    auto it = ps.find(h.job);
    if (it == ps.end()) {
      ++dropped;
      return;
    }
    it->second.on_packet(h, packet, now, uplink);
  }
}

void HostNode::on_timeout(Time now, PortSink& out) {
  if (crashed) return;
  HostUplink uplink(out);
  // Only what happens counts as activity: a noise source that finds every job finished and stops
  // must not stretch the run's end.
  bool acted = false;
  for (NoiseSender& n : noise) {
    if (n.next_deadline() <= now) acted = n.on_timeout(now, uplink) || acted;
  }
  for (auto& [job, w] : workers) {
    if (w.endpoint->next_deadline() <= now) {
      acted = true;
      w.endpoint->on_timeout(now, uplink);
      w.driver->after_endpoint_call(now);
    }
  }
  for (auto& [job, p] : ps) {
    if (p.next_deadline() <= now) {
      acted = true;
      p.on_timeout(now, uplink);
    }
  }
  if (acted) activity_.saw(now);
}

void HostNode::on_egress_full(Time now) {
  if (crashed) return;
  for (auto& [job, w] : workers) w.endpoint->on_host_queue_full(now);
}

Time HostNode::next_deadline() const {
  if (crashed) return kNever;
  Time t = kNever;
  for (const NoiseSender& n : noise) t = std::min(t, n.next_deadline());
  for (const auto& [job, w] : workers) t = std::min(t, w.endpoint->next_deadline());
  for (const auto& [job, p] : ps) t = std::min(t, p.next_deadline());
  return t;
}

void crash_host(HostNode& host, Time now, sim::Network& network, NodeId node) {
  if (host.crashed) return;
  host.crashed = true;
  host.crash_time = now;
  network.wake(node);
  for (const auto& hook : host.on_crash) network.schedule(now, hook);
}

}  // namespace atp::simulated
