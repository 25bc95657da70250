// The switch's UDP ports: ATP packets in UDP datagrams on one socket, a port per peer (a host
// process or another switch), peers attached and detached at run time by POST and DELETE /hosts.
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "atp/io/socket_batch.h"
#include "switch_ports.h"

namespace atp::detail {
namespace {

// A UDP peer (address and port) as one number, the key of the ports by peer.
std::uint64_t peer_key(const SocketAddress& e) { return (std::uint64_t{e.ip} << 16) | e.port; }

class UdpPorts final : public SwitchPorts {
 public:
  // Every peer is a UDP socket (a host process or another switch's UDP ports): runs of datagrams
  // to one peer go out, and come in, as one message. `shared`: one of several sockets on `listen`.
  UdpPorts(const SwitchDaemonConfig& config, const SocketAddress& listen, bool shared)
      : socket_(listen, {.reuse_port = shared, .segmentation_offload = true}) {
    for (std::size_t i = 0; i < config.ports.size(); ++i) {
      port_by_peer_.emplace(peer_key(config.ports[i].peer), static_cast<PortId>(i));
      peers_.emplace_back(config.ports[i].peer);
    }
  }

  std::vector<int> fds() const override { return {socket_.fd()}; }

  Burst receive_burst(std::size_t /*source: the one socket*/) override {
    const std::size_t n = socket_.recv_batch(batch_);
    received_.clear();
    for (std::size_t i = 0; i < n; ++i) {
      auto it = port_by_peer_.find(peer_key(batch_.from(i)));
      if (it == port_by_peer_.end()) {
        ++unknown_source_;
        continue;
      }
      received_.push_back({it->second, batch_.bytes(i)});
    }
    return {n, batch_.full(), received_};
  }

  void on_arrival(PortId, std::span<const std::uint8_t>) override {}

  // Every datagram is an ATP packet for the pipeline (which drops and counts malformed ones).
  Destination destination(PortId, std::span<std::uint8_t> received) override {
    return {Destination::Kind::kPipeline, received};
  }

  Framing framing() const override { return Framing::kAtp; }

  bool attached(PortId port) const override { return port < peers_.size() && peers_[port]; }

  std::optional<std::span<const std::uint8_t>> encapsulate(PortId, std::span<const std::uint8_t> packet) override {
    return packet;
  }

  // All ports' packets in one sendmmsg batch.
  std::uint64_t send(std::span<const Outgoing> packets) override {
    tx_.resize(packets.size());
    for (std::size_t i = 0; i < packets.size(); ++i) {
      // A detached port's queue is empty (reset, and the sink drops sends to it): its peer is set.
      tx_[i] = {*peers_[packets[i].port], packets[i].bytes};
    }
    return packets.size() - socket_.send_batch(tx_);
  }

  SwitchPortsCounters counters() const override {
    SwitchPortsCounters c;
    c.unknown_source = unknown_source_;
    c.truncated = socket_.counters().truncated;
    return c;
  }

  void describe(control::SwitchStats& stats) const override {
    stats.data = socket_.local_endpoint();
    for (control::SwitchPortStats& row : stats.ports) row.peer = peers_[row.port];
  }

  std::uint64_t kernel_drops(PortId) const override { return 0; }

  bool supports_hosts() const override { return true; }

  SocketAddress data_endpoint() const override { return socket_.local_endpoint(); }
  int fd() const { return socket_.fd(); }

  std::optional<PortId> port_of(const SocketAddress& peer) const override {
    const auto it = port_by_peer_.find(peer_key(peer));
    if (it == port_by_peer_.end()) return std::nullopt;
    return it->second;
  }

  void attach(PortId port, const SocketAddress& peer) override {
    if (peers_.size() <= port) peers_.resize(port + std::size_t{1});
    peers_[port] = peer;
    port_by_peer_[peer_key(peer)] = port;
  }

  void detach(PortId port) override {
    port_by_peer_.erase(peer_key(*peers_[port]));
    peers_[port].reset();
  }

 private:
  UdpSocket socket_;  // the one data socket, bound to config.listen
  UdpRecvBatch batch_;
  std::vector<Received> received_;  // receive_burst()'s datagrams from a port, reused
  std::vector<UdpOutgoing> tx_;     // send()'s batch, reused
  // Port i's peer (from the config or POST /hosts); nullopt once DELETE /hosts detached it.
  std::vector<std::optional<SocketAddress>> peers_;
  std::unordered_map<std::uint64_t, PortId> port_by_peer_;  // peer_key(peer) -> port, attached ports only
  std::uint64_t unknown_source_ = 0;                        // datagrams from an address that is no port's peer: dropped
};

}  // namespace

std::vector<std::unique_ptr<SwitchPorts>> open_udp_ports(const SwitchDaemonConfig& config, std::uint32_t threads) {
  std::vector<std::unique_ptr<SwitchPorts>> sets;
  auto first = std::make_unique<UdpPorts>(config, config.listen, threads > 1);
  const SocketAddress bound = first->data_endpoint();  // config.listen with the kernel's port
  const int group = first->fd();
  sets.push_back(std::move(first));
  for (std::uint32_t k = 1; k < threads; ++k) sets.push_back(std::make_unique<UdpPorts>(config, bound, true));
  const std::uint32_t aggregators = config.pipeline.atp_capable ? config.pipeline.num_aggregators : 0;
  if (threads > 1 && aggregators > 0) {
    // The group's k-th socket (in order of binding) is thread k's: A = the header's aggregator
    // index (a big-endian load, from the UDP payload's start), then slice_of(A). A datagram too
    // short to hold it ends the filter with 0: thread 0, whose pipeline counts it malformed.
    std::vector<sock_filter> code = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<std::uint32_t>(kAggregatorIndexOffset)),
    };
    append_slice_of(code, aggregators, threads);
    const sock_fprog program{static_cast<unsigned short>(code.size()), code.data()};
    if (::setsockopt(group, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof program) != 0) {
      const int error = errno;
      throw UdpSetupError("cannot steer the datagrams of UDP " + bound.to_string() + " over " +
                              std::to_string(threads) +
                              " dataplane threads (SO_ATTACH_REUSEPORT_CBPF): " + errno_reason(error),
                          error);
    }
  }
  return sets;
}

}  // namespace atp::detail
