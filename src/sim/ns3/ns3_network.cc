// The ns-3 adapter (ns3_network.h): nodes, UDP sockets on hosts, IPv4 handling on switches,
// deadlines as simulator events; its links are in ns3_links.cc, its state in ns3_impl.h.
#include "atp/sim/ns3_network.h"

#include <atomic>

#include "ns3_impl.h"

namespace atp::ns3adapter {
namespace {

std::atomic<bool> g_alive{false};  // one simulation per process

}  // namespace

Ns3Network::Ns3Network(std::uint64_t seed, std::uint32_t mtu_bytes) {
  if (mtu_bytes < kMinMtuBytes || mtu_bytes > kMaxMtuBytes) {
    throw std::invalid_argument("an ns-3 link's MTU must be " + std::to_string(kMinMtuBytes) + ".." +
                                std::to_string(kMaxMtuBytes) + " bytes, got " + std::to_string(mtu_bytes));
  }
  if (g_alive.exchange(true)) throw std::logic_error("only one ns-3 simulation can exist at a time");
  impl_ = std::make_unique<Impl>(seed, mtu_bytes);
  // ns-3 seeds must be non-zero; the run number picks the substream.
  static const bool picoseconds = [] {
    ns3::Time::SetResolution(ns3::Time::PS);
    return true;
  }();
  (void)picoseconds;
  ns3::RngSeedManager::SetSeed(static_cast<std::uint32_t>(seed % 0x7FFFFFFFu) + 1);
  ns3::RngSeedManager::SetRun(1 + seed / 0x7FFFFFFFu);
  // TCP (collectives, background flows): ns-3's CUBIC (its default, named so the docs stay true)
  // with ECN on, so that it backs off at the switches' marks as ATP does; Ethernet-sized
  // segments, buffers for 100 Gbit/s. The minimum RTO and the delayed-ACK timeout depend on the
  // scenario's link rates: tcp_apps.cc sets them on every socket (tcp_timers).
  ns3::Config::SetDefault("ns3::TcpL4Protocol::SocketType", ns3::StringValue("ns3::TcpCubic"));
  ns3::Config::SetDefault("ns3::TcpSocketBase::UseEcn", ns3::StringValue("On"));
  ns3::Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", ns3::TimeValue(ns3::MicroSeconds(10)));
  ns3::Config::SetDefault("ns3::TcpSocket::SegmentSize", ns3::UintegerValue(1448));
  ns3::Config::SetDefault("ns3::TcpSocket::SndBufSize", ns3::UintegerValue(4 << 20));
  ns3::Config::SetDefault("ns3::TcpSocket::RcvBufSize", ns3::UintegerValue(4 << 20));
  impl_->events_at_start = ns3::Simulator::GetEventCount();
}

Ns3Network::~Ns3Network() {
  ns3::Simulator::Destroy();
  g_alive = false;
}

sim::NodeId Ns3Network::add_switch(std::string name, std::unique_ptr<sim::Node> node,
                                   std::map<Address, PortId> routes) {
  const NodeId id = impl_->add(std::move(name), std::move(node));
  impl_->nodes[id].routes = std::move(routes);
  return id;
}

sim::NodeId Ns3Network::add_host(std::string name, std::unique_ptr<sim::Node> node, Address address) {
  const NodeId id = impl_->add(std::move(name), std::move(node));
  Impl::NodeState& n = impl_->nodes[id];
  n.is_host = true;
  n.address = address;
  ns3::InternetStackHelper stack;
  stack.SetIpv6StackInstall(false);
  stack.Install(n.ns3);
  n.socket = ns3::Socket::CreateSocket(n.ns3, ns3::UdpSocketFactory::GetTypeId());
  n.socket->SetAttribute("RcvBufSize", ns3::UintegerValue(64 << 20));
  if (n.socket->Bind(ns3::InetSocketAddress(ns3::Ipv4Address::GetAny(), kUdpPort)) != 0) {
    throw std::runtime_error("host '" + n.name + "': cannot bind its UDP socket");
  }
  Impl* impl = impl_.get();
  n.socket->SetRecvCallback(
      ns3::Callback<void, ns3::Ptr<ns3::Socket>>([impl, id](ns3::Ptr<ns3::Socket> s) { impl->host_receive(id, s); }));
  return id;
}

void Ns3Network::set_channel_config(std::size_t channel, const sim::ChannelConfig& config) {
  Impl::Channel& c = impl_->channels.at(channel);
  if (config.delay != c.config.delay) {
    throw std::invalid_argument("the ns3 backend cannot change a link's delay during a run");
  }
  impl_->apply(c, config, /*initial=*/false);
}

sim::ChannelCounters Ns3Network::channel_counters(std::size_t channel) const {
  const Impl::Channel& c = impl_->channels.at(channel);
  sim::ChannelCounters k = c.counters;
  k.depth = impl_->depth(c);
  return k;
}

void Ns3Network::schedule(Time t, std::function<void(Time)> f) {
  const Time current = impl_->now();
  Impl* impl = impl_.get();
  ns3::Simulator::Schedule(to_ns3(std::max(t, current) - current), [impl, f = std::move(f)] {
    f(impl->now());
    for (NodeId id = 0; id < impl->nodes.size(); ++id) impl->rearm(id);
  });
}

void Ns3Network::wake(sim::NodeId node) {
  if (node >= impl_->nodes.size()) throw std::out_of_range("wake(): unknown node id");
  impl_->rearm(node);
}

PortSink& Ns3Network::sink_for(sim::NodeId node) { return *impl_->nodes.at(node).sink; }

Time Ns3Network::now() const { return impl_->now(); }

std::uint64_t Ns3Network::run_until(Time limit) {
  const std::uint64_t before = ns3::Simulator::GetEventCount();
  if (limit != kNever) ns3::Simulator::Stop(to_ns3(std::max(limit, now()) - now()));
  ns3::Simulator::Run();
  return ns3::Simulator::GetEventCount() - before;
}

std::uint32_t Ns3Network::mtu_bytes() const { return impl_->mtu_bytes; }

std::uint64_t Ns3Network::events_processed() const { return ns3::Simulator::GetEventCount() - impl_->events_at_start; }

ns3::Ptr<ns3::Node> Ns3Network::ns3_node(sim::NodeId node) const { return impl_->nodes.at(node).ns3; }

std::uint64_t Ns3Network::link_packets() const {
  std::uint64_t n = 0;
  for (const Impl::Channel& c : impl_->channels) n += c.counters.packets;
  return n;
}

}  // namespace atp::ns3adapter
