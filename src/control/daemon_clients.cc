// The daemons' typed control clients (daemon_clients.h): one request per call, answers read with
// control.h's codecs or strictly by key, every failure one DaemonError sentence.
#include "atp/control/daemon_clients.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "atp/control/json_fields.h"
#include "atp/io/netns.h"

namespace atp::control {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";

}  // namespace

DaemonClient::DaemonClient(std::string who, SocketAddress control, ClientAccess access, std::string netns)
    : who_(std::move(who)), control_(control), access_(std::move(access)), netns_(std::move(netns)) {}

std::string DaemonClient::lease_query(LeaseTable::Id lease) {
  return lease == 0 ? "" : "?lease=" + std::to_string(lease);
}

DaemonClient::Answer DaemonClient::send(const char* method, const std::string& path, const std::string& body) const {
  // A daemon in a namespace listens on that namespace's 127.0.0.1: the connection is made from
  // there (the thread enters it for the request, and leaves it after).
  std::optional<netns::ThreadInNamespace> in;
  if (!netns_.empty()) in.emplace(netns_);
  httplib::Client c = client(control_, access_);
  const std::string m = method;
  httplib::Result r = m == "GET"    ? c.Get(path)
                      : m == "POST" ? c.Post(path, body, kJson)
                      : m == "PUT"  ? c.Put(path, body, kJson)
                                    : c.Delete(path);
  if (!r) {
    // What to look at: the daemon for a refused or timed-out connection, this side's TLS
    // settings for a certificate that could not be loaded or was not accepted.
    const httplib::Error e = r.error();
    const char* hint = e == httplib::Error::SSLLoadingCerts ? "can the CA file be read?"
                       : e == httplib::Error::SSLConnection || e == httplib::Error::SSLServerVerification
                           ? "does the daemon serve TLS, with a certificate that the CA signed?"
                           : "is the daemon running there?";
    return {0, "(" + httplib::to_string(e) + "): " + hint};
  }
  return {r->status, r->body};
}

DaemonError DaemonClient::error(const Answer& answer, const char* method, const std::string& path,
                                const std::string& what) const {
  if (answer.status == 0) {
    return DaemonError(who_ + " did not answer " + method + (access_.tls_ca.empty() ? " http://" : " https://") +
                           control_.to_string() + path + " " + answer.body,
                       0);
  }
  // The daemons answer every error with {"error": "one sentence"}; anything else is quoted.
  const json body = json::parse(answer.body, nullptr, false);
  const std::string said = body.is_object() && body.contains("error") && body["error"].is_string()
                               ? body["error"].get<std::string>()
                               : "HTTP " + std::to_string(answer.status) + " " + excerpt(answer.body);
  return DaemonError(who_ + " refused to " + what + ": " + said, answer.status);
}

json DaemonClient::call(const char* method, const std::string& path, const std::string& what,
                        const std::string& body) const {
  const Answer answer = send(method, path, body);
  if (answer.status / 100 != 2) throw error(answer, method, path, what);
  json doc = json::parse(answer.body, nullptr, false);
  if (doc.is_discarded()) {
    throw DaemonError(who_ + " answered " + method + " " + path + " with no JSON: " + excerpt(answer.body), 0);
  }
  return doc;
}

LeaseTable::Id DaemonClient::grant_lease(Duration ttl) const {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count();
  const json reply = call("POST", "/leases", "grant a lease", json{{"ttl_ms", ms}}.dump());
  // Lease 0 is "no lease" to every caller (lease_query): a daemon's grant of it is no grant.
  if (!reply.contains("lease") || !reply["lease"].is_number_unsigned() || reply["lease"].get<LeaseTable::Id>() == 0) {
    throw DaemonError(who_ + " answered POST /leases with " + excerpt(reply.dump()) + ", which names no lease", 0);
  }
  return reply["lease"].get<LeaseTable::Id>();
}

void DaemonClient::keep_alive(LeaseTable::Id lease) const {
  call("POST", "/leases/" + std::to_string(lease) + "/keepalive", "keep lease " + std::to_string(lease) + " alive");
}

void DaemonClient::revoke(LeaseTable::Id lease) const {
  call("DELETE", "/leases/" + std::to_string(lease), "revoke lease " + std::to_string(lease));
}

SwitchStats SwitchClient::stats() const { return stats_with(switch_stats_from_json); }

SocketAddress SwitchClient::data_address() const {
  if (const std::optional<SocketAddress> data = stats().data) return *data;
  throw DaemonError(who() + " has interface ports: hosts are attached to it by cable, not at a UDP data address", 0);
}

PsStats PsClient::stats() const { return stats_with(ps_stats_from_json); }

SocketAddress PsClient::data_address() const { return stats().data; }

SwitchClient::Attachment SwitchClient::attach_host(const SocketAddress& peer, LeaseTable::Id lease, bool shared) const {
  const std::string what = "attach host " + peer.to_string();
  const std::string path = shared ? "/hosts?shared=1" : "/hosts" + lease_query(lease);
  const json reply = call("POST", path, what, host_to_json(peer));
  try {
    Attachment a;
    a.host.address = get_address(reply, "", "address");
    a.host.port = get_unsigned<PortId>(reply, "", "port");
    const json& sw = get_object(reply, "", "switch");
    a.tor.name = get_string(sw, "switch.", "name");
    a.tor.config.atp_capable = get_bool(sw, "switch.", "atp_capable");
    a.tor.config.num_aggregators = get_unsigned<std::uint32_t>(sw, "switch.", "aggregators");
    a.tor.config.aggregator_width = get_unsigned<std::uint16_t>(sw, "switch.", "aggregator_width");
    return a;
  } catch (const ControlError& e) {
    throw DaemonError(who() + " answered POST /hosts with " + excerpt(reply.dump(), 200) + ": " + e.what(), 0);
  }
}

void SwitchClient::detach_host(PortId port) const {
  call("DELETE", "/hosts/" + std::to_string(port), "detach port " + std::to_string(port));
}

Install DaemonClient::install(JobId job, const std::string& body, LeaseTable::Id lease) const {
  const std::string path = "/jobs" + lease_query(lease);
  const Answer answer = send("POST", path, body);
  if (answer.status == 409) return Install::kIdTaken;  // 403 (a port or lease not ours) is a refusal
  if (answer.status / 100 != 2) throw error(answer, "POST", path, "install job " + std::to_string(job));
  return Install::kInstalled;
}

void DaemonClient::remove_job(JobId job) const {
  call("DELETE", "/jobs/" + std::to_string(job), "remove job " + std::to_string(job));
}

Install SwitchClient::install_job(const SwitchJobPlan& plan, LeaseTable::Id lease) const {
  return install(plan.entry.job, to_json(plan), lease);
}

void SwitchClient::set_port(PortId port, const PortSettings& settings) const {
  call("PUT", "/ports/" + std::to_string(port), "change port " + std::to_string(port) + "'s settings",
       to_json(settings));
}

Install PsClient::install_job(const PsConfig& config, LeaseTable::Id lease) const {
  return install(config.job, to_json(config), lease);
}

}  // namespace atp::control
