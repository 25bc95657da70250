// The network of `atp run --backend netns`: one Linux network namespace per host and per switch,
// veth pairs as links, host addresses = the plan's overlay addresses, host NIC rates with tc tbf.
// Everything it creates is named after the run's pid and removed on every way out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atp/io/egress_queue.h"
#include "atp/io/netns.h"
#include "atp/plan/plan.h"

namespace atp::netns {

// Interface names inside the namespaces (each namespace has its own, so they are short and fixed).
inline constexpr const char* kHostInterface = "eth0";
inline std::string switch_interface(PortId port) { return "p" + std::to_string(port); }
// The namespaces and links of one planned network. Per namespace: loopback up, IPv6 off (no
// router or neighbour discovery chatter on the links), every veth up with the plan's MTU (NetworkPlan::mtu_bytes) and
// with checksum and segmentation offloads off (a software switch reading raw frames must see real frames with real
// checksums, not 64 KiB super-frames); per host: its overlay address as 10.x.y.z/8 on eth0, a route for multicast (the
// job's parameter packets) out of eth0, reverse path filtering off. Hosts have no default route: nothing leaves the
// testbed.
class Testbed {
 public:
  // Throws std::runtime_error naming the command that failed (after removing what it built) and
  // for node names that cannot name a namespace (letters, digits, '.', '_', '-' only).
  explicit Testbed(const NetworkPlan& network);
  ~Testbed();  // removes every namespace it created, and with them every veth
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  std::string namespace_name(const std::string& node) const { return prefix_ + node; }
  std::string namespace_path(const std::string& node) const { return "/var/run/netns/" + namespace_name(node); }
  const std::string& prefix() const { return prefix_; }  // "atp<pid>-"

  // The host NIC's rate (the host -> switch direction of its link): tc tbf on the host's eth0;
  // rate_gbps 0 removes the limit. Throws std::runtime_error naming the command that failed.
  void set_host_rate(const std::string& host, double rate_gbps);

  // What a host's own network stack dropped, which no switch sees: its NIC queue (tc tbf) when
  // full, and UDP datagrams its sockets had no buffer room for. Zeros if it cannot be read.
  struct HostDrops {
    std::uint64_t nic_queue = 0;       // packets the host's tbf dropped (its link's sending queue)
    std::uint64_t socket_buffers = 0;  // UDP RcvbufErrors: arrived, but the socket was full
  };
  HostDrops host_drops(const std::string& host) const;

 private:
  void remove_all() noexcept;

  std::string prefix_;
  std::vector<std::string> created_;  // namespace names, in creation order
};

}  // namespace atp::netns
