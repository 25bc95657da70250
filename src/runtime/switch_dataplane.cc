// The switch daemon's dataplane: bursts from the ports, each packet through its port's ingress
// queue to SwitchPipeline (or Ethernet switching), the egress queues, and a batch out per port.
#include "switch_dataplane.h"

#include <algorithm>
#include <utility>

#include "atp/plan.h"

namespace atp::detail {
namespace {

// Port i's ingress queue draws from stream kIngressStreams + i, its egress queue from stream i:
// a fixed offset rather than "after the last port", so that neither an ingress queue (added in
// the config or by PUT /ports) nor another port changes any other queue's trace.
constexpr std::uint64_t kIngressStreams = std::uint64_t{1} << 32;

}  // namespace

SwitchDataplane::SwitchDataplane(const SwitchDaemonConfig& config)
    : seed_(config.seed),
      pipeline_(config.pipeline),
      ports_(config.interface_ports() ? open_ethernet_ports(config, routes_) : open_udp_ports(config)),
      sink_(*this) {
  ingress_queues_.resize(config.ports.size());
  for (std::size_t i = 0; i < config.ports.size(); ++i) {
    queues_.emplace_back(config.ports[i].egress, EgressQueue::stream_seed(seed_, i), ports_->framing());
    if (config.ports[i].ingress) set_ingress(static_cast<PortId>(i), *config.ports[i].ingress);
  }
  port_counters_.resize(config.ports.size());
  for (const auto& [dst, port] : config.routes) add_route(dst, port);
}

void SwitchDataplane::watch(EventLoop& loop) {
  const std::vector<int> fds = ports_->fds();
  for (std::size_t i = 0; i < fds.size(); ++i) loop.add_readable(fds[i], [this, i] { on_readable(i); });
}

// Packets waiting on ports_->fds()[source].
void SwitchDataplane::on_readable(std::size_t source) {
  // A few bursts per wakeup, then back to the loop so control requests and timers are served.
  for (int round = 0; round < 8; ++round) {
    const SwitchPorts::Burst burst = ports_->receive_burst(source);
    if (burst.read == 0) break;
    const Time now = EventLoop::now();
    sink_.now = now;
    for (const SwitchPorts::Received& packet : burst.packets) {
      port_counters_[packet.port].rx_packets++;
      port_counters_[packet.port].rx_bytes += packet.bytes.size();
      ports_->on_arrival(packet.port, packet.bytes);
      if (std::optional<EgressQueue>& ingress = ingress_queues_[packet.port]) {
        ingress->enqueue(packet.bytes, now);
      } else {
        deliver(packet.port, packet.bytes, now);
      }
    }
    process_ingress(now);  // an ingress queue without rate or delay releases at once
    flush(now);
    if (!burst.full) break;
  }
}

// Hands the packets the ingress queues release by `now` on to deliver().
void SwitchDataplane::process_ingress(Time now) {
  for (std::size_t p = 0; p < ingress_queues_.size(); ++p) {
    if (!ingress_queues_[p]) continue;
    ingress_queues_[p]->release(now,
                                [&](std::span<std::uint8_t> packet) { deliver(static_cast<PortId>(p), packet, now); });
  }
}

// One packet from port `from`, past its ingress queue: to the pipeline, or (interface ports,
// a frame that is not ATP's) switched to the egress queues as Ethernet.
void SwitchDataplane::deliver(PortId from, std::span<std::uint8_t> packet, Time now) {
  const SwitchPorts::Destination to = ports_->destination(from, packet);
  switch (to.kind) {
    case SwitchPorts::Destination::Kind::kPipeline:
      pipeline_.process(from, to.atp, now, sink_);
      return;
    case SwitchPorts::Destination::Kind::kPort:
      queues_[to.port].enqueue(packet, now);
      return;
    case SwitchPorts::Destination::Kind::kAllOtherPorts:
      for (std::size_t q = 0; q < queues_.size(); ++q) {
        if (q != from) queues_[q].enqueue(packet, now);
      }
      return;
    case SwitchPorts::Destination::Kind::kNowhere:
      return;
  }
}

void SwitchDataplane::QueueSink::send(PortId port, std::span<const std::uint8_t> packet) {
  // A route or group naming a port the switch does not have, or one detached by DELETE /hosts.
  if (port >= dataplane_.queues_.size() || !dataplane_.ports_->attached(port)) {
    ++dataplane_.no_port_;
    return;
  }
  if (const auto bytes = dataplane_.ports_->encapsulate(port, packet)) dataplane_.queues_[port].enqueue(*bytes, now);
}

Time SwitchDataplane::next_deadline() const {
  Time t = pipeline_.next_deadline();
  for (const EgressQueue& q : queues_) t = std::min(t, q.next_release());
  for (const std::optional<EgressQueue>& q : ingress_queues_) {
    if (q) t = std::min(t, q->next_release());
  }
  return t;
}

void SwitchDataplane::on_deadline(Time now) {
  pipeline_.on_timeout(now);
  sink_.now = now;
  process_ingress(now);
  flush(now);
}

// Sends every packet the queues release by `now`, port by port (SwitchPorts::send: in one
// sendmmsg batch to the UDP peers, or one batch per interface port), straight from the queues'
// storage: pop_due swaps a released packet's buffer into tx_bytes_ and takes tx_bytes_'s old one
// into its pool, so nothing is copied and, once the pools have grown, nothing allocated.
void SwitchDataplane::flush(Time now) {
  std::size_t count = 0;
  for (std::size_t p = 0; p < queues_.size(); ++p) {
    for (;;) {
      if (tx_bytes_.size() <= count) tx_bytes_.emplace_back();
      if (!queues_[p].pop_due(now, tx_bytes_[count])) break;
      if (tx_.size() <= count) tx_.emplace_back();
      tx_[count].port = static_cast<PortId>(p);
      ++count;
    }
  }
  if (count == 0) return;
  for (std::size_t i = 0; i < count; ++i) tx_[i].bytes = tx_bytes_[i];
  send_failed_ += ports_->send(std::span<const SwitchPorts::Outgoing>(tx_.data(), count));
}

void SwitchDataplane::set_ingress(PortId port, const EgressConfig& settings) {
  std::optional<EgressQueue>& q = ingress_queues_[port];
  if (q) {
    q->config() = settings;
  } else {
    q.emplace(settings, EgressQueue::stream_seed(seed_, kIngressStreams + port), ports_->framing());
  }
}

void SwitchDataplane::reset_port(PortId port) {
  queues_[port] = EgressQueue(EgressConfig{}, EgressQueue::stream_seed(seed_, port), ports_->framing());
  ingress_queues_[port].reset();
  port_counters_[port] = {};
}

PortId SwitchDataplane::add_port() {
  const auto port = static_cast<PortId>(queues_.size());
  queues_.emplace_back();
  ingress_queues_.emplace_back();
  port_counters_.emplace_back();
  reset_port(port);
  return port;
}

void SwitchDataplane::add_route(Address dst, PortId port) {
  pipeline_.add_route(dst, port);
  routes_[dst] = port;
}

void SwitchDataplane::remove_routes_to(PortId port) {
  for (auto it = routes_.begin(); it != routes_.end();) {
    if (it->second == port) {
      pipeline_.remove_route(it->first);
      it = routes_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<Address> SwitchDataplane::address_of(PortId p) const {
  std::optional<Address> lowest;
  for (const auto& [dst, port] : routes_) {
    if (port == p && (!lowest || dst < *lowest)) lowest = dst;
  }
  return lowest;
}

std::optional<Address> SwitchDataplane::free_address() const {
  for (Address a = kFirstHostAddress; a <= kLastHostAddress; ++a) {
    if (!routes_.contains(a)) return a;
  }
  return std::nullopt;
}

}  // namespace atp::detail
