// The switch daemon's control plane: installing and removing jobs, attaching and detaching hosts,
// port settings and leases, each checked against its tenant, and the counters document.
#include "switch_control.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "switch_config.h"

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
  for (const std::vector<PortId>* ports : {&plan.entry.admitted_ports, &plan.multicast_ports}) {
    for (PortId p : *ports) {
      if (auto forbidden = tenancy_.forbids_use(who, host_resource(p))) return Reply::error(403, *forbidden);
    }
  }
  if (auto refused = control::refuse_lease(tenancy_, who, lease)) return *refused;
  // Replacing a job in place would keep its aggregators' partial sums under new roles.
  if (installed_.contains(plan.entry.job)) {
    if (auto forbidden = tenancy_.forbids_change(who, job_resource(plan.entry.job))) {
      return Reply::error(403, *forbidden);
    }
    return Reply::error(409, "job " + std::to_string(plan.entry.job) + " is already installed; remove it first");
  }
  const std::size_t entries = plan.entry.admitted_ports.size() + plan.multicast_ports.size() + plan.entry.roles.size();
  if (entries > config_.max_job_entries - installed_entries_) {
    return Reply::error(507, "job " + std::to_string(plan.entry.job) + " names " + std::to_string(entries) +
                                 " ports and roles, and the installed jobs " + std::to_string(installed_entries_) +
                                 ": more than the " + std::to_string(config_.max_job_entries) +
                                 " this switch holds; remove a job first");
  }
  dataplane_.install_job(plan.entry, multicast_group_address(plan.entry.job), plan.multicast_ports);
  installed_.emplace(plan.entry.job, entries);
  installed_entries_ += entries;
  tenancy_.claim(job_resource(plan.entry.job), who, lease);
  return ok(json{{"installed", plan.entry.job}});
}

Reply SwitchControl::uninstall_job(std::optional<std::uint64_t> id, const std::string& text, const std::string& who) {
  const auto job = static_cast<JobId>(id.value_or(0));
  if (!id || *id > 0xFFFF || !installed_.contains(job)) return Reply::error(404, "job " + text + " is not installed");
  if (auto forbidden = tenancy_.forbids_change(who, job_resource(job))) return Reply::error(403, *forbidden);
  remove_job(job);
  return ok(json{{"removed", job}});
}

