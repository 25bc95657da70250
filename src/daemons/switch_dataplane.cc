// The switch daemon's dataplane threads, and the control plane's changes made on all of them.
#include "switch_dataplane.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

namespace atp::detail {
namespace {

// b's counters added to a's, field by field.
void add(EgressCounters& a, const EgressCounters& b) {
  a.packets += b.packets;
  a.bytes += b.bytes;
  a.lost += b.lost;
  a.queue_drops += b.queue_drops;
  a.duplicated += b.duplicated;
  a.reordered += b.reordered;
  a.ecn_marked += b.ecn_marked;
  a.depth = std::max(a.depth, b.depth);  // a shared transmitter's depth is the link's, in every queue
}

// Shard s's counters, copied on its thread.
SwitchDataplane::Totals counters_of(const SwitchShard& s) {
  SwitchDataplane::Totals t;
  t.pipeline = s.pipeline().counters();
  t.aggregators_in_use = s.pipeline().table().in_use();
  for (const auto& [job, counters] : s.pipeline().all_job_counters()) t.jobs[job] = counters;
  for (std::size_t p = 0; p < s.port_count(); ++p) {
    const auto port = static_cast<PortId>(p);
    t.egress.push_back(s.egress(port).counters());
    t.ingress.push_back(s.ingress(port) ? s.ingress(port)->counters() : EgressCounters{});
    t.rx.push_back(s.port_counters(port));
    t.kernel_drops.push_back(s.ports().kernel_drops(port));
  }
  t.ports = s.ports().counters();
  t.no_port = s.no_port();
  t.send_failed = s.send_failed();
  t.threads.push_back({s.pipeline().counters().packets, s.handed_off(), s.handoff_drops()});
  return t;
}

// Adds shard b's counters to a's (the first shard's, or a sum). The tables of interface ports
// (MAC addresses, neighbors) are the first shard's: it does all Ethernet switching, and the
// neighbors are shared.
void add(SwitchDataplane::Totals& a, const SwitchDataplane::Totals& b) {
  a.pipeline += b.pipeline;
  a.aggregators_in_use += b.aggregators_in_use;
  for (const auto& [job, counters] : b.jobs) a.jobs[job] += counters;
  for (std::size_t p = 0; p < a.egress.size() && p < b.egress.size(); ++p) {
    add(a.egress[p], b.egress[p]);
    add(a.ingress[p], b.ingress[p]);
    a.rx[p].rx_packets += b.rx[p].rx_packets;
    a.rx[p].rx_bytes += b.rx[p].rx_bytes;
    a.kernel_drops[p] += b.kernel_drops[p];
  }
  a.ports.unknown_source += b.ports.unknown_source;
  a.ports.truncated += b.ports.truncated;
  a.ports.ethernet += b.ports.ethernet;
  a.no_port += b.no_port;
  a.send_failed += b.send_failed;
  a.threads.insert(a.threads.end(), b.threads.begin(), b.threads.end());
}

// The dataplane threads `config` (passed check_limits) runs: config.threads, or when 0 a quarter
// of the machine's cores, from 1 to 4, lowered to a divisor of the aggregators.
std::uint32_t dataplane_threads(const SwitchDaemonConfig& config) {
  if (config.threads != 0) return config.threads;
  std::uint32_t threads = std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u);
  while (config.pipeline.atp_capable && config.pipeline.num_aggregators % threads != 0) --threads;
  return threads;
}

}  // namespace

SwitchDataplane::SwitchDataplane(const SwitchDaemonConfig& config) {
  const std::uint32_t threads = dataplane_threads(config);
  for (std::size_t p = 0; p < config.ports.size(); ++p) links_.push_back(new_link(threads));
  std::vector<std::unique_ptr<SwitchPorts>> udp;
  if (!config.interface_ports()) udp = open_udp_ports(config, threads);
  for (std::uint32_t k = 0; k < threads; ++k) {
    const auto open_ports = [&](const Routes& routes) {
      return config.interface_ports() ? open_ethernet_ports(config, routes, k, threads, interfaces_)
                                      : std::move(udp[k]);
    };
    shards_.push_back(std::make_unique<SwitchShard>(config, TableSlice{k, threads}, open_ports, links_));
  }
  std::vector<ShardInbox*> inboxes;
  for (const auto& shard : shards_) inboxes.push_back(&shard->inbox());
  for (const auto& shard : shards_) shard->connect(inboxes);
}

SwitchDataplane::~SwitchDataplane() { stop(); }

