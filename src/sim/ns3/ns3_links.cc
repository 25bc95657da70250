// The ns-3 adapter's links (ns3_network.h): a point-to-point link per pair of ports, a channel per
// direction with its counters from the devices' traces, and each node's side of its device.
#include "ns3_impl.h"

namespace atp::ns3adapter {

std::pair<std::size_t, std::size_t> Ns3Network::connect(sim::NodeId a, PortId port_a, sim::NodeId b, PortId port_b,
                                                        const sim::ChannelConfig& a_to_b,
                                                        const sim::ChannelConfig& b_to_a) {
  Impl& net = *impl_;
  if (a >= net.nodes.size() || b >= net.nodes.size()) throw std::out_of_range("connect(): unknown node id");
  if (a_to_b.delay != b_to_a.delay) {
    throw std::invalid_argument("the ns3 backend's links have one delay for both directions (link " +
                                net.nodes[a].name + " - " + net.nodes[b].name + ")");
  }
  for (const auto& [id, port] : {std::pair{a, port_a}, std::pair{b, port_b}}) {
    const auto& ports = net.nodes[id].channel_by_port;
    if (port < ports.size() && ports[port] != kNoChannel) {
      throw std::invalid_argument("connect(): port " + std::to_string(port) + " of node '" + net.nodes[id].name +
                                  "' is already connected");
    }
    if (net.nodes[id].is_host && port != 0) throw std::invalid_argument("connect(): a host has only port 0");
  }
  ns3::PointToPointHelper p2p;
  p2p.SetDeviceAttribute("Mtu", ns3::UintegerValue(net.mtu_bytes));
  p2p.SetQueue("ns3::DropTailQueue<Packet>");
  const ns3::NetDeviceContainer devices = p2p.Install(net.nodes[a].ns3, net.nodes[b].ns3);
  const auto link = ns3::DynamicCast<ns3::PointToPointChannel>(devices.Get(0)->GetChannel());

  const std::size_t ab = net.add_channel(a, port_a, devices.Get(0), b, devices.Get(1), link, a_to_b);
  const std::size_t ba = net.add_channel(b, port_b, devices.Get(1), a, devices.Get(0), link, b_to_a);

  net.attach_device(a, port_a, devices.Get(0));
  net.attach_device(b, port_b, devices.Get(1));
  return {ab, ba};
}

std::size_t Ns3Network::Impl::add_channel(NodeId from, PortId from_port, ns3::Ptr<ns3::NetDevice> tx, NodeId to,
                                          ns3::Ptr<ns3::NetDevice> rx, ns3::Ptr<ns3::PointToPointChannel> link,
                                          const sim::ChannelConfig& config) {
  const std::size_t cid = channels.size();
  Channel c;
  c.from = from;
  c.to = to;
  c.tx = ns3::DynamicCast<ns3::PointToPointNetDevice>(tx);
  c.rx = ns3::DynamicCast<ns3::PointToPointNetDevice>(rx);
  c.link = link;
  c.loss = ns3::CreateObject<ns3::RateErrorModel>();
  c.loss->SetUnit(ns3::RateErrorModel::ERROR_UNIT_PACKET);
  c.loss->AssignStreams(static_cast<std::int64_t>(cid));  // one stream per channel: same seed, same losses
  c.rng.seed(EgressQueue::stream_seed(seed, cid));
  c.rx->SetReceiveErrorModel(c.loss);
  apply(c, config, /*initial=*/true);
  channels.push_back(std::move(c));
  // Counters and the transmitter's state from the device's traces.
  Impl* impl = this;
  connect_trace(tx, "PhyTxBegin",
                ns3::Callback<void, ns3::Ptr<const ns3::Packet>>([impl, cid](ns3::Ptr<const ns3::Packet> p) {
                  Channel& ch = impl->channels[cid];
                  ch.transmitting = true;
                  ch.transmitting_bytes = p->GetSize();
                  ch.transmit_end = ns3::Simulator::Now() + ch.tx_time(p->GetSize());
                }));
  connect_trace(tx, "PhyTxEnd",
                ns3::Callback<void, ns3::Ptr<const ns3::Packet>>([impl, cid](ns3::Ptr<const ns3::Packet> p) {
                  Channel& ch = impl->channels[cid];
                  ch.transmitting = false;
                  ++ch.counters.packets;
                  ch.counters.bytes += p->GetSize();
                  impl->device_done(cid);
                }));
  connect_trace(channels[cid].tx->GetQueue(), "Drop",
                ns3::Callback<void, ns3::Ptr<const ns3::Packet>>(
                    [impl, cid](ns3::Ptr<const ns3::Packet>) { impl->egress_refused(cid); }));
  connect_trace(rx, "PhyRxDrop",
                ns3::Callback<void, ns3::Ptr<const ns3::Packet>>(
                    [impl, cid](ns3::Ptr<const ns3::Packet>) { ++impl->channels[cid].counters.lost; }));
  auto& ports = nodes[from].channel_by_port;
  if (ports.size() <= from_port) ports.resize(std::size_t{from_port} + 1, kNoChannel);
  ports[from_port] = static_cast<std::int32_t>(cid);
  return cid;
}

void Ns3Network::Impl::attach_device(NodeId id, PortId port, ns3::Ptr<ns3::NetDevice> device) {
  NodeState& n = nodes[id];
  if (n.is_host) {
    // Added by hand, not by Ipv4AddressHelper, which would also install a queue disc: the
    // host's egress queue is the adapter's fair queue and the device queue, as on the other
    // backends.
    const auto ipv4 = n.ns3->GetObject<ns3::Ipv4>();
    const std::int32_t ifindex = static_cast<std::int32_t>(ipv4->AddInterface(device));
    ipv4->AddAddress(ifindex, ns3::Ipv4InterfaceAddress(ns3::Ipv4Address(n.address), ns3::Ipv4Mask("255.0.0.0")));
    ipv4->SetUp(ifindex);
    // Hosts reach every address through their one link: 10.0.0.0/8 comes with the address;
    // multicast (parameter packets from a PS) and anything else take the default route.
    ns3::Ipv4StaticRoutingHelper routing;
    routing.GetStaticRouting(ipv4)->SetDefaultRoute(ns3::Ipv4Address::GetAny(), ifindex);
    // Parameter packets go to 224.0.0.<job>, link-local multicast, which ns-3 only sends from a
    // socket that names its device.
    n.socket->BindToNetDevice(device);
    // With no queue disc, ns-3's traffic control layer drops what the full device queue refuses
    // (the device stops its queue first): those are this host's egress queue drops.
    const std::size_t egress = static_cast<std::size_t>(n.channel_by_port[0]);
    Impl* impl = this;
    connect_trace(n.ns3->GetObject<ns3::TrafficControlLayer>(), "TcDrop",
                  ns3::Callback<void, ns3::Ptr<const ns3::Packet>>(
                      [impl, egress](ns3::Ptr<const ns3::Packet>) { impl->egress_refused(egress); }));
  } else {
    Impl* impl = this;
    n.ns3->RegisterProtocolHandler(
        ns3::Callback<void, ns3::Ptr<ns3::NetDevice>, ns3::Ptr<const ns3::Packet>, std::uint16_t, const ns3::Address&,
                      const ns3::Address&, ns3::NetDevice::PacketType>(
            [impl, id, port](ns3::Ptr<ns3::NetDevice>, ns3::Ptr<const ns3::Packet> packet, std::uint16_t protocol,
                             const ns3::Address&, const ns3::Address&, ns3::NetDevice::PacketType) {
              if (protocol == kIpv4Protocol) impl->switch_receive(id, port, packet);
            }),
        kIpv4Protocol, device);
  }
}

}  // namespace atp::ns3adapter
