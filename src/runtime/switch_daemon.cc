// The software ATP switch: UDP datagrams (or Ethernet frames on interface ports) in, optional
// per-port ingress EgressQueue, SwitchPipeline::process (or Ethernet switching for non-ATP frames),
// per-port egress EgressQueue, batched sends out; an HTTP control plane run on the dataplane thread.
#include "atp/runtime/switch_daemon.h"

#include <httplib.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <future>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "atp/runtime/control.h"
#include "atp/runtime/event_loop.h"
#include "switch_config.h"
#include "switch_ports.h"

namespace atp {
namespace {

using detail::kMaxPorts;
using nlohmann::json;

// ---- stats ----------------------------------------------------------------------------------

// Counters that are levels, not running totals (Prometheus gauges).
bool is_gauge(std::string_view key) {
  return key == "aggregators" || key == "aggregators_in_use" || key == "queue_depth" || key == "ingress_queue_depth" ||
         key == "installed" || key == "mac_addresses" || key == "neighbors";
}

// Prometheus text exposition of stats_json()'s document: one metric family per counter,
// labelled by switch, and by job or port for the per-job and per-port ones.
std::string to_prometheus(const json& stats) {
  std::ostringstream out;
  const std::string name = stats["name"].get<std::string>();
  auto emit_family = [&](const std::string& metric, std::string_view key) {
    out << "# TYPE " << metric << (is_gauge(key) ? " gauge\n" : " counter\n");
  };
  for (const auto& item : stats["switch"].items()) {
    const std::string metric = "atp_switch_" + item.key() + (is_gauge(item.key()) ? "" : "_total");
    emit_family(metric, item.key());
    out << metric << "{switch=\"" << name << "\"} " << item.value().dump() << "\n";
  }
  auto emit_group = [&](const char* group, const char* label, const char* prefix) {
    const json& rows = stats[group];
    if (rows.empty()) return;
    for (const auto& item : rows[0].items()) {
      if (item.key() == label || !item.value().is_number()) continue;
      const std::string metric = std::string(prefix) + item.key() + (is_gauge(item.key()) ? "" : "_total");
      emit_family(metric, item.key());
      for (const json& row : rows) {
        out << metric << "{switch=\"" << name << "\"," << label << "=\"" << row[label].dump() << "\"} "
            << row[item.key()].dump() << "\n";
      }
    }
  };
  emit_group("jobs", "job", "atp_switch_job_");
  emit_group("ports", "port", "atp_switch_port_");
  return out.str();
}

// Port i's ingress queue draws from stream kIngressStreams + i, its egress queue from stream i:
// a fixed offset rather than "after the last port", so that neither an ingress queue (added in
// the config or by PUT /ports) nor another port changes any other queue's trace.
constexpr std::uint64_t kIngressStreams = std::uint64_t{1} << 32;

// The number a route matched with (\d+); nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> parse_index(const std::string& digits) {
  std::uint64_t v = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

constexpr const char* kInterfacePortsHaveNoHosts =
    "this switch's ports are Linux interfaces: hosts are attached by cable and routes:, not by POST /hosts";

// A control request's answer, computed on the dataplane thread: a status and a JSON body.
using control::Reply;
Reply ok(const json& body) { return {200, body.dump()}; }

}  // namespace

// ---- the daemon ------------------------------------------------------------------------------

struct SwitchDaemon::Impl {
  // Where SwitchPipeline puts its sends: the port's egress queue, at the time of the batch, in
  // the form the port carries (SwitchPorts::encapsulate).
  class QueueSink final : public PortSink {
   public:
    explicit QueueSink(Impl& impl) : impl_(impl) {}
    void send(PortId port, std::span<const std::uint8_t> packet) override {
      // A route or group naming a port the switch does not have, or one detached by DELETE /hosts.
      if (port >= impl_.queues.size() || !impl_.switch_ports->attached(port)) {
        ++impl_.no_port;
        return;
      }
      if (const auto bytes = impl_.switch_ports->encapsulate(port, packet)) impl_.queues[port].enqueue(*bytes, now);
    }
    Time now{};

