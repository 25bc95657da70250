// The two placements of the process backends (placement.h): loopback and network namespaces.
#include "placement.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <stdexcept>

#include "atp/cluster/daemon_processes.h"
#include "testbed.h"

namespace atp {
namespace {

// The TCP port of the ring and gloo collectives in namespaces (each host has its own address).
constexpr std::uint16_t kTcpCollectivePort = 9800;

// The first port of the kernel's ephemeral range (ip_local_port_range), from which connect() and
// bind(0) take ports; Linux's default if it cannot be read.
int first_ephemeral_port() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  range >> low;
  return low;
}

// A free TCP port on 127.0.0.1 for a worker to listen on later, kept bound (fd in `held`) so that
// the next call picks another. Below the ephemeral range where there is room (10000 up to it):
// between this pick and the worker's listen, any connect() on the machine (a collective's
// connections, another test's) takes a source port from that range, and one did take a port
// picked there ("Address already in use" in CI). Inside the range only where there is no room.
SocketAddress free_tcp_port(std::vector<int>& held) {
  constexpr int kFirst = 10000;
  const int below = first_ephemeral_port();
  const int room = below - kFirst;
  // A random start: every call starts afresh (`held` is closed in between), and from one place
  // each would pick the ports it just gave an earlier job's workers.
  const int start = room > 0 ? static_cast<int>(std::random_device{}() % static_cast<unsigned>(room)) : 0;
  for (int tried = 0; tried <= std::max(room, 0); ++tried) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    // The last try (or the only one, without room): port 0, the kernel's pick.
    const int port = tried < room ? kFirst + (start + tried) % room : 0;
    sockaddr_in a = to_sockaddr(SocketAddress::loopback(static_cast<std::uint16_t>(port)));
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      held.push_back(fd);
      return from_sockaddr(a);
    }
    ::close(fd);
  }
  throw std::runtime_error("cannot find a free TCP port on 127.0.0.1");
}

// Every process on this host's 127.0.0.1: each node has a UDP data address, every switch port
// is a UDP peer, hosts send to their ToR's address.
class LoopbackPlacement final : public Placement {
 public:
  std::string_view backend() const override { return "loopback"; }
  std::string temp_prefix() const override { return "atp-udp"; }
  std::uint32_t mtu(const Scenario&) const override { return path_mtu(SocketAddress::loopback(kUdpPort)); }

  // Data ports are picked before anything starts: a switch's config lists its peers' addresses
  // and its peers (hosts, and other switches across switch links) need its address, a cycle
  // that "start and read the printed port" cannot break. All sockets are held until every port
  // is picked, so the ports are distinct; the kernel hands out ephemeral ports in random order,
  // so the short window before the children bind them again is very unlikely to be hit (a
  // child that cannot bind fails loudly). Noise hosts keep their socket: this process sends
  // their packets.
  void prepare(const Scenario& scenario, const NetworkPlan&) override {
    std::vector<UdpSocket> held;
    auto pick = [&](const std::string& node) {
      held.emplace_back(SocketAddress::loopback(0));
      data_[node] = held.back().local_endpoint();
    };
    for (const auto& sw : scenario.topology.switches) pick(sw.name);
    for (const auto& h : scenario.topology.hosts) {
      pick(h.name);
      tor_[h.name] = h.switch_name;
    }
    for (const NoiseSource& n : scenario.noise) {
      for (UdpSocket& socket : held) {
        if (socket.local_endpoint() == data_[n.host]) noise_sockets_.emplace(n.host, std::move(socket));
      }
    }
  }

  std::string namespace_of(const std::string&) const override { return ""; }
  std::optional<SocketAddress> switch_listen(const std::string& name) const override { return data_.at(name); }
  PortEndpoint port_endpoint(PortId, const std::string& peer) const override { return {data_.at(peer), ""}; }
  EgressConfig host_ingress(EgressConfig direction) const override { return direction; }

  PsProcessOptions ps_options(const std::string& host) const override {
    PsProcessOptions options;
    options.listen = data_.at(host);
    options.uplink = data_.at(tor_.at(host));
    return options;
  }
  void place_worker(const std::string& host, worker_process::WorkerSpec& spec) const override {
    spec.local = data_.at(host);
    spec.uplink = data_.at(tor_.at(host));
  }
  // Free ports picked now (the same short window as prepare's).
  std::vector<SocketAddress> tcp_ranks(const std::vector<std::string>& hosts) override {
    std::vector<SocketAddress> ranks;
    std::vector<int> held;
    for (std::size_t i = 0; i < hosts.size(); ++i) ranks.push_back(free_tcp_port(held));
    for (int fd : held) ::close(fd);
    return ranks;
  }
  SocketAddress noise_destination(const std::string& host) const override { return data_.at(tor_.at(host)); }

