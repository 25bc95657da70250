// One dataplane thread of the switch daemon: bursts from its ports, each packet through its port's
// ingress queue to its pipeline (or the inbox of the shard holding its aggregator, or Ethernet
// switching), the egress queues, and a batch out per port.
#include "switch_shard.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "atp/big_endian.h"
#include "atp/plan/plan.h"

namespace atp::detail {
namespace {

// Port i's ingress queue draws from stream kIngressStreams + i, its egress queue from stream i:
// a fixed offset rather than "after the last port", so that neither an ingress queue (added in
// the config or by PUT /ports) nor another port changes any other queue's trace. Shard k adds
// k * kShardStreams, so that shard 0 (the only one of a one-thread switch) keeps those traces.
constexpr std::uint64_t kIngressStreams = std::uint64_t{1} << 32;
constexpr std::uint64_t kShardStreams = std::uint64_t{1} << 40;

}  // namespace

// ---- ShardInbox ----

ShardInbox::ShardInbox(std::size_t max_bytes) : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), max_bytes_(max_bytes) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot create a dataplane thread's eventfd");
}

ShardInbox::~ShardInbox() { ::close(fd_); }

bool ShardInbox::put(PortId from, std::span<const std::uint8_t> packet) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    const std::size_t offset = waiting_.bytes.size();
    if (offset + packet.size() > max_bytes_) return false;
    waiting_.bytes.insert(waiting_.bytes.end(), packet.begin(), packet.end());
    waiting_.entries.push_back({from, offset, packet.size()});
    wake = !std::exchange(woken_, true);
  }
  if (wake) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
  }
  return true;
}

void ShardInbox::take(Batch& out) {
  // The eventfd first: a put() after the swap below writes it again, so no wakeup is lost.
  std::uint64_t ignored = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd_, &ignored, sizeof ignored);
  out.bytes.clear();
  out.entries.clear();
  std::lock_guard lock(mutex_);
  std::swap(out, waiting_);
  woken_ = false;
}

// ---- SwitchShard ----

SwitchShard::SwitchShard(const SwitchDaemonConfig& config, TableSlice slice,
                         const std::function<std::unique_ptr<SwitchPorts>(const Routes&)>& open_ports,
                         const std::vector<PortLink>& links)
    : seed_(config.seed),
      slice_(slice),
      pipeline_(config.pipeline, slice),
      ports_(open_ports(routes_)),
      sink_(*this),
      inbox_(kShardInboxBytes),
      tasks_(loop_) {
  ingress_queues_.resize(config.ports.size());
  for (std::size_t i = 0; i < config.ports.size(); ++i) {
    const auto p = static_cast<PortId>(i);
    queues_.push_back(new_queue(p, false, config.ports[i].egress, links[i].egress));
    if (config.ports[i].ingress) set_ingress(p, *config.ports[i].ingress, links[i]);
  }
  port_counters_.resize(config.ports.size());
  passed_.resize(config.ports.size());
  for (const auto& [dst, port] : config.routes) add_route(dst, port);
  const std::vector<int> fds = ports_->fds();
  for (std::size_t i = 0; i < fds.size(); ++i) loop_.add_readable(fds[i], [this, i] { on_readable(i); });
  loop_.add_readable(inbox_.fd(), [this] { on_inbox(); });
}

EgressQueue SwitchShard::new_queue(PortId p, bool ingress, const EgressConfig& settings,
                                   const std::shared_ptr<SharedTransmitter>& transmitter) const {
  const std::uint64_t stream = slice_.index * kShardStreams + (ingress ? kIngressStreams : 0) + p;
  EgressQueue q(settings, EgressQueue::stream_seed(seed_, stream), ports_->framing());
  if (transmitter) q.share_transmitter(transmitter);
  return q;
}

