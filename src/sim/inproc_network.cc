// The deterministic in-process network: one event heap ordered by (time, insertion order),
// channels whose egress queues serialize, mark, lose, duplicate and reorder from seeded RNGs.
#include "atp/sim/inproc_network.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <stdexcept>

#include "atp/io/fair_queue.h"

namespace atp::inproc {
namespace {

constexpr std::int32_t kNoChannel = -1;

enum class EventKind : std::uint8_t { kDeliver, kTimer, kScripted, kEgressFull, kNextInTurn };

// A heap entry: small, so that sifting is cheap; packet bytes live in the channels' egress
// queues, scripted functions in a pool.
struct Event {
  std::int64_t time_ns;
  std::uint64_t order;  // insertion order: ties at equal times keep FIFO order
  EventKind kind;
  std::uint32_t target;  // kDeliver, kNextInTurn: channel; kTimer, kEgressFull: node; kScripted: index into scripted
  std::uint64_t token;   // kTimer: timer generation; otherwise unused
};
struct LaterFirst {
  bool operator()(const Event& a, const Event& b) const {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.order > b.order;
  }
};

}  // namespace

struct Network::Impl {
  using NodeSink = sim::NodeSink<Impl>;

  struct NodeState {
    std::string name;
    std::unique_ptr<Node> node;
    std::unique_ptr<NodeSink> sink;
    std::vector<std::int32_t> channel_by_port;  // egress channel per port; kNoChannel if unconnected
    Time armed_timer = kNever;                  // time of the armed (newest) timer event
    bool egress_full_pending = false;           // a kEgressFull event for it is in the heap
    std::uint64_t timer_generation = 0;         // tells the newest timer event from stale ones
  };
  struct Channel {
    NodeId from = 0, to = 0;
    PortId to_port = 0;
    ChannelConfig config;  // copied into the queue at each send, so that faults may change between events
    EgressQueue queue;     // holds every packet in flight on this channel, in release order
    // config.fair_queueing: the packets waiting for the transmitter, by job; a kNextInTurn event
    // hands the next one to `queue` as the transmitter finishes the last.
    FairQueue<std::vector<std::uint8_t>> waiting;
    bool next_in_turn_pending = false;
  };

  explicit Impl(std::uint64_t s) : seed(s) {}

  void push(std::int64_t time_ns, EventKind kind, std::uint32_t target, std::uint64_t token) {
    heap.push(Event{time_ns, next_order++, kind, target, token});
  }

  // A node sent `bytes` out of `port` at `now`: queue, serialize, then decide the packet's fate.
  void transmit(NodeId from, PortId port, std::span<const std::uint8_t> bytes) {
    const NodeState& n = nodes[from];
    if (port >= n.channel_by_port.size() || n.channel_by_port[port] == kNoChannel) {
      ++unconnected_drops;
      return;
    }
    const auto channel = static_cast<std::size_t>(n.channel_by_port[port]);
    Channel& c = channels[channel];
    c.queue.config() = c.config;
    if (c.config.fair_queueing && c.config.rate_gbps > 0 && (!c.waiting.empty() || c.queue.busy_at(now))) {
      wait_for_turn(channel, bytes);
      return;
    }
    enqueue(channel, bytes);
  }

  // The node sending on `channel` is told of a refusal right after the callback that sent it.
  void refused(std::size_t channel) {
    NodeState& n = nodes[channels[channel].from];
    if (n.egress_full_pending) return;
    n.egress_full_pending = true;
    push(to_ns(now), EventKind::kEgressFull, channels[channel].from, 0);
  }

  // A fair-queueing channel's transmitter is busy: the packet waits in its job's turn, within
  // the channel's buffer (which counts the packet being sent).
  void wait_for_turn(std::size_t channel, std::span<const std::uint8_t> bytes) {
    Channel& c = channels[channel];
    const std::size_t queued = c.waiting.size() + (c.queue.busy_at(now) ? 1 : 0);
    const std::uint64_t flow = job_flow(bytes);
    const EgressQueue::Admission admission =
        c.queue.admit(queued, c.waiting.bytes() + c.queue.sending_bytes(now), bytes);
    if (EgressQueue::refuses(admission)) {
      refused(channel);
      // A full buffer drops from the job that fills it: this packet takes the dropped one's place.
      if (admission == EgressQueue::Admission::kUnmarkable || !c.waiting.drop_for(flow)) return;
    }
    std::vector<std::uint8_t> packet(bytes.begin(), bytes.end());
    if (admission == EgressQueue::Admission::kMark) c.queue.mark(packet);
    c.waiting.push(flow, std::move(packet), bytes.size() + kEncapsulationBytes);
    if (!c.next_in_turn_pending) {
      c.next_in_turn_pending = true;
      push(to_ns(std::max(now, c.queue.transmitter_free_at())), EventKind::kNextInTurn,
           static_cast<std::uint32_t>(channel), 0);
    }
  }