 private:
  std::map<std::string, SocketAddress> data_;  // node -> its data address (UDP peer)
  std::map<std::string, std::string> tor_;     // host -> its switch
};

// A network namespace per node and veth links (testbed.h): switches run on the interfaces as
// Ethernet switches, hosts address each other by IP, each host's NIC paces its link.
class NamespacePlacement final : public Placement {
 public:
  std::string_view backend() const override { return "netns"; }
  std::string temp_prefix() const override { return "atp-netns"; }
  std::uint32_t mtu(const Scenario& s) const override { return s.mtu_bytes; }

  void prepare(const Scenario& scenario, const NetworkPlan& network) override {
    scenario_ = &scenario;
    network_ = &network;
    netns::remove_stale();
    testbed_.emplace(network);
    set_host_rates(Duration::zero());
    // A noise host's socket lives in its namespace, bound to its address.
    for (const NoiseSource& n : scenario.noise) {
      netns::ThreadInNamespace in(testbed_->namespace_path(n.host));
      noise_sockets_.emplace(n.host, UdpSocket({network.host_address.at(n.host), 0}));
    }
  }

  std::string namespace_of(const std::string& node) const override { return testbed_->namespace_path(node); }
  std::optional<SocketAddress> switch_listen(const std::string&) const override { return std::nullopt; }
  PortEndpoint port_endpoint(PortId port, const std::string&) const override {
    return {std::nullopt, netns::switch_interface(port)};
  }
  EgressConfig host_ingress(EgressConfig direction) const override {
    direction.rate_gbps = 0;  // the host's own NIC (tc tbf in its namespace) already paces it
    return direction;
  }

  // Receives on its host's address, sends to each packet's destination IP.
  PsProcessOptions ps_options(const std::string& host) const override {
    PsProcessOptions options;
    options.listen = {network_->host_address.at(host), kUdpPort};
    return options;
  }
  // 0.0.0.0: it receives its job's multicast parameter packets and the PS's unicast answers to
  // its resends. A PS on the same host binds the host's address.
  void place_worker(const std::string&, worker_process::WorkerSpec& spec) const override { spec.local = {0, kUdpPort}; }
  // Each host's own address at a fixed port.
  std::vector<SocketAddress> tcp_ranks(const std::vector<std::string>& hosts) override {
    std::vector<SocketAddress> ranks;
    for (const std::string& host : hosts) ranks.push_back({network_->host_address.at(host), kTcpCollectivePort});
    return ranks;
  }
  // The first PS's address (any address behind the switch would do: the switch routes ATP
  // packets by their header, and its checks must stop every one).
  SocketAddress noise_destination(const std::string& host) const override {
    for (const ScenarioJob& j : scenario_->jobs) {
      if (!j.spec.ps.empty()) return {network_->host_address.at(j.spec.ps.front()), kUdpPort};
    }
    return {network_->host_address.at(host) + 1, kUdpPort};
  }

  void set_host_rates(Duration t) override {
    for (const auto& h : scenario_->topology.hosts) {
      testbed_->set_host_rate(h.name, direction_settings(*scenario_, h.name, h.switch_name, t).rate_gbps);
    }
  }
  // Their NIC queues are the host -> switch links' sending queues.
  void add_host_drops(ScenarioResult& result) const override {
    for (const auto& h : scenario_->topology.hosts) {
      const netns::Testbed::HostDrops drops = testbed_->host_drops(h.name);
      result.host_dropped_packets += drops.socket_buffers;
      for (LinkResult& l : result.links) {
        if (l.from == h.name && l.to == h.switch_name) l.queue_drops += drops.nic_queue;
      }
    }
  }

 private:
  const Scenario* scenario_ = nullptr;
  const NetworkPlan* network_ = nullptr;
  std::optional<netns::Testbed> testbed_;
};

}  // namespace

EgressConfig direction_settings(const Scenario& s, const std::string& from, const std::string& to, Duration t) {
  const bool from_host = std::none_of(s.topology.switches.begin(), s.topology.switches.end(),
                                      [&](const SwitchSpec& sw) { return sw.name == from; });
  sim::ChannelConfig base = link_base(s, from_host);
  base.delay = Duration::zero();
  return link_settings(s, link_faults_of(s, from, to), t, base);
}

UdpSocket* Placement::noise_socket(const std::string& host) {
  const auto it = noise_sockets_.find(host);
  return it == noise_sockets_.end() ? nullptr : &it->second;
}

std::unique_ptr<Placement> loopback_placement() { return std::make_unique<LoopbackPlacement>(); }
std::unique_ptr<Placement> namespace_placement() { return std::make_unique<NamespacePlacement>(); }

}  // namespace atp