// Packets waiting on ports_->fds()[source].
void SwitchShard::on_readable(std::size_t source) {
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
        deliver(packet.port, packet.bytes, now, true);
      }
    }
    process_ingress(now);  // an ingress queue without rate or delay releases at once
    flush(now);
    if (!burst.full) break;
  }
}

// Packets other shards received for this one's aggregators: straight to the pipeline (they
// passed their port's ingress queue and Ethernet switching at the shard that received them).
void SwitchShard::on_inbox() {
  inbox_.take(handed_);
  if (handed_.entries.empty()) return;
  const Time now = EventLoop::now();
  sink_.now = now;
  for (std::size_t i = 0; i < handed_.entries.size(); ++i) {
    sink_.in_hand = handed_.packet(i);  // handed_ is kept until the next take()
    pipeline_.process(handed_.entries[i].from, handed_.packet(i), now, sink_);
  }
  sink_.in_hand = {};
  flush(now);
}

// Hands the packets the ingress queues release by `now` on to deliver().
void SwitchShard::process_ingress(Time now) {
  for (std::size_t p = 0; p < ingress_queues_.size(); ++p) {
    if (!ingress_queues_[p]) continue;
    // The queue reuses a released packet's buffer for the next one.
    ingress_queues_[p]->release(
        now, [&](std::span<std::uint8_t> packet) { deliver(static_cast<PortId>(p), packet, now, false); });
  }
}

