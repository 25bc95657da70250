// The switch daemon's control plane: installing and removing jobs, attaching and detaching hosts,
// port settings and leases, each checked against its tenant, and the counters document.
#include "switch_control.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "atp/control/stats.h"
#include "atp/io/log.h"

namespace atp::detail {
namespace {

using control::Reply;
using nlohmann::json;

Reply ok(const json& body) { return {200, body.dump()}; }

control::Tenancy::Resource job_resource(JobId job) { return {control::Tenancy::Kind::kJob, job}; }
control::Tenancy::Resource host_resource(PortId port) { return {control::Tenancy::Kind::kHost, port}; }

}  // namespace

SwitchControl::SwitchControl(const SwitchDaemonConfig& config, SwitchDataplane& dataplane)
    : config_(config), dataplane_(dataplane) {}

void SwitchControl::note(const std::string& what) const { log::info("switch " + config_.name + ": " + what); }

// POST /jobs' 400 when `ports` (the request's field `field`) names a port the switch does not have.
std::optional<Reply> SwitchControl::missing_port(const char* field, const std::vector<PortId>& ports) const {
  for (PortId p : ports) {
    if (p >= dataplane_.port_count()) {
      return Reply::error(400, std::string(field) + ": port " + std::to_string(p) + " does not exist (the switch has " +
                                   std::to_string(dataplane_.port_count()) + " ports)");
    }
  }
  return std::nullopt;
}

Reply SwitchControl::install_job(const SwitchJobPlan& plan, const std::string& who, LeaseTable::Id lease) {
  if (auto bad = missing_port("admitted_ports", plan.entry.admitted_ports)) return *bad;
  if (auto bad = missing_port("multicast_ports", plan.multicast_ports)) return *bad;
  if (auto bad = missing_port("rina_members", plan.entry.rina_members)) return *bad;
  const std::vector<PortId> route_ports = [&plan] {
    std::vector<PortId> ports;
    for (const auto& [dst, port] : plan.routes) ports.push_back(port);
    return ports;
  }();
  if (auto bad = missing_port("routes", route_ports)) return *bad;
  // A destination this switch routes elsewhere: the plan was made over another topology (or the
  // pools of two switches overlap), and following it would steal another host's packets.
  for (const auto& [dst, port] : plan.routes) {
    if (const std::optional<PortId> now = dataplane_.route_of(dst); now && *now != port) {
      return Reply::error(400, "routes: " + format_address(dst) + " is routed to port " + std::to_string(*now) +
                                   " on this switch, not to port " + std::to_string(port) +
                                   " as the job's plan says: the plan is of another topology");
    }
  }
  for (const std::vector<PortId>* ports :
       {&plan.entry.admitted_ports, &plan.multicast_ports, &plan.entry.rina_members, &route_ports}) {
    for (PortId p : *ports) {
      if (auto forbidden = tenancy_.forbids_use(who, host_resource(p))) return Reply::error(403, *forbidden);
    }
  }
  if (auto refused = control::refuse_lease(tenancy_, who, lease)) return *refused;
  // Replacing a job in place would keep its aggregators' partial sums under new roles. A taken
  // id is 409 whoever holds it, so that a tenant picking a free id can tell it from a refusal.
  if (installed_.contains(plan.entry.job)) {
    return Reply::error(
        409, "job " + std::to_string(plan.entry.job) + " is already installed" +
                 (tenancy_.forbids_change(who, job_resource(plan.entry.job)) ? " by another tenant; pick another id"
                                                                             : "; remove it first"));
  }
  const std::size_t entries = plan.entry.admitted_ports.size() + plan.multicast_ports.size() + plan.entry.roles.size() +
                              plan.entry.rina_members.size() + plan.routes.size();
  if (entries > config_.max_job_entries - installed_entries_) {
    return Reply::error(507, "job " + std::to_string(plan.entry.job) + " names " + std::to_string(entries) +
                                 " ports, roles and routes, and the installed jobs " +
                                 std::to_string(installed_entries_) + ": more than the " +
                                 std::to_string(config_.max_job_entries) + " this switch holds; remove a job first");
  }
  InstalledJob job{plan.name, entries, {}};
  for (const auto& [dst, port] : plan.routes) {  // before the job: its first packets find them
    const auto held = job_routes_.find(dst);
    if (held != job_routes_.end()) {
      ++held->second.jobs;
    } else if (dataplane_.route_of(dst)) {
      continue;  // the config's or a host's: it stays while the switch has it
    } else {
      dataplane_.add_route(dst, port);
      job_routes_.emplace(dst, JobRoute{port, 1});
    }
    job.routes.push_back(dst);
  }
  dataplane_.install_job(plan.entry, multicast_group_address(plan.entry.job), plan.multicast_ports);
  installed_.emplace(plan.entry.job, std::move(job));
  installed_entries_ += entries;
  tenancy_.claim(job_resource(plan.entry.job), who, lease);
  if (log::enabled(log::Level::kInfo)) {
    note(
        "job " + std::to_string(plan.entry.job) + " installed by " + who +
        (lease == 0 ? "" : " (lease " + std::to_string(lease) + ")") + ": " +
        std::to_string(plan.entry.admitted_ports.size()) + " admitted ports, " +
        std::to_string(plan.multicast_ports.size()) + " multicast ports, " + std::to_string(plan.entry.roles.size()) +
        " aggregation roles, " +
        (plan.entry.rina_members.empty() ? "" : std::to_string(plan.entry.rina_members.size()) + " Rina rack ports, ") +
        std::to_string(installed_.at(plan.entry.job).routes.size()) + " routes of its own");
  }
  return ok(json{{"installed", plan.entry.job}});
}

Reply SwitchControl::uninstall_job(std::optional<std::uint64_t> id, const std::string& text, const std::string& who) {
  const auto job = static_cast<JobId>(id.value_or(0));
  if (!id || *id > 0xFFFF || !installed_.contains(job)) return Reply::error(404, "job " + text + " is not installed");
  if (auto forbidden = tenancy_.forbids_change(who, job_resource(job))) return Reply::error(403, *forbidden);
  remove_job(job);
  note("job " + std::to_string(job) + " removed by " + who);
  return ok(json{{"removed", job}});
}

// Removes job `job` (its aggregators, multicast group and owner).
void SwitchControl::remove_job(JobId job) {
  tenancy_.release(job_resource(job));
  dataplane_.remove_job(job, multicast_group_address(job));
  if (const auto it = installed_.find(job); it != installed_.end()) {
    for (const Address dst : it->second.routes) {
      const auto held = job_routes_.find(dst);
      if (held == job_routes_.end() || --held->second.jobs > 0) continue;
      dataplane_.remove_route(dst);
      job_routes_.erase(held);
    }
    installed_entries_ -= it->second.entries;
    installed_.erase(it);
  }
}

Reply SwitchControl::set_port(std::optional<std::uint64_t> port, const std::string& text,
                              const std::optional<control::PortSettings>& settings, const std::string& bad_body,
                              const std::string& who) {
  if (!port || *port >= dataplane_.port_count()) {
    return Reply::error(
        404, "port " + text + " does not exist (the switch has " + std::to_string(dataplane_.port_count()) + " ports)");
  }
  // A port's rate, buffer and faults are the link's, shared by every tenant behind it.
  if (who != control::Authenticator::kOperator) return Reply::error(403, "only the operator changes port settings");
  if (!settings) return Reply::error(400, bad_body);
  const auto p = static_cast<PortId>(*port);
  if (settings->egress) dataplane_.set_egress(p, *settings->egress);
  if (settings->ingress) dataplane_.set_ingress(p, *settings->ingress);
  return Reply{200, control::to_json(control::PortSettings{dataplane_.egress_config(p), dataplane_.ingress_config(p)})};
}

// ---- hosts attached at run time: POST and DELETE /hosts (UDP ports) ----

Reply SwitchControl::attach_host(const SocketAddress& peer, const std::string& who, LeaseTable::Id lease, bool shared) {
  const SwitchPorts& ports = dataplane_.ports();
  if (!ports.supports_hosts()) return host_by_cable(peer, who, lease, shared);
  if (peer == ports.data_endpoint()) {
    return Reply::error(400, "peer: " + peer.to_string() + " is this switch's own data address, not a host's");
  }
  if (auto refused = refuse_host_lease(who, lease, shared)) return *refused;
  const std::optional<PortId> known = ports.port_of(peer);
  // Attaching a peer again changes nothing but its owner and lease: another tenant's port is
  // refused, the operator's is answered as it is (a shared PS every job names).
  bool claim = true;
  if (known) {
    const control::Tenancy::Resource r = host_resource(*known);
    if (auto forbidden = tenancy_.forbids_use(who, r)) return Reply::error(403, *forbidden);
    claim = !tenancy_.forbids_change(who, r);
  }
  std::optional<Address> address;
  if (known) address = dataplane_.address_of(*known);
  const bool new_address = !address;
  const control::HostPool& pool = config_.host_pool;
  if (new_address && !(address = dataplane_.free_address(pool.first(), pool.last()))) {
    return Reply::error(
        503, "no overlay address is left in this switch's host_pool " + pool.to_string() + " for " + peer.to_string());
  }
  PortId port = 0;
  if (known) {
    port = *known;
  } else if (!detached_ports_.empty()) {
    port = *detached_ports_.begin();  // lowest first; reset when it was detached
    detached_ports_.erase(detached_ports_.begin());
  } else if (dataplane_.port_count() >= control::kMaxPorts) {
    return Reply::error(503, "the switch has " + std::to_string(control::kMaxPorts) +
                                 " ports, the most it can have; detach one with DELETE /hosts/<port> first");
  } else {
    port = dataplane_.add_port();
  }
  if (!known) {
    dataplane_.attach(port, peer);
    note("host " + peer.to_string() + " attached on port " + std::to_string(port) + " as " + format_address(*address) +
         " by " + who + (shared ? " (shared)" : "") + (lease == 0 ? "" : " (lease " + std::to_string(lease) + ")"));
  }
  if (new_address) dataplane_.add_route(*address, port);
  if (claim) tenancy_.claim(host_resource(port), shared ? std::string(control::Authenticator::kOperator) : who, lease);
  return host_attached(port, *address);
}

// On interface ports a host is attached by cable: POST /hosts only says where, from the routes
// (the config's, or a job's), and holds nothing.
Reply SwitchControl::host_by_cable(const SocketAddress& peer, const std::string& who, LeaseTable::Id lease,
                                   bool shared) {
  if (auto refused = refuse_host_lease(who, lease, shared)) return *refused;
  if (peer.port != kUdpPort) {
    return Reply::error(400, "peer: " + peer.to_string() + ": a host behind this switch's interfaces is reached at " +
                                 format_address(peer.ip) + ":" + std::to_string(kUdpPort) + " (ATP's UDP port)");
  }
  const std::optional<PortId> port = dataplane_.route_of(peer.ip);
  if (!port) {
    return Reply::error(404, "switch " + config_.name + " has no route to " + format_address(peer.ip) +
                                 ": add {dst: " + format_address(peer.ip) +
                                 ", port: P} to routes: in its config, P the port of that host's cable");
  }
  if (*port < config_.ports.size() && !config_.ports[*port].neighbour.empty()) {
    return Reply::error(404, "switch " + config_.name + " routes " + format_address(peer.ip) + " to port " +
                                 std::to_string(*port) + ", the link to switch " + config_.ports[*port].neighbour +
                                 ": that host hangs under another switch");
  }
  return host_attached(*port, peer.ip);
}

std::optional<Reply> SwitchControl::refuse_host_lease(const std::string& who, LeaseTable::Id lease, bool shared) {
  if (shared && lease != 0) {
    return Reply::error(400, "a shared host stays until the operator detaches it: it hangs on no lease");
  }
  return control::refuse_lease(tenancy_, who, lease);
}

Reply SwitchControl::host_attached(PortId port, Address address) const {
  const SwitchConfig& sc = config_.pipeline;
  return ok(json{{"port", port},
                 {"address", format_address(address)},
                 {"switch",
                  {{"name", config_.name},
                   {"atp_capable", sc.atp_capable},
                   {"aggregators", sc.num_aggregators},
                   {"aggregator_width", sc.aggregator_width}}}});
}

Reply SwitchControl::detach_host(std::optional<std::uint64_t> port, const std::string& text, const std::string& who) {
  if (!dataplane_.ports().supports_hosts()) return Reply::error(400, kInterfacePortsHaveNoHosts);
  if (!port || *port >= dataplane_.port_count()) {
    return Reply::error(
        404, "port " + text + " does not exist (the switch has " + std::to_string(dataplane_.port_count()) + " ports)");
  }
  const auto p = static_cast<PortId>(*port);
  if (!dataplane_.ports().attached(p)) return Reply::error(404, "port " + text + " is already detached");
  if (auto forbidden = tenancy_.forbids_change(who, host_resource(p))) return Reply::error(403, *forbidden);
  detach(p);
  note("port " + std::to_string(p) + " detached by " + who);
  return ok(json{{"detached", p}});
}

// Port `p` (attached) loses its peer, routes and owner, and is reset.
void SwitchControl::detach(PortId p) {
  tenancy_.release(host_resource(p));
  dataplane_.detach(p);  // its datagrams now count as unknown_source
  dataplane_.remove_routes_to(p);
  // Jobs' routes to the port go with it: no job's removal may take the route of a host that gets
  // the port and address later.
  for (auto it = job_routes_.begin(); it != job_routes_.end();) {
    if (it->second.port != p) {
      ++it;
      continue;
    }
    for (auto& [id, installed] : installed_) std::erase(installed.routes, it->first);
    it = job_routes_.erase(it);
  }
  dataplane_.reset_port(p);  // drops what its queues held
  detached_ports_.insert(p);
}

// ---- leases ----

void SwitchControl::remove(control::Tenancy::Resource r, const char* why) {
  if (r.kind == control::Tenancy::Kind::kJob) {
    remove_job(static_cast<JobId>(r.id));
    note("job " + std::to_string(r.id) + " removed: " + why);
  } else if (r.id < dataplane_.port_count() && dataplane_.ports().attached(static_cast<PortId>(r.id))) {
    detach(static_cast<PortId>(r.id));  // a host: only ports that supports_hosts() have them
    note("port " + std::to_string(r.id) + " detached: " + why);
  }
}

void SwitchControl::expire(Time now) {
  for (const control::Tenancy::Resource r : tenancy_.expire(now)) remove(r, "its lease expired");
}

// ---- stats ----

control::SwitchStats SwitchControl::stats() {
  const SwitchDataplane::Totals t = dataplane_.totals();
  control::SwitchStats s;
  s.name = config_.name;
  s.threads = t.threads;
  for (const SwitchDataplane::ThreadLoad& load : t.threads) s.handoff_drops += load.handoff_drops;
  s.pipeline = t.pipeline;
  s.unknown_source = t.ports.unknown_source;
  s.no_port = t.no_port;
  s.truncated = t.ports.truncated;
  s.send_failed = t.send_failed;
  s.aggregators = config_.pipeline.atp_capable ? config_.pipeline.num_aggregators : 0;
  s.aggregator_width = config_.pipeline.atp_capable ? config_.pipeline.aggregator_width : 0;
  s.aggregators_in_use = t.aggregators_in_use;
  s.ethernet = t.ports.ethernet;
  s.mac_addresses = t.ports.mac_addresses;
  s.neighbors = t.ports.neighbors;
  std::vector<JobId> ids;
  for (const auto& [id, counters] : t.jobs) ids.push_back(id);
  for (const auto& [id, entries] : installed_) {
    if (!t.jobs.contains(id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (JobId id : ids) {
    const auto it = t.jobs.find(id);
    const auto installed = installed_.find(id);
    s.jobs.push_back({id, installed == installed_.end() ? std::string() : installed->second.name,
                      installed != installed_.end(), it == t.jobs.end() ? SwitchJobCounters{} : it->second});
  }
  for (std::size_t i = 0; i < dataplane_.port_count(); ++i) {
    control::SwitchPortStats row;
    row.port = static_cast<PortId>(i);
    row.rx_packets = t.rx[i].rx_packets;
    row.rx_bytes = t.rx[i].rx_bytes;
    row.egress = t.egress[i];
    row.ingress = t.ingress[i];
    // What came in is rx_packets and rx_bytes; the ingress queue's own are not reported.
    row.ingress.packets = row.ingress.bytes = 0;
    row.rx_kernel_drops = t.kernel_drops[i];
    s.ports.push_back(row);
  }
  dataplane_.ports().describe(s);  // the data address and peers, or the interfaces
  for (control::SwitchPortStats& row : s.ports) {
    if (row.port < config_.ports.size()) row.neighbour = config_.ports[row.port].neighbour;
  }
  return s;
}

}  // namespace atp::detail