void SwitchDataplane::start(std::function<Time()> control_deadline, std::function<void(Time)> on_control_deadline) {
  if (!threads_.empty()) return;
  SwitchShard& first = *shards_.front();
  first.loop().set_timer([&first, control_deadline] { return std::min(first.next_deadline(), control_deadline()); },
                         [&first, on_control_deadline](Time now) {
                           on_control_deadline(now);
                           first.on_deadline(now);
                         });
  for (std::size_t k = 1; k < shards_.size(); ++k) {
    SwitchShard& shard = *shards_[k];
    shard.loop().set_timer([&shard] { return shard.next_deadline(); }, [&shard](Time now) { shard.on_deadline(now); });
  }
  for (const auto& shard : shards_) {
    shard->tasks().loop_started();
    threads_.emplace_back([s = shard.get()] { s->loop().run(); });
  }
}

void SwitchDataplane::stop() {
  if (threads_.empty()) return;
  for (std::size_t k = 0; k < shards_.size(); ++k) {
    shards_[k]->loop().stop();
    threads_[k].join();
    shards_[k]->tasks().loop_ended();
  }
  threads_.clear();
}

double SwitchDataplane::cpu_seconds() {
  double total = 0;
  for (std::thread& t : threads_) total += thread_cpu_seconds(t).value_or(0);
  return total;
}

std::optional<EgressConfig> SwitchDataplane::ingress_config(PortId port) const {
  const std::optional<EgressQueue>& q = shards_.front()->ingress(port);
  if (!q) return std::nullopt;
  return q->config();
}

SwitchShard::PortLink SwitchDataplane::new_link(std::uint32_t threads) {
  if (threads == 1) return {};
  return {std::make_shared<SharedTransmitter>(), std::make_shared<SharedTransmitter>()};
}

void SwitchDataplane::on_every_shard(const std::function<void(SwitchShard&)>& fn) {
  for (std::size_t k = 1; k < shards_.size(); ++k) {
    shards_[k]->tasks().run([fn, shard = shards_[k].get()] { fn(*shard); }, std::chrono::seconds(1),
                            "dataplane thread " + std::to_string(k));
  }
  fn(*shards_.front());
}

SwitchDataplane::Totals SwitchDataplane::totals() {
  Totals t = counters_of(*shards_.front());
  for (std::size_t k = 1; k < shards_.size(); ++k) {
    add(t, shards_[k]->tasks().run([shard = shards_[k].get()] { return counters_of(*shard); }, std::chrono::seconds(1),
                                   "dataplane thread " + std::to_string(k)));
  }
  return t;
}

void SwitchDataplane::install_job(const SwitchJobEntry& entry, Address group, const std::vector<PortId>& group_ports) {
  on_every_shard([entry, group, group_ports](SwitchShard& s) {
    s.pipeline().install_job(entry);
    s.pipeline().add_multicast_group(group, group_ports);
  });
}

void SwitchDataplane::remove_job(JobId job, Address group) {
  on_every_shard([job, group](SwitchShard& s) {
    s.pipeline().remove_multicast_group(group);
    s.pipeline().remove_job(job);
  });
}

void SwitchDataplane::set_egress(PortId port, const EgressConfig& settings) {
  on_every_shard([port, settings](SwitchShard& s) { s.set_egress(port, settings); });
}

void SwitchDataplane::set_ingress(PortId port, const EgressConfig& settings) {
  on_every_shard([port, settings, link = links_[port]](SwitchShard& s) { s.set_ingress(port, settings, link); });
}

void SwitchDataplane::reset_port(PortId port) {
  links_[port] = new_link(threads());
  on_every_shard([port, link = links_[port]](SwitchShard& s) { s.reset_port(port, link); });
}

PortId SwitchDataplane::add_port() {
  links_.push_back(new_link(threads()));
  const auto port = static_cast<PortId>(port_count());
  on_every_shard([link = links_.back()](SwitchShard& s) { s.add_port(link); });
  return port;
}

void SwitchDataplane::add_route(Address dst, PortId port) {
  on_every_shard([dst, port](SwitchShard& s) { s.add_route(dst, port); });
}

void SwitchDataplane::remove_route(Address dst) {
  on_every_shard([dst](SwitchShard& s) { s.remove_route(dst); });
}

void SwitchDataplane::remove_routes_to(PortId port) {
  on_every_shard([port](SwitchShard& s) { s.remove_routes_to(port); });
}

void SwitchDataplane::attach(PortId port, const SocketAddress& peer) {
  on_every_shard([port, peer](SwitchShard& s) { s.ports().attach(port, peer); });
}

void SwitchDataplane::detach(PortId port) {
  on_every_shard([port](SwitchShard& s) { s.ports().detach(port); });
}

}  // namespace atp::detail
