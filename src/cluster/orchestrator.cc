// The Orchestrator (orchestrator.h): plans over the topology it holds, installs on every daemon a
// plan names, keeps the leases alive on a thread of its own.
#include "atp/cluster/orchestrator.h"

#include <algorithm>
#include <future>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "atp/control/stats.h"

namespace atp {

Orchestrator::Orchestrator(Topology topology, std::uint32_t mtu_bytes)
    : topology_(std::move(topology)), mtu_bytes_(mtu_bytes) {}

Orchestrator::~Orchestrator() {
  {
    std::lock_guard lock(lease_mutex_);
    keeper_stopping_ = true;
  }
  keeper_wake_.notify_all();
  if (keeper_.joinable()) keeper_.join();
}

void Orchestrator::set_switch(const std::string& name, control::SwitchClient client) {
  if (const auto old = switches_.find(name); old != switches_.end()) {
    std::lock_guard lock(lease_mutex_);
    leases_.erase(old->second.where());  // the restarted daemon has none of its predecessor's leases
  }
  switches_.insert_or_assign(name, std::move(client));
}

void Orchestrator::set_ps(const std::string& host, control::PsClient client) {
  ps_.insert_or_assign(host, std::move(client));
}

const control::SwitchClient& Orchestrator::switch_client(const std::string& name) const {
  const auto it = switches_.find(name);
  if (it == switches_.end()) throw std::invalid_argument("the orchestrator has no client for switch '" + name + "'");
  return it->second;
}

const control::PsClient& Orchestrator::ps_client(const std::string& host) const {
  const auto it = ps_.find(host);
  if (it == ps_.end()) throw std::invalid_argument("the orchestrator has no client for the PS on '" + host + "'");
  return it->second;
}

// ---- leases

void Orchestrator::hold_leases(Duration ttl) {
  if (ttl <= Duration::zero()) throw std::invalid_argument("a lease's time to live must be positive");
  std::lock_guard lock(lease_mutex_);
  lease_ttl_ = std::clamp(ttl, LeaseTable::kMinTtl, LeaseTable::kMaxTtl);  // what the daemons grant
  keeper_stopping_ = false;
  if (!keeper_.joinable()) keeper_ = std::thread([this] { keep_leases_alive(); });
}

LeaseTable::Id Orchestrator::lease_on(const control::DaemonClient& daemon) {
  std::lock_guard lock(lease_mutex_);
  if (lease_ttl_ == Duration::zero()) return 0;
  const std::string key = daemon.where();
  if (const auto it = leases_.find(key); it != leases_.end()) return it->second.second;
  const LeaseTable::Id id = daemon.grant_lease(lease_ttl_);
  leases_.emplace(key, std::pair{daemon, id});
  return id;
}

// Every third of the time to live, one keep-alive per daemon, all at once: a daemon that hangs
// until the client's read timeout must not hold back the others' beats past their leases' end. A
// daemon that does not answer once is asked again at the next beat; one that no longer has the
// lease has removed the job, and the job's rounds fail by their own timeouts.
void Orchestrator::keep_leases_alive() {
  std::unique_lock lock(lease_mutex_);
  while (!keeper_wake_.wait_for(lock, lease_ttl_ / 3, [this] { return keeper_stopping_; })) {
    const auto leases = leases_;
    lock.unlock();  // revoke_leases() need not wait for a slow daemon's answer
    std::vector<std::future<void>> beats;
    for (const auto& [key, lease] : leases) {
      beats.push_back(std::async(std::launch::async, [&lease = lease] {
        try {
          lease.first.keep_alive(lease.second);
        } catch (const std::exception&) {
        }
      }));
    }
    for (std::future<void>& beat : beats) beat.wait();
    lock.lock();
  }
}

void Orchestrator::revoke_leases() noexcept {
  std::map<std::string, std::pair<control::DaemonClient, LeaseTable::Id>> leases;
  {
    std::lock_guard lock(lease_mutex_);
    keeper_stopping_ = true;
    lease_ttl_ = Duration::zero();
    leases.swap(leases_);
  }
  keeper_wake_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  for (const auto& [key, lease] : leases) {
    try {
      lease.first.revoke(lease.second);
    } catch (const std::exception&) {  // the daemon is gone: nothing is left to remove
    }
  }
}

// ---- topology and plans

HostAttachment Orchestrator::attach(const std::string& switch_name, const std::string& host, const SocketAddress& peer,
                                    Attach how) {
  const control::SwitchClient& sw = switch_client(switch_name);
  const control::SwitchClient::Attachment a =
      how == Attach::kShared ? sw.attach_host(peer, 0, true) : sw.attach_host(peer, lease_on(sw));
  bool known = false;
  for (const SwitchSpec& s : topology_.switches) known = known || s.name == switch_name;
  if (!known) topology_.switches.push_back({switch_name, a.tor.config});
  topology_.hosts.push_back({host, switch_name, a.host});
  network_.reset();
  return a.host;
}

std::size_t Orchestrator::discover_links() {
  std::map<std::string, control::SwitchStats> stats;  // by the orchestrator's names
  for (const auto& [name, client] : switches_) stats.emplace(name, client.stats());
  // Where a port leads: to the UDP switch whose data address is its peer, or to the interface
  // switch its config names (`switch: NAME`, the name in that switch's config).
  std::map<std::string, std::string> by_data, by_name;  // data address, config name -> switch
  for (const auto& [name, s] : stats) {
    by_name.emplace(s.name, name);
    if (!s.data) continue;
    if (const auto [other, fresh] = by_data.emplace(s.data->to_string(), name); !fresh) {
      throw PlanError("switches '" + other->second + "' and '" + name + "' have the same data address " +
                      s.data->to_string() + ": they are one switch");
    }
  }
  for (const auto& [name, s] : stats) {
    const bool known = std::any_of(topology_.switches.begin(), topology_.switches.end(),
                                   [&name = name](const SwitchSpec& k) { return k.name == name; });
    if (known) continue;
    SwitchConfig config;
    config.atp_capable = s.aggregators > 0;
    if (config.atp_capable) {
      config.num_aggregators = static_cast<std::uint32_t>(s.aggregators);
      config.aggregator_width = static_cast<std::uint16_t>(s.aggregator_width);
    }
    topology_.switches.push_back({name, config});
  }
  std::map<std::pair<std::string, std::string>, PortId> port_to;  // (switch, neighbour) -> its port there
  for (const auto& [name, s] : stats) {
    for (const control::SwitchPortStats& port : s.ports) {
      const std::map<std::string, std::string>& index = port.peer ? by_data : by_name;
      const auto neighbour = index.find(port.peer ? port.peer->to_string() : port.neighbour);
      if (neighbour == index.end() || neighbour->second == name) continue;  // a host, or a switch outside
      if (const auto [other, fresh] = port_to.emplace(std::pair{name, neighbour->second}, port.port); !fresh) {
        throw PlanError("switch '" + name + "' has two ports to switch '" + neighbour->second + "' (" +
                        std::to_string(other->second) + " and " + std::to_string(port.port) +
                        "); two switches are linked at most once");
      }
    }
  }
  std::erase_if(topology_.switch_links,
                [&](const SwitchLink& l) { return stats.contains(l.a) && stats.contains(l.b); });
  std::size_t found = 0;
  for (const auto& [ends, port] : port_to) {
    const auto& [a, b] = ends;
    const auto back = port_to.find({b, a});
    if (back == port_to.end()) {
      const control::SwitchStats& from = stats.at(a);
      throw PlanError("port " + std::to_string(port) + " of switch '" + a + "' leads to switch '" + b + "', but '" + b +
                      "' has no port back (no port of its config has " +
                      (from.data ? "peer: " + from.data->to_string() : "switch: " + from.name) + ")");
    }
    if (a < b) {
      topology_.switch_links.push_back({a, b, std::pair{port, back->second}});
      ++found;
    }
  }
  network_.reset();
  return found;
}

const NetworkPlan& Orchestrator::network() {
  if (!network_) {
    network_ = std::make_unique<NetworkPlan>(plan_network(topology_));
    network_->mtu_bytes = mtu_bytes_;
  }
  return *network_;
}

EndpointJobPlan Orchestrator::plan(const Protocol& protocol, const JobSpec& spec) {
  return protocol.plan(network(), spec);
}

control::Install Orchestrator::install(const EndpointJobPlan& plan) {
  if (plan.workers.empty()) throw std::invalid_argument("a job plan with no workers");
  return install(plan.job, plan.switches, plan.ps);
}

control::Install Orchestrator::install(JobId id, const std::map<std::string, SwitchJobPlan>& switches,
                                       const std::vector<PsConfig>& ps) {
  // Clients first, so that a missing one installs nothing.
  std::vector<std::pair<const control::SwitchClient*, const SwitchJobPlan*>> on_switches;
  for (const auto& [name, part] : switches) on_switches.emplace_back(&switch_client(name), &part);
  std::vector<std::pair<const control::PsClient*, const PsConfig*>> on_ps;
  for (const PsConfig& part : ps) {
    const auto host = network().host_by_address.find(part.self);
    if (host == network().host_by_address.end()) throw std::invalid_argument("a PS outside the topology");
    on_ps.emplace_back(&ps_client(host->second), &part);
  }
  // The daemons asked so far: each installed its part, or did not answer (and may have).
  std::vector<const control::DaemonClient*> done;
  auto undo = [&]() noexcept {
    for (const control::DaemonClient* d : done) {
      try {
        d->remove_job(id);
      } catch (const std::exception&) {
      }
    }
  };
  // One daemon's part: false when the id is taken there.
  auto install_on = [&](const control::DaemonClient& client, auto&& install_job) {
    const LeaseTable::Id lease = lease_on(client);
    try {
      if (install_job(lease) == control::Install::kIdTaken) return false;
    } catch (const control::DaemonError& e) {
      if (e.status() == 0) done.push_back(&client);  // no answer: it may have installed it
      throw;
    }
    done.push_back(&client);
    return true;
  };
  try {
    for (const auto& [client, part] : on_switches) {
      if (!install_on(*client, [&](LeaseTable::Id lease) { return client->install_job(*part, lease); })) {
        undo();
        return control::Install::kIdTaken;
      }
    }
    for (const auto& [client, part] : on_ps) {
      if (!install_on(*client, [&](LeaseTable::Id lease) { return client->install_job(*part, lease); })) {
        undo();
        return control::Install::kIdTaken;
      }
    }
  } catch (...) {
    undo();
    throw;
  }
  installed_.insert_or_assign(id, switches);
  return control::Install::kInstalled;
}

EndpointJobPlan Orchestrator::install_with_free_id(const Protocol& protocol, JobSpec spec, int attempts) {
  std::mt19937 random{std::random_device{}()};
  for (int attempt = 0; attempt < attempts; ++attempt) {
    spec.id = static_cast<JobId>(1 + random() % 0xFFFE);
    EndpointJobPlan p = plan(protocol, spec);
    if (install(p) == control::Install::kInstalled) return p;
  }
  throw control::DaemonError(
      "no free job id after " + std::to_string(attempts) + " tries: the switches or PSes have too many jobs installed",
      0);
}

void Orchestrator::reinstall(const std::string& name) {
  const control::SwitchClient& sw = switch_client(name);
  for (const auto& [id, parts] : installed_) {
    const auto part = parts.find(name);
    if (part == parts.end()) continue;
    if (sw.install_job(part->second, lease_on(sw)) == control::Install::kIdTaken) {
      throw control::DaemonError(sw.who() + " has job " + std::to_string(id) + " already", 409);
    }
  }
}

void Orchestrator::remove_from_switches(JobId id) {
  const auto job = installed_.find(id);
  if (job == installed_.end()) return;
  const std::map<std::string, SwitchJobPlan> parts = std::move(job->second);
  installed_.erase(job);
  for (const auto& [name, part] : parts) {
    try {
      switch_client(name).remove_job(id);
    } catch (const control::DaemonError& e) {
      if (e.status() != 0) throw;
    }
  }
}

}  // namespace atp