// One packet from port `from`, past its ingress queue: to the pipeline of the shard holding its
// aggregator, or (interface ports, a frame that is not ATP's) switched to the egress queues as
// Ethernet.
void SwitchShard::deliver(PortId from, std::span<std::uint8_t> packet, Time now, bool stable) {
  const SwitchPorts::Destination to = ports_->destination(from, packet);
  switch (to.kind) {
    case SwitchPorts::Destination::Kind::kPipeline: {
      // A packet too short to name an aggregator stays here (the pipeline counts it malformed).
      if (inboxes_.size() > 1 && to.atp.size() >= kHeaderBytes && pipeline_.table().size() != 0) {
        const std::uint32_t index = big_endian::get32(to.atp.data() + kAggregatorIndexOffset);
        const std::uint32_t owner = slice_of(index, pipeline_.config().num_aggregators, slice_.count);
        if (owner != slice_.index) {
          ++(inboxes_[owner]->put(from, to.atp) ? handed_off_ : handoff_drops_);
          return;
        }
      }
      sink_.in_hand = stable ? to.atp : std::span<const std::uint8_t>{};
      pipeline_.process(from, to.atp, now, sink_);
      sink_.in_hand = {};
      return;
    }
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

void SwitchShard::QueueSink::send(PortId port, std::span<const std::uint8_t> packet) {
  // A route or group naming a port the switch does not have, or one detached by DELETE /hosts.
  if (port >= shard_.queues_.size() || !shard_.ports_->attached(port)) {
    ++shard_.no_port_;
    return;
  }
  const auto bytes = shard_.ports_->encapsulate(port, packet);
  if (!bytes) return;
  EgressQueue& queue = shard_.queues_[port];
  // The packet in hand (the pipeline rewrites it before it sends it, never after), as it is, to a
  // port with nothing to do to it: no copy into the queue. Anything else (the pipeline's partial
  // aggregates, frames built around a packet) is the queue's to copy.
  if (bytes->data() == in_hand.data() && bytes->size() == in_hand.size() && !in_hand.empty() &&
      queue.passes_through()) {
    queue.passed(bytes->size());
    shard_.passed_[port].push_back(*bytes);
    return;
  }
  queue.enqueue(*bytes, now);
}

Time SwitchShard::next_deadline() const {
  Time t = pipeline_.next_deadline();
  for (const EgressQueue& q : queues_) t = std::min(t, q.next_release());
  for (const std::optional<EgressQueue>& q : ingress_queues_) {
    if (q) t = std::min(t, q->next_release());
  }
  return t;
}

void SwitchShard::on_deadline(Time now) {
  sink_.now = now;
  pipeline_.on_timeout(now, sink_);  // partial sums reclaimed go out with what the queues release
  process_ingress(now);
  flush(now);
}

// Sends every packet the queues release by `now`, port by port (SwitchPorts::send: in one
// sendmmsg batch to the UDP peers, or one batch per interface port), straight from the queues'
// storage: pop_due swaps a released packet's buffer into tx_bytes_ and takes tx_bytes_'s old one
// into its pool, so nothing is copied and, once the pools have grown, nothing allocated. Packets
// a queue passed through (QueueSink::send) go from the received bytes, after what it released.
void SwitchShard::flush(Time now) {
  std::size_t count = 0;   // tx_'s entries
  std::size_t popped = 0;  // tx_bytes_'s buffers in use
  auto add = [&](PortId port, std::span<const std::uint8_t> bytes) {
    if (tx_.size() <= count) tx_.emplace_back();
    tx_[count++] = {port, bytes};
  };
  for (std::size_t p = 0; p < queues_.size(); ++p) {
    const auto port = static_cast<PortId>(p);
    for (;;) {
      // Moving tx_bytes_'s vectors when it grows keeps their buffers: earlier spans stay valid.
      if (tx_bytes_.size() <= popped) tx_bytes_.emplace_back();
      if (!queues_[p].pop_due(now, tx_bytes_[popped])) break;
      add(port, tx_bytes_[popped++]);
    }
    // A queue passes packets through only while it holds none: they come after what it released.
    for (std::span<const std::uint8_t> bytes : passed_[p]) add(port, bytes);
    passed_[p].clear();
  }
  if (count == 0) return;
  send_failed_ += ports_->send(std::span<const SwitchPorts::Outgoing>(tx_.data(), count));
}

void SwitchShard::set_ingress(PortId port, const EgressConfig& settings, const PortLink& link) {
  std::optional<EgressQueue>& q = ingress_queues_[port];
  if (q) {
    q->config() = settings;
  } else {
    q.emplace(new_queue(port, true, settings, link.ingress));
  }
}

void SwitchShard::reset_port(PortId port, const PortLink& link) {
  queues_[port] = new_queue(port, false, EgressConfig{}, link.egress);
  ingress_queues_[port].reset();
  port_counters_[port] = {};
}

PortId SwitchShard::add_port(const PortLink& link) {
  const auto port = static_cast<PortId>(queues_.size());
  queues_.emplace_back();
  ingress_queues_.emplace_back();
  port_counters_.emplace_back();
  passed_.emplace_back();
  reset_port(port, link);
  return port;
}

void SwitchShard::add_route(Address dst, PortId port) {
  pipeline_.add_route(dst, port);
  routes_[dst] = port;
}

void SwitchShard::remove_routes_to(PortId port) {
  for (auto it = routes_.begin(); it != routes_.end();) {
    if (it->second == port) {
      pipeline_.remove_route(it->first);
      it = routes_.erase(it);
    } else {
      ++it;
    }
  }
}

void SwitchShard::remove_route(Address dst) {
  if (routes_.erase(dst) != 0) pipeline_.remove_route(dst);
}

std::optional<PortId> SwitchShard::route_of(Address dst) const {
  const auto it = routes_.find(dst);
  return it == routes_.end() ? std::nullopt : std::optional<PortId>(it->second);
}

std::optional<Address> SwitchShard::address_of(PortId p) const {
  std::optional<Address> lowest;
  for (const auto& [dst, port] : routes_) {
    if (port == p && (!lowest || dst < *lowest)) lowest = dst;
  }
  return lowest;
}

std::optional<Address> SwitchShard::free_address(Address first, Address last) const {
  for (Address a = first; a <= last; ++a) {
    if (!routes_.contains(a)) return a;
  }
  return std::nullopt;
}

}  // namespace atp::detail
