// The netns testbed: namespaces and veths built with `ip -batch` (iproute2, the tool made for
// it), offloads switched off with ethtool, host rates with tc tbf, TCP asking for ECN; all removed on
// every way out.
#include "testbed.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "atp/io/processes.h"

namespace atp::netns {
namespace {

// Runs a set-up command; throws naming it and quoting what it printed when it fails.
void run_or_throw(const std::vector<std::string>& args, const std::string& input = "") {
  std::string output;
  if (processes::run_command(args, input, &output) == 0) return;
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
  while (!output.empty() && output.back() == '\n') output.pop_back();
  throw std::runtime_error("`" + command + "` failed: " + (output.empty() ? "no message" : output));
}

void write_proc(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  if (!f) throw std::runtime_error("cannot write " + value + " to " + path);
}

bool valid_node_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

Testbed::Testbed(const NetworkPlan& network) : prefix_("atp" + std::to_string(::getpid()) + "-") {
  std::vector<std::string> nodes;
  for (const auto& [name, count] : network.switch_port_count) nodes.push_back(name);
  for (const auto& [name, address] : network.host_address) nodes.push_back(name);
  for (const std::string& n : nodes) {
    if (!valid_node_name(n)) {
      throw std::runtime_error("'" + n +
                               "' cannot name a network namespace: use letters, digits, '.', '_' and '-' only");
    }
  }
  try {
    std::ostringstream add;
    for (const std::string& n : nodes) add << "netns add " << namespace_name(n) << "\n";
    // Every name is this run's (its pid) before the batch runs: one that stops part way (a
    // leftover of a dead run under a reused pid) leaves the ones it made to remove_all.
    for (const std::string& n : nodes) created_.push_back(namespace_name(n));
    run_or_throw({"ip", "-batch", "-"}, add.str());
    // Before any interface exists, so that no IPv6 address or discovery packet ever appears.
    for (const std::string& n : nodes) {
      ThreadInNamespace in(namespace_path(n));
      write_proc("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
      write_proc("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
      write_proc("/proc/sys/net/ipv4/conf/all/rp_filter", "0");
      write_proc("/proc/sys/net/ipv4/conf/default/rp_filter", "0");
    }

    // Every link is a veth pair created straight into its two namespaces: nothing in ours.
    std::map<std::string, std::vector<std::string>> interfaces;  // node -> its veth ends
    auto end_name = [&](const PortRef& end) {
      return network.host_address.contains(end.node) ? std::string(kHostInterface) : switch_interface(end.port);
    };
    std::ostringstream links;
    for (const PlannedLink& l : network.links) {
      const std::string a = end_name(l.a), b = end_name(l.b);
      links << "link add " << a << " netns " << namespace_name(l.a.node) << " type veth peer name " << b << " netns "
            << namespace_name(l.b.node) << "\n";
      interfaces[l.a.node].push_back(a);
      interfaces[l.b.node].push_back(b);
    }
    run_or_throw({"ip", "-batch", "-"}, links.str());

    const std::uint32_t mtu = network.mtu_bytes;
    for (const std::string& n : nodes) {
      std::ostringstream set;
      set << "link set lo up\n";
      for (const std::string& dev : interfaces[n]) set << "link set " << dev << " mtu " << mtu << " up\n";
      if (const auto it = network.host_address.find(n); it != network.host_address.end()) {
        set << "addr add " << format_address(it->second) << "/8 dev " << kHostInterface << "\n";
        set << "route add 224.0.0.0/4 dev " << kHostInterface << "\n";
      }
      run_or_throw({"ip", "-n", namespace_name(n), "-batch", "-"}, set.str());
      for (const std::string& dev : interfaces[n]) {
        run_or_throw({"ip", "netns", "exec", namespace_name(n), "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso",
                      "off", "gso", "off", "gro", "off"});
      }
      // A host's TCP asks for ECN, as in a data centre whose switches mark: past a port's threshold
      // its segments are then marked, as ATP's packets are, not dropped (a lost segment of a short
      // exchange costs Linux's 200 ms minimum RTO). A background flow sets its own (`ecn:`).
      if (network.host_address.contains(n)) {
        run_or_throw({"ip", "netns", "exec", namespace_name(n), "sh", "-c", "echo 1 > /proc/sys/net/ipv4/tcp_ecn"});
      }
    }
    // Every link carries frames before anything is started on it (wait_until_carrying says why not
    // at once).
    for (const std::string& n : nodes) wait_until_carrying(namespace_name(n));
  } catch (...) {
    remove_all();
    throw;
  }
}

Testbed::~Testbed() { remove_all(); }

void Testbed::remove_all() noexcept {
  if (created_.empty()) return;
  std::ostringstream del;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) del << "netns del " << *it << "\n";
  try {
    std::string ignored;
    // -force: go on after a namespace that is already gone.
    processes::run_command({"ip", "-force", "-batch", "-"}, del.str(), &ignored);
  } catch (...) {
  }
  created_.clear();
}

Testbed::HostDrops Testbed::host_drops(const std::string& host) const {
  HostDrops drops;
  std::string out;
  if (processes::run_command({"tc", "-n", namespace_name(host), "-s", "qdisc", "show", "dev", kHostInterface}, "",
                             &out) == 0) {
    // " Sent 123 bytes 4 pkt (dropped 5, overlimits ..." once per qdisc (one here).
    for (std::size_t at = out.find("(dropped "); at != std::string::npos; at = out.find("(dropped ", at + 1)) {
      drops.nic_queue += std::strtoull(out.c_str() + at + 9, nullptr, 10);
    }
  }
  try {
    ThreadInNamespace in(namespace_path(host));
    // This thread's namespace: /proc/net follows the process's main thread, not the caller's.
    std::ifstream snmp("/proc/thread-self/net/snmp");
    std::string header, values;
    // Two "Udp:" lines: the field names, then the values.
    for (std::string line; std::getline(snmp, line);) {
      if (line.rfind("Udp:", 0) != 0) continue;
      if (header.empty()) {
        header = line;
      } else {
        values = line;
        break;
      }
    }
    std::istringstream names(header), numbers(values);
    for (std::string name, number; names >> name && numbers >> number;) {
      if (name == "RcvbufErrors") drops.socket_buffers = std::strtoull(number.c_str(), nullptr, 10);
    }
  } catch (const std::exception&) {
  }
  return drops;
}

void Testbed::set_host_rate(const std::string& host, double rate_gbps) {
  if (rate_gbps <= 0) {
    std::string ignored;  // no qdisc to delete is fine
    processes::run_command({"tc", "-n", namespace_name(host), "qdisc", "del", "dev", kHostInterface, "root"}, "",
                           &ignored);
    return;
  }
  const auto rate_kbit = static_cast<long long>(std::llround(rate_gbps * 1e6));
  // Burst: 2 ms at the rate, at least 96 KiB, more than the largest GSO packet (64 KiB and its
  // headers): tbf keeps queued packets as they came, and when a fault lowered the rate (and with it
  // a burst of 2 ms) a queued packet larger than the new burst could never leave, so the queue, and
  // every flow of the host, stalled until the fault ended (PLink's FA, 1 run in 3, 2 s).
  // Queue: what Linux gives a NIC, txqueuelen 1000 full-size frames (60 ms at 200 Mbit/s). It is
  // the host's own queue, not the network's: with 10 ms (250 KB at 200 Mbit/s) one flow stayed
  // inside it (TCP small queues) but PLink's flat aggregation, 7 flows per host, overflowed it, and
  // a flow that lost its last segments waited for the 200 ms minimum retransmission timeout: 1 MiB
  // over 8 workers took 300 ms a round, not 115 (docs/plink.md). ATP, the ring and Gloo were
  // within 3% either way.
  constexpr long long kQueueBytes = 1000 * 1514;
  const long long burst_bytes = std::max<long long>(96 * 1024, static_cast<long long>(rate_gbps * 1e9 / 8 * 0.002));
  run_or_throw({"tc", "-n", namespace_name(host), "qdisc", "replace", "dev", kHostInterface, "root", "tbf", "rate",
                std::to_string(rate_kbit) + "kbit", "burst", std::to_string(burst_bytes), "limit",
                std::to_string(kQueueBytes)});
}

}  // namespace atp::netns