  // Puts `bytes` on `channel`'s egress queue, with one delivery event per copy it will release.
  void enqueue(std::size_t channel, std::span<const std::uint8_t> bytes) {
    Channel& c = channels[channel];
    const EnqueueResult r = c.queue.enqueue(bytes, now);
    if (r.status == EnqueueStatus::kQueueFull) refused(channel);
    if (r.status != EnqueueStatus::kQueued) return;
    // One delivery event per copy: the queue releases its copies in the same (time, enqueue
    // order) as the heap pops these events, so each event takes exactly the packet it stands for.
    push(to_ns(r.release), EventKind::kDeliver, static_cast<std::uint32_t>(channel), 0);
    if (r.duplicate_release != kNever) {
      push(to_ns(r.duplicate_release), EventKind::kDeliver, static_cast<std::uint32_t>(channel), 0);
    }
  }

  // After any callback of `id`: arm a timer event if its deadline moved earlier than the armed
  // one. A deadline already due fires at once, except right after on_timeout: a node that is
  // still due then (e.g. an off-by-one between its deadline and its expiry test) is retried 1 ns
  // later, so that it cannot hold the clock still and make run_until() spin forever.
  void rearm(NodeId id, bool after_timeout = false) {
    NodeState& n = nodes[id];
    const Time deadline = n.node->next_deadline();
    if (deadline == kNever) return;
    const Time earliest = after_timeout ? now + Duration(1) : now;
    const Time at = std::max(deadline, earliest);
    if (at >= n.armed_timer) return;
    n.armed_timer = at;
    push(to_ns(at), EventKind::kTimer, id, ++n.timer_generation);
  }

  void dispatch(const Event& e) {
    switch (e.kind) {
      case EventKind::kDeliver: {
        const NodeId to = channels[e.target].to;
        const PortId to_port = channels[e.target].to_port;
        // The queue hands over its own copy (the node may rewrite it) and lets the callback's
        // sends enqueue on this same channel (a node's port wired to its own other port).
        const std::size_t released = channels[e.target].queue.release(
            now,
            [&](std::span<std::uint8_t> packet) { nodes[to].node->on_packet(to_port, packet, now, *nodes[to].sink); },
            1);
        assert(released == 1);
        (void)released;
        rearm(to);
        break;
      }
      case EventKind::kTimer: {
        NodeState& n = nodes[e.target];
        if (e.token == n.timer_generation) n.armed_timer = kNever;  // the armed event fired
        // A stale event (its deadline moved) only acts if the node is due anyway.
        const bool due = n.node->next_deadline() <= now;
        if (due) n.node->on_timeout(now, *n.sink);
        rearm(e.target, /*after_timeout=*/due);
        break;
      }
      case EventKind::kScripted: {
        std::function<void(Time)> action = std::move(scripted[e.target]);
        scripted[e.target] = nullptr;
        free_scripted.push_back(e.target);
        action(now);
        // Scripted actions usually poke nodes (start a round, crash a host): re-read every
        // deadline so that a forgotten wake() cannot lose a timer.
        for (NodeId id = 0; id < nodes.size(); ++id) rearm(id);
        break;
      }
      case EventKind::kEgressFull: {
        NodeState& n = nodes[e.target];
        n.egress_full_pending = false;
        n.node->on_egress_full(now);
        rearm(e.target);
        break;
      }
      case EventKind::kNextInTurn: {
        Channel& c = channels[e.target];
        c.next_in_turn_pending = false;
        std::vector<std::uint8_t> packet = c.waiting.pop();
        // Admitted on arrival: the buffer and the ECN threshold do not apply a second time.
        c.queue.config() = c.config;
        c.queue.config().buffer_packets = 0;
        c.queue.config().buffer_bytes = 0;
        c.queue.config().ecn_threshold_packets = 0;
        enqueue(e.target, packet);
        if (!c.waiting.empty()) {
          c.next_in_turn_pending = true;
          push(to_ns(std::max(now, c.queue.transmitter_free_at())), EventKind::kNextInTurn, e.target, 0);
        }
        break;
      }
    }
  }