// Removes job `job` (its aggregators, multicast group and owner).
void SwitchControl::remove_job(JobId job) {
  if (const auto it = installed_.find(job); it != installed_.end()) {
    installed_entries_ -= it->second;
    installed_.erase(it);
  }
  tenancy_.release(job_resource(job));
  dataplane_.remove_job(job, multicast_group_address(job));
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

Reply SwitchControl::attach_host(const SocketAddress& peer, const std::string& who, LeaseTable::Id lease) {
  const SwitchPorts& ports = dataplane_.ports();
  if (!ports.supports_hosts()) return Reply::error(400, kInterfacePortsHaveNoHosts);
  if (peer == ports.data_endpoint()) {
    return Reply::error(400, "peer: " + peer.to_string() + " is this switch's own data address, not a host's");
  }
  if (auto refused = control::refuse_lease(tenancy_, who, lease)) return *refused;
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
  if (new_address && !(address = dataplane_.free_address())) {
    return Reply::error(503, "no overlay address is left in 10.0.0.0/8 for " + peer.to_string());
  }
  PortId port = 0;
  if (known) {
    port = *known;
  } else if (!detached_ports_.empty()) {
    port = *detached_ports_.begin();  // lowest first; reset when it was detached
    detached_ports_.erase(detached_ports_.begin());
  } else if (dataplane_.port_count() >= kMaxPorts) {
    return Reply::error(503, "the switch has " + std::to_string(kMaxPorts) +
                                 " ports, the most it can have; detach one with DELETE /hosts/<port> first");
  } else {
    port = dataplane_.add_port();
  }
  if (!known) dataplane_.attach(port, peer);
  if (new_address) dataplane_.add_route(*address, port);
  if (claim) tenancy_.claim(host_resource(port), who, lease);
  const SwitchConfig& sc = config_.pipeline;
  return ok(json{{"port", port},
                 {"address", format_address(*address)},
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
  return ok(json{{"detached", p}});
}

// Port `p` (attached) loses its peer, routes and owner, and is reset.
void SwitchControl::detach(PortId p) {
  tenancy_.release(host_resource(p));
  dataplane_.detach(p);  // its datagrams now count as unknown_source
  dataplane_.remove_routes_to(p);
  dataplane_.reset_port(p);  // drops what its queues held
  detached_ports_.insert(p);
}

// ---- leases ----

void SwitchControl::remove(control::Tenancy::Resource r) {
  if (r.kind == control::Tenancy::Kind::kJob) {
    remove_job(static_cast<JobId>(r.id));
  } else if (r.id < dataplane_.port_count() && dataplane_.ports().attached(static_cast<PortId>(r.id))) {
    detach(static_cast<PortId>(r.id));  // a host: only ports that supports_hosts() have them
  }
}

void SwitchControl::expire(Time now) {
  for (const control::Tenancy::Resource r : tenancy_.expire(now)) remove(r);
}

// ---- stats ----

json SwitchControl::stats() {
  const SwitchDataplane::Totals t = dataplane_.totals();
  const SwitchPorts& ports = dataplane_.ports();
  json doc;
  doc["name"] = config_.name;
  ports.describe(doc);
  doc["threads"] = json::array();
  std::uint64_t handoff_drops = 0;
  for (const SwitchDataplane::ThreadLoad& load : t.threads) {
    doc["threads"].push_back(
        {{"packets", load.packets}, {"handed_off", load.handed_off}, {"handoff_drops", load.handoff_drops}});
    handoff_drops += load.handoff_drops;
  }
  const SwitchCounters& c = t.pipeline;
  const EthernetCounters& ethernet = t.ports.ethernet;
  doc["switch"] = {{"packets", c.packets},
                   {"malformed", c.malformed},
                   {"unknown_job", c.unknown_job},
                   {"not_admitted", c.not_admitted},
                   {"no_route", c.no_route},
                   {"too_wide", c.too_wide},
                   {"reclaimed", c.reclaimed},
                   {"unknown_source", t.ports.unknown_source},
                   {"no_port", t.no_port},
                   {"truncated", t.ports.truncated},
                   {"send_failed", t.send_failed},
                   {"handoff_drops", handoff_drops},
                   {"aggregators", config_.pipeline.atp_capable ? config_.pipeline.num_aggregators : 0},
                   {"aggregators_in_use", t.aggregators_in_use},
                   {"atp_frames", ethernet.atp_frames},
                   {"non_atp_frames", ethernet.non_atp_frames},
                   {"malformed_frames", ethernet.malformed_frames},
                   {"l2_forwarded", ethernet.l2_forwarded},
                   {"l2_flooded", ethernet.l2_flooded},
                   {"l2_same_port", ethernet.l2_same_port},
                   {"no_neighbor", ethernet.no_neighbor},
                   {"neighbor_refused", ethernet.neighbor_refused},
                   {"mac_addresses", t.ports.mac_addresses},
                   {"neighbors", t.ports.neighbors}};
  std::vector<JobId> ids;
  for (const auto& [id, counters] : t.jobs) ids.push_back(id);
  for (const auto& [id, entries] : installed_) {
    if (!t.jobs.contains(id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  doc["jobs"] = json::array();
  for (JobId id : ids) {
    const auto it = t.jobs.find(id);
    const SwitchJobCounters j = it == t.jobs.end() ? SwitchJobCounters{} : it->second;
    doc["jobs"].push_back({{"job", id},
                           {"installed", installed_.contains(id) ? 1 : 0},
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
  for (std::size_t i = 0; i < dataplane_.port_count(); ++i) {
    const auto p = static_cast<PortId>(i);
    const EgressCounters& e = t.egress[i];
    const EgressCounters& in = t.ingress[i];
    json row = {{"port", i},
                {"rx_packets", t.rx[i].rx_packets},
                {"rx_bytes", t.rx[i].rx_bytes},
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
                {"rx_kernel_drops", t.kernel_drops[i]}};
    ports.describe_port(p, row);  // "peer" or "interface"
    doc["ports"].push_back(std::move(row));
  }
  return doc;
}

}  // namespace atp::detail