   private:
    Impl& impl_;
  };

  struct PortCounters {
    // Datagrams (frames on interface ports) received from the port's peer, before its ingress queue.
    std::uint64_t rx_packets = 0;
    std::uint64_t rx_bytes = 0;
  };

  // `config`'s pipeline settings, or SwitchConfigError when its table is too large for the
  // machine (a config built in C++, not parsed: ClusterJob's local switch).
  static const SwitchConfig& checked(const SwitchDaemonConfig& config) {
    detail::check_limits(config);
    return config.pipeline;
  }

  explicit Impl(SwitchDaemonConfig c)
      : config(std::move(c)),
        pipeline(checked(config)),
        sink(*this),
        http(control::make_server(control::server_access(config.access))) {
    switch_ports =
        config.interface_ports() ? detail::open_ethernet_ports(config, route_port) : detail::open_udp_ports(config);
    ingress_queues.resize(config.ports.size());
    for (std::size_t i = 0; i < config.ports.size(); ++i) {
      queues.emplace_back(config.ports[i].egress, EgressQueue::stream_seed(config.seed, i), switch_ports->framing());
      if (config.ports[i].ingress) set_ingress(static_cast<PortId>(i), *config.ports[i].ingress);
    }
    port_counters.resize(config.ports.size());
    for (const auto& [dst, port] : config.routes) {
      pipeline.add_route(dst, port);
      route_port[dst] = port;
    }

    task_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (task_fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    const std::vector<int> fds = switch_ports->fds();
    for (std::size_t i = 0; i < fds.size(); ++i) loop.add_readable(fds[i], [this, i] { on_readable(i); });
    loop.add_readable(task_fd, [this] { run_tasks(); });
    loop.set_timer([this] { return next_deadline(); }, [this](Time now) { on_deadline(now); });

    setup_http();
    // Port 0: bind_to_any_port tells the kernel's choice (bind_to_port only says yes or no).
    control_port = config.control_port == 0
                       ? http->bind_to_any_port(config.control_host)
                       : (http->bind_to_port(config.control_host, config.control_port) ? config.control_port : -1);
    if (control_port <= 0) {
      ::close(task_fd);
      task_fd = -1;
      throw std::runtime_error("cannot listen on the control address " + config.control_host + ":" +
                               std::to_string(config.control_port) +
                               " (in use or not a local address); choose another `control:` address");
    }
  }

  ~Impl() {
    if (task_fd >= 0) ::close(task_fd);
  }

  // ---- dataplane thread ----

  // Packets waiting on switch_ports->fds()[source].
  void on_readable(std::size_t source) {
    // A few bursts per wakeup, then back to the loop so control requests and timers are served.
    for (int round = 0; round < 8; ++round) {
      const detail::SwitchPorts::Burst burst = switch_ports->receive_burst(source);
      if (burst.read == 0) break;
      const Time now = EventLoop::now();
      sink.now = now;
      for (const detail::SwitchPorts::Received& packet : burst.packets) {
        port_counters[packet.port].rx_packets++;
        port_counters[packet.port].rx_bytes += packet.bytes.size();
        switch_ports->on_arrival(packet.port, packet.bytes);
        if (std::optional<EgressQueue>& ingress = ingress_queues[packet.port]) {
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
  void process_ingress(Time now) {
    for (std::size_t p = 0; p < ingress_queues.size(); ++p) {
      if (!ingress_queues[p]) continue;
      ingress_queues[p]->release(now,
                                 [&](std::span<std::uint8_t> packet) { deliver(static_cast<PortId>(p), packet, now); });
    }
  }

  // One packet from port `from`, past its ingress queue: to the pipeline, or (interface ports,
  // a frame that is not ATP's) switched to the egress queues as Ethernet.
  void deliver(PortId from, std::span<std::uint8_t> packet, Time now) {
    const detail::SwitchPorts::Destination to = switch_ports->destination(from, packet);
    switch (to.kind) {
      case detail::SwitchPorts::Destination::Kind::kPipeline:
        pipeline.process(from, to.atp, now, sink);
        return;
      case detail::SwitchPorts::Destination::Kind::kPort:
        queues[to.port].enqueue(packet, now);
        return;
      case detail::SwitchPorts::Destination::Kind::kAllOtherPorts:
        for (std::size_t q = 0; q < queues.size(); ++q) {
          if (q != from) queues[q].enqueue(packet, now);
        }
        return;
      case detail::SwitchPorts::Destination::Kind::kNowhere:
        return;
    }
  }

  Time next_deadline() const {
    Time t = std::min(pipeline.next_deadline(), tenancy.next_deadline());
    for (const EgressQueue& q : queues) t = std::min(t, q.next_release());
    for (const std::optional<EgressQueue>& q : ingress_queues) {
      if (q) t = std::min(t, q->next_release());
    }
    return t;
  }

  void on_deadline(Time now) {
    for (const control::Tenancy::Resource r : tenancy.expire(now)) remove(r);
    pipeline.on_timeout(now);
    sink.now = now;
    process_ingress(now);
    flush(now);
  }

  // Port `port`'s ingress settings from now on; creates its ingress queue if it had none.
  void set_ingress(PortId port, const EgressConfig& settings) {
    std::optional<EgressQueue>& q = ingress_queues[port];
    if (q) {
      q->config() = settings;
    } else {
      q.emplace(settings, EgressQueue::stream_seed(config.seed, kIngressStreams + port), switch_ports->framing());
    }
  }

  // Sends every packet the queues release by `now`, port by port (SwitchPorts::send: in one
  // sendmmsg batch to the UDP peers, or one batch per interface port).
  void flush(Time now) {
    std::size_t count = 0;
    for (std::size_t p = 0; p < queues.size(); ++p) {
      queues[p].release(now, [&](std::span<std::uint8_t> packet) {
        if (tx_bytes.size() <= count) tx_bytes.emplace_back();
        tx_bytes[count].assign(packet.begin(), packet.end());
        if (tx.size() <= count) tx.emplace_back();
        tx[count].port = static_cast<PortId>(p);
        ++count;
      });
    }
    if (count == 0) return;
    for (std::size_t i = 0; i < count; ++i) tx[i].bytes = tx_bytes[i];
    send_failed += switch_ports->send(std::span<const detail::SwitchPorts::Outgoing>(tx.data(), count));
  }

  // ---- hosts attached at run time: POST and DELETE /hosts (dataplane thread, UDP ports) ----

  // Port p as new: an empty egress queue with default settings (unlimited) on its own stream, no
  // ingress queue, counters zero.
  void reset_port(PortId p) {
    queues[p] = EgressQueue(EgressConfig{}, EgressQueue::stream_seed(config.seed, p), switch_ports->framing());
    ingress_queues[p].reset();
    port_counters[p] = {};
  }

  // The overlay address of the host on port p: the lowest destination routed to p, if any.
  std::optional<Address> address_of(PortId p) const {
    std::optional<Address> lowest;
    for (const auto& [dst, port] : route_port) {
      if (port == p && (!lowest || dst < *lowest)) lowest = dst;
    }
    return lowest;
  }

  // The lowest host address that is no route's destination; nullopt when 10.0.0.0/8 is full.
  std::optional<Address> free_address() const {
    for (Address a = kFirstHostAddress; a <= kLastHostAddress; ++a) {
      if (!route_port.contains(a)) return a;
    }
    return std::nullopt;
  }

  // POST /hosts: the port `peer` is on (attaching it if it is on none) and its overlay address.
  // POST /hosts by `who`, hanging the port on `lease` (0: none).
  Reply attach_host(const UdpEndpoint& peer, const std::string& who, LeaseTable::Id lease) {
    if (!switch_ports->supports_hosts()) return Reply::error(400, kInterfacePortsHaveNoHosts);
    if (peer == switch_ports->data_endpoint()) {
      return Reply::error(400, "peer: " + peer.to_string() + " is this switch's own data address, not a host's");
    }
    if (auto refused = control::refuse_lease(tenancy, who, lease)) return *refused;
    const std::optional<PortId> known = switch_ports->port_of(peer);
    // Attaching a peer again changes nothing but its owner and lease: another tenant's port is
    // refused, the operator's is answered as it is (a shared PS every job names).
    bool claim = true;
    if (known) {
      const control::Tenancy::Resource r = host_resource(*known);
      if (auto forbidden = tenancy.forbids_use(who, r)) return Reply::error(403, *forbidden);
      claim = !tenancy.forbids_change(who, r);
    }
    std::optional<Address> address;
    if (known) address = address_of(*known);
    const bool new_address = !address;
    if (new_address && !(address = free_address())) {
      return Reply::error(503, "no overlay address is left in 10.0.0.0/8 for " + peer.to_string());
    }
    PortId port = 0;
    if (known) {
      port = *known;
    } else if (!detached_ports.empty()) {
      port = *detached_ports.begin();  // lowest first; reset when it was detached
      detached_ports.erase(detached_ports.begin());
    } else if (queues.size() >= kMaxPorts) {
      return Reply::error(503, "the switch has " + std::to_string(kMaxPorts) +
                                   " ports, the most it can have; detach one with DELETE /hosts/<port> first");
    } else {
      port = static_cast<PortId>(queues.size());
      queues.emplace_back();
      ingress_queues.emplace_back();
      port_counters.emplace_back();
      reset_port(port);
    }
    if (!known) switch_ports->attach(port, peer);
    if (new_address) {
      pipeline.add_route(*address, port);
      route_port[*address] = port;
    }
    if (claim) tenancy.claim(host_resource(port), who, lease);
    const SwitchConfig& sc = config.pipeline;
    return ok(json{{"port", port},
                   {"address", format_address(*address)},
                   {"switch",
                    {{"name", config.name},
                     {"atp_capable", sc.atp_capable},
                     {"aggregators", sc.num_aggregators},
                     {"aggregator_width", sc.aggregator_width}}}});
  }

  // DELETE /hosts/<port>: port `text` (parsed: `port`) loses its peer and routes and is reset;
  // POST /hosts reuses it.
  Reply detach_host(std::optional<std::uint64_t> port, const std::string& text, const std::string& who) {
    if (!switch_ports->supports_hosts()) return Reply::error(400, kInterfacePortsHaveNoHosts);
    if (!port || *port >= queues.size()) {
      return Reply::error(
          404, "port " + text + " does not exist (the switch has " + std::to_string(queues.size()) + " ports)");
    }
    const auto p = static_cast<PortId>(*port);
    if (!switch_ports->attached(p)) return Reply::error(404, "port " + text + " is already detached");
    if (auto forbidden = tenancy.forbids_change(who, host_resource(p))) return Reply::error(403, *forbidden);
    detach(p);
    return ok(json{{"detached", p}});
  }

  // Port `p` (attached) loses its peer, routes and owner, and is reset.
  void detach(PortId p) {
    tenancy.release(host_resource(p));
    switch_ports->detach(p);  // its datagrams now count as unknown_source
    for (auto it = route_port.begin(); it != route_port.end();) {
      if (it->second == p) {
        pipeline.remove_route(it->first);
        it = route_port.erase(it);
      } else {
        ++it;
      }
    }
    reset_port(p);  // drops what its queues held
    detached_ports.insert(p);
  }

  // Removes job `job` (its aggregators, multicast group and owner); false if it was not installed.
  bool remove_job(JobId job) {
    if (const auto it = installed.find(job); it != installed.end()) {
      installed_entries -= it->second;
      installed.erase(it);
    }
    tenancy.release(job_resource(job));
    pipeline.remove_multicast_group(multicast_group_address(job));
    return pipeline.remove_job(job);
  }

  // What hung on a lease that expired or was revoked.
  void remove(control::Tenancy::Resource r) {
    if (r.kind == control::Tenancy::Kind::kJob) {
      remove_job(static_cast<JobId>(r.id));
    } else if (r.id < queues.size() && switch_ports->attached(static_cast<PortId>(r.id))) {  // a host: UDP ports
      detach(static_cast<PortId>(r.id));
    }
  }

  static control::Tenancy::Resource job_resource(JobId job) { return {control::Tenancy::Kind::kJob, job}; }
  static control::Tenancy::Resource host_resource(PortId port) { return {control::Tenancy::Kind::kHost, port}; }

  void run_tasks() {
    std::uint64_t ignored = 0;
    [[maybe_unused]] const ssize_t r = ::read(task_fd, &ignored, sizeof ignored);
    std::deque<std::function<void()>> ready;
    {
      std::lock_guard<std::mutex> lock(tasks_mutex);
      ready.swap(tasks);
    }
    for (auto& task : ready) task();
  }

  json stats() const {
    json doc;
    doc["name"] = config.name;
    switch_ports->describe(doc);
    const SwitchCounters& c = pipeline.counters();
    const detail::SwitchPortsCounters s = switch_ports->counters();
    const detail::EthernetCounters& ethernet = s.ethernet;
    doc["switch"] = {{"packets", c.packets},
                     {"malformed", c.malformed},
                     {"unknown_job", c.unknown_job},
                     {"not_admitted", c.not_admitted},
                     {"no_route", c.no_route},
                     {"too_wide", c.too_wide},
                     {"reclaimed", c.reclaimed},
                     {"unknown_source", s.unknown_source},
                     {"no_port", no_port},
                     {"truncated", s.truncated},
                     {"send_failed", send_failed},
                     {"aggregators", pipeline.table().size()},
                     {"aggregators_in_use", pipeline.table().in_use()},
                     {"atp_frames", ethernet.atp_frames},
                     {"non_atp_frames", ethernet.non_atp_frames},
                     {"malformed_frames", ethernet.malformed_frames},
                     {"l2_forwarded", ethernet.l2_forwarded},
                     {"l2_flooded", ethernet.l2_flooded},
                     {"l2_same_port", ethernet.l2_same_port},
                     {"no_neighbor", ethernet.no_neighbor},
                     {"neighbor_refused", ethernet.neighbor_refused},
                     {"mac_addresses", s.mac_addresses},
                     {"neighbors", s.neighbors}};
    std::vector<JobId> ids;
    for (const auto& [id, counters] : pipeline.all_job_counters()) ids.push_back(id);
    for (const auto& [id, entries] : installed) {
      if (!pipeline.all_job_counters().contains(id)) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    doc["jobs"] = json::array();
    for (JobId id : ids) {
      const SwitchJobCounters j = pipeline.job_counters(id);
      doc["jobs"].push_back({{"job", id},
                             {"installed", installed.contains(id) ? 1 : 0},
                             {"aggregations", j.aggregations},
                             {"completions", j.completions},
                             {"collisions", j.collisions},
                             {"resend_flushes", j.resend_flushes},
                             {"duplicates", j.duplicates},
                             {"forwarded", j.forwarded},
                             {"deallocations", j.deallocations},
                             {"reclaimed", j.reclaimed},
                             {"ecn_merged", j.ecn_merged},
                             {"round_shape_mismatches", j.round_shape_mismatches}});
    }
    doc["ports"] = json::array();
    for (std::size_t p = 0; p < queues.size(); ++p) {
      const EgressCounters& e = queues[p].counters();
      const EgressCounters in = ingress_queues[p] ? ingress_queues[p]->counters() : EgressCounters{};
      json row = {{"port", p},
                  {"rx_packets", port_counters[p].rx_packets},
                  {"rx_bytes", port_counters[p].rx_bytes},
                  {"tx_packets", e.packets},
                  {"tx_bytes", e.bytes},
                  {"drops", e.queue_drops + e.lost},
                  {"queue_drops", e.queue_drops},
                  {"lost", e.lost},
                  {"duplicated", e.duplicated},
                  {"reordered", e.reordered},
                  {"ecn_marked", e.ecn_marked},
                  {"queue_depth", e.depth},
                  {"ingress_lost", in.lost},
                  {"ingress_queue_drops", in.queue_drops},
                  {"ingress_duplicated", in.duplicated},
                  {"ingress_reordered", in.reordered},
                  {"ingress_ecn_marked", in.ecn_marked},
                  {"ingress_queue_depth", in.depth},
                  // Frames the kernel dropped before the switch read them (interface ports).
                  {"rx_kernel_drops", switch_ports->kernel_drops(static_cast<PortId>(p))}};
      switch_ports->describe_port(static_cast<PortId>(p), row);
      doc["ports"].push_back(std::move(row));
    }
    return doc;
  }

  // Runs `fn` on the dataplane thread (directly when it is not running) and returns its result.
  template <class Fn>
  auto on_loop(Fn fn) -> decltype(fn()) {
    using Result = decltype(fn());
    if (!loop_running) return fn();
    auto task = std::make_shared<std::packaged_task<Result()>>(std::move(fn));
    std::future<Result> result = task->get_future();
    {
      std::lock_guard<std::mutex> lock(tasks_mutex);
      tasks.emplace_back([task] { (*task)(); });
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(task_fd, &one, sizeof one);
    if (result.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
      throw std::runtime_error("the switch dataplane did not answer within 1 s");
    }
    return result.get();
  }

  // POST /jobs' 400 when `ports` (the request's field `field`) names a port the switch does not have.
  std::optional<Reply> missing_port(const char* field, const std::vector<PortId>& ports) const {
    for (PortId p : ports) {
      if (p >= queues.size()) {
        return Reply::error(400, std::string(field) + ": port " + std::to_string(p) +
                                     " does not exist (the switch has " + std::to_string(queues.size()) + " ports)");
      }
    }
    return std::nullopt;
  }

  // ---- control plane (HTTP thread) ----
  // Every check that reads the ports (their number changes with POST /hosts) runs on the
  // dataplane thread, inside the task; the HTTP thread only parses.
  void setup_http() {
    auto fail = [](httplib::Response& res, int status, const std::string& message) {
      res.status = status;
      res.set_content(control::error_body(message) + "\n", "application/json");
    };
    // Runs `task` (returning a Reply) on the dataplane thread and answers with its Reply.
    auto answer = [this, fail](httplib::Response& res, auto task) {
      Reply reply;
      try {
        reply = on_loop(std::move(task));
      } catch (const std::exception& e) {
        return fail(res, 503, e.what());
      }
      res.status = reply.status;
      res.set_content(reply.body + "\n", "application/json");
    };
    http->Post("/jobs", [this, fail, answer](const httplib::Request& req, httplib::Response& res) {
      SwitchJobPlan plan;
      LeaseTable::Id lease = 0;
      try {
        plan = control::switch_job_from_json(req.body);
        lease = control::lease_param(req);
      } catch (const control::ControlError& e) {
        return fail(res, 400, e.what());
      }
      // By value: a task that outlives a timed-out request must not point into its stack.
      answer(res, [this, plan, lease, who = control::requester(*http, req)] { return install_job(plan, who, lease); });
    });
    http->Delete(R"(/jobs/(\d+))", [this, answer](const httplib::Request& req, httplib::Response& res) {
      answer(res, [this, id = parse_index(req.matches[1].str()), text = control::excerpt(req.matches[1].str()),
                   who = control::requester(*http, req)] {
        const auto job = static_cast<JobId>(id.value_or(0));
        if (!id || *id > 0xFFFF || !installed.contains(job))
          return Reply::error(404, "job " + text + " is not installed");
        if (auto forbidden = tenancy.forbids_change(who, job_resource(job))) return Reply::error(403, *forbidden);
        remove_job(job);
        return ok(json{{"removed", job}});
      });
    });
    http->Put(R"(/ports/(\d+))", [this, answer](const httplib::Request& req, httplib::Response& res) {
      const std::optional<std::uint64_t> port = parse_index(req.matches[1].str());
      // Parsed here, reported after the port check (a missing port is the first thing to say).
      std::optional<control::PortSettings> settings;
      std::string bad_body;
      try {
        settings = control::port_settings_from_json(req.body);
      } catch (const control::ControlError& e) {
        bad_body = e.what();
      }
      answer(res, [this, port, text = control::excerpt(req.matches[1].str()), settings, bad_body,
                   who = control::requester(*http, req)] {  // by value
        if (!port || *port >= queues.size()) {
          return Reply::error(
              404, "port " + text + " does not exist (the switch has " + std::to_string(queues.size()) + " ports)");
        }
        // A port's rate, buffer and faults are the link's, shared by every tenant behind it.
        if (who != control::Authenticator::kOperator) {
          return Reply::error(403, "only the operator changes port settings");
        }
        if (!settings) return Reply::error(400, bad_body);
        const auto p = static_cast<PortId>(*port);
        if (settings->egress) queues[p].config() = *settings->egress;
        if (settings->ingress) set_ingress(p, *settings->ingress);
        control::PortSettings s{queues[p].config(), std::nullopt};
        if (ingress_queues[p]) s.ingress = ingress_queues[p]->config();
        return Reply{200, control::to_json(s)};
      });
    });
    http->Post("/hosts", [this, fail, answer](const httplib::Request& req, httplib::Response& res) {
      UdpEndpoint peer;
      LeaseTable::Id lease = 0;
      try {
        peer = control::host_from_json(req.body);
        lease = control::lease_param(req);
      } catch (const control::ControlError& e) {
        // A switch on interfaces refuses any body: say that, not what is wrong with the body.
        return fail(res, 400, switch_ports->supports_hosts() ? e.what() : kInterfacePortsHaveNoHosts);
      }
      answer(res, [this, peer, lease, who = control::requester(*http, req)] { return attach_host(peer, who, lease); });
    });
    http->Delete(R"(/hosts/(\d+))", [this, answer](const httplib::Request& req, httplib::Response& res) {
      answer(res, [this, port = parse_index(req.matches[1].str()), text = control::excerpt(req.matches[1].str()),
                   who = control::requester(*http, req)] { return detach_host(port, text, who); });
    });
    control::add_lease_routes(
        *http, tenancy, [this](std::function<Reply()> task) { return on_loop(std::move(task)); },
        [this](control::Tenancy::Resource r) { remove(r); });
    http->Get("/stats", [this, fail](const httplib::Request&, httplib::Response& res) {
      try {
        res.set_content(on_loop([this] { return stats(); }).dump(2) + "\n", "application/json");
      } catch (const std::exception& e) {
        fail(res, 503, e.what());
      }
    });
    http->Get("/metrics", [this, fail](const httplib::Request&, httplib::Response& res) {
      try {
        res.set_content(to_prometheus(on_loop([this] { return stats(); })), "text/plain; version=0.0.4");
      } catch (const std::exception& e) {
        fail(res, 503, e.what());
      }
    });
  }

  // POST /jobs by `who`, hanging the job on `lease` (0: none).
  Reply install_job(const SwitchJobPlan& plan, const std::string& who, LeaseTable::Id lease) {
    if (auto bad = missing_port("admitted_ports", plan.entry.admitted_ports)) return *bad;
    if (auto bad = missing_port("multicast_ports", plan.multicast_ports)) return *bad;
    for (const std::vector<PortId>* ports : {&plan.entry.admitted_ports, &plan.multicast_ports}) {
      for (PortId p : *ports) {
        if (auto forbidden = tenancy.forbids_use(who, host_resource(p))) return Reply::error(403, *forbidden);
      }
    }
    if (auto refused = control::refuse_lease(tenancy, who, lease)) return *refused;
    // Replacing a job in place would keep its aggregators' partial sums under new roles.
    if (installed.contains(plan.entry.job)) {
      if (auto forbidden = tenancy.forbids_change(who, job_resource(plan.entry.job))) {
        return Reply::error(403, *forbidden);
      }
      return Reply::error(409, "job " + std::to_string(plan.entry.job) + " is already installed; remove it first");
    }
    const std::size_t entries =
        plan.entry.admitted_ports.size() + plan.multicast_ports.size() + plan.entry.roles.size();
    if (entries > config.max_job_entries - installed_entries) {
      return Reply::error(507, "job " + std::to_string(plan.entry.job) + " names " + std::to_string(entries) +
                                   " ports and roles, and the installed jobs " + std::to_string(installed_entries) +
                                   ": more than the " + std::to_string(config.max_job_entries) +
                                   " this switch holds; remove a job first");
    }
    pipeline.install_job(plan.entry);
    pipeline.add_multicast_group(multicast_group_address(plan.entry.job), plan.multicast_ports);
    installed.emplace(plan.entry.job, entries);
    installed_entries += entries;
    tenancy.claim(job_resource(plan.entry.job), who, lease);
    return ok(json{{"installed", plan.entry.job}});
  }

  SwitchDaemonConfig config;
  SwitchPipeline pipeline;
  // Every route the pipeline has (config.routes, then POST and DELETE /hosts): the interface
  // ports' check before they learn an IP's MAC, and where POST /hosts finds a host's address and
  // a free one.
  detail::Routes route_port;
  std::unique_ptr<detail::SwitchPorts> switch_ports;       // UDP peers or Linux interfaces
  std::vector<EgressQueue> queues;                         // port i's egress
  std::vector<std::optional<EgressQueue>> ingress_queues;  // port i's ingress, if it has one
  std::set<PortId> detached_ports;                         // detached UDP ports, reused lowest first by POST /hosts
  std::vector<PortCounters> port_counters;
  QueueSink sink;
  std::vector<std::vector<std::uint8_t>> tx_bytes;  // flush()'s reusable copies of released packets
  std::vector<detail::SwitchPorts::Outgoing> tx;    // flush()'s batch, pointing into tx_bytes
  std::uint64_t no_port = 0;               // sends to a port number the switch lacks, or to a detached port: dropped
  std::uint64_t send_failed = 0;           // released packets the kernel refused: dropped
  std::map<JobId, std::size_t> installed;  // installed jobs -> the ports and roles each names
  std::size_t installed_entries = 0;       // their sum, at most config.max_job_entries
  control::Tenancy tenancy;                // who owns which job and attached host, and their leases

  EventLoop loop;
  int task_fd = -1;  // eventfd: the HTTP thread wrote a task
  std::mutex tasks_mutex;
  std::deque<std::function<void()>> tasks;
  std::atomic<bool> loop_running{false};

  std::unique_ptr<httplib::Server> http;  // control::make_server's
  int control_port = 0;
  std::thread loop_thread;
  std::thread http_thread;
  bool started = false;
};

SwitchDaemon::SwitchDaemon(SwitchDaemonConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

SwitchDaemon::~SwitchDaemon() { stop(); }

void SwitchDaemon::start() {
  Impl& d = *impl_;
  if (d.started) return;
  d.started = true;
  d.loop_running = true;
  d.loop_thread = std::thread([&d] { d.loop.run(); });
  d.http_thread = std::thread([&d] { d.http->listen_after_bind(); });
  // httplib's stop() only works once the server runs: wait for it (bounded; it is immediate).
  for (int i = 0; i < 5000 && !d.http->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void SwitchDaemon::stop() {
  Impl& d = *impl_;
  if (!d.started) return;
  d.started = false;
  // The control plane first: its handlers wait on the loop, so the loop must still run.
  d.http->stop();
  if (d.http_thread.joinable()) d.http_thread.join();
  d.loop.stop();
  if (d.loop_thread.joinable()) d.loop_thread.join();
  d.loop_running = false;
}

const SwitchDaemonConfig& SwitchDaemon::config() const { return impl_->config; }

UdpEndpoint SwitchDaemon::data_endpoint() const { return impl_->switch_ports->data_endpoint(); }

std::string SwitchDaemon::control_endpoint() const {
  return impl_->config.control_host + ":" + std::to_string(impl_->control_port);
}

std::string SwitchDaemon::answer_control_request(std::string_view request) {
  return control::answer_request(*impl_->http, request);
}

std::string SwitchDaemon::stats_json() {
  return impl_->on_loop([this] { return impl_->stats(); }).dump(2);
}

double SwitchDaemon::dataplane_cpu_seconds() const {
  clockid_t clock{};
  if (!impl_->started || ::pthread_getcpuclockid(impl_->loop_thread.native_handle(), &clock) != 0) return 0;
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace atp