  std::uint64_t seed;
  Time now{};
  std::vector<NodeState> nodes;
  std::vector<Channel> channels;
  std::priority_queue<Event, std::vector<Event>, LaterFirst> heap;
  std::uint64_t next_order = 0;
  std::vector<std::function<void(Time)>> scripted;  // pending scripted actions
  std::vector<std::uint32_t> free_scripted;
  std::uint64_t events_processed = 0;
  std::uint64_t unconnected_drops = 0;
};

Network::Network(std::uint64_t seed, std::uint32_t mtu_bytes)
    : impl_(std::make_unique<Impl>(seed)), mtu_bytes_(mtu_bytes) {}
Network::~Network() = default;

NodeId Network::add_node(std::string name, std::unique_ptr<Node> node) {
  if (!node) throw std::invalid_argument("add_node(" + name + "): node is null");
  const auto id = static_cast<NodeId>(impl_->nodes.size());
  Impl::NodeState state;
  state.name = std::move(name);
  state.node = std::move(node);
  state.sink = std::make_unique<Impl::NodeSink>(impl_.get(), id);
  impl_->nodes.push_back(std::move(state));
  impl_->rearm(id);  // a node may start with a deadline
  return id;
}

Node& Network::node(NodeId id) { return *impl_->nodes.at(id).node; }
const std::string& Network::node_name(NodeId id) const { return impl_->nodes.at(id).name; }

std::pair<std::size_t, std::size_t> Network::connect(NodeId a, PortId port_a, NodeId b, PortId port_b,
                                                     const ChannelConfig& a_to_b, const ChannelConfig& b_to_a) {
  Impl& net = *impl_;
  if (a >= net.nodes.size() || b >= net.nodes.size()) throw std::out_of_range("connect(): unknown node id");
  for (const auto& [id, port] : {std::pair{a, port_a}, std::pair{b, port_b}}) {
    const auto& ports = net.nodes[id].channel_by_port;
    if (port < ports.size() && ports[port] != kNoChannel) {
      throw std::invalid_argument("connect(): port " + std::to_string(port) + " of node '" + net.nodes[id].name +
                                  "' is already connected");
    }
  }
  if (a == b && port_a == port_b) throw std::invalid_argument("connect(): a port cannot be connected to itself");
  auto add_channel = [&](NodeId from, PortId from_port, NodeId to, PortId to_port, const ChannelConfig& config) {
    const std::size_t id = net.channels.size();
    if (id >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
      throw std::length_error("connect(): too many channels");
    }
    Impl::Channel c;
    c.from = from;
    c.to = to;
    c.to_port = to_port;
    c.config = config;
    // Each channel has its own stream, so adding a channel or a fault elsewhere leaves it unchanged.
    c.queue = EgressQueue(config, EgressQueue::stream_seed(net.seed, id));
    net.channels.push_back(std::move(c));
    auto& ports = net.nodes[from].channel_by_port;
    if (ports.size() <= from_port) ports.resize(std::size_t{from_port} + 1, kNoChannel);
    ports[from_port] = static_cast<std::int32_t>(id);
    return id;
  };
  const std::size_t ab = add_channel(a, port_a, b, port_b, a_to_b);
  const std::size_t ba = add_channel(b, port_b, a, port_a, b_to_a);
  return {ab, ba};
}

void Network::set_channel_config(std::size_t channel, const ChannelConfig& config) {
  impl_->channels.at(channel).config = config;
}
ChannelCounters Network::channel_counters(std::size_t channel) const {
  return impl_->channels.at(channel).queue.counters();
}
std::size_t Network::channel_count() const { return impl_->channels.size(); }
NodeId Network::channel_from(std::size_t channel) const { return impl_->channels.at(channel).from; }
NodeId Network::channel_to(std::size_t channel) const { return impl_->channels.at(channel).to; }

void Network::schedule(Time t, std::function<void(Time)> f) {
  Impl& net = *impl_;
  std::uint32_t index;
  if (net.free_scripted.empty()) {
    index = static_cast<std::uint32_t>(net.scripted.size());
    net.scripted.emplace_back();
  } else {
    index = net.free_scripted.back();
    net.free_scripted.pop_back();
  }
  net.scripted[index] = std::move(f);
  net.push(to_ns(std::max(t, net.now)), EventKind::kScripted, index, 0);  // the past runs now
}

void Network::wake(NodeId node) {
  if (node >= impl_->nodes.size()) throw std::out_of_range("wake(): unknown node id");
  impl_->rearm(node);
}

PortSink& Network::sink_for(NodeId node) { return *impl_->nodes.at(node).sink; }

Time Network::now() const { return impl_->now; }

std::uint64_t Network::run_until(Time limit) {
  Impl& net = *impl_;
  const std::int64_t limit_ns = to_ns(limit);
  std::uint64_t processed = 0;
  while (!net.heap.empty() && net.heap.top().time_ns <= limit_ns) {
    const Event e = net.heap.top();
    net.heap.pop();
    net.now = time_from_ns(e.time_ns);
    net.dispatch(e);
    ++processed;
  }
  // Running "until t" leaves the clock at t, so that later sends from outside start there.
  if (limit != kNever && limit > net.now) net.now = limit;
  net.events_processed += processed;
  return processed;
}

std::uint64_t Network::events_processed() const { return impl_->events_processed; }
std::uint64_t Network::unconnected_drops() const { return impl_->unconnected_drops; }

}  // namespace atp::inproc
