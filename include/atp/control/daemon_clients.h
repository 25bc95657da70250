// Typed clients of the daemons' control planes: one method per route of `atp switch` and `atp ps`
// (switch_daemon.h, ps_daemon.h), with the request bodies and answers in control.h's codecs. What
// the orchestrator (cluster/orchestrator.h), the process backends and ClusterJob talk to daemons
// with; no caller builds a path, a body or an error sentence of its own.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>

#include "atp/control/control.h"
#include "atp/control/control_client.h"
#include "atp/control/lease_table.h"
#include "atp/control/stats.h"
#include "atp/io/socket_address.h"
#include "atp/plan/plan.h"

namespace atp::control {

// A request that a daemon did not answer, or answered with an error. what() is one sentence that
// names the daemon and what was asked, then the daemon's own error sentence (or why no answer
// came); status() is the HTTP status, 0 when no answer came.
class DaemonError : public std::runtime_error {
 public:
  DaemonError(const std::string& what, int status) : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// What POST /jobs did: installed the job, or nothing because its id is taken on that daemon
// (409, by whichever tenant), so that the caller may pick another id. Any other refusal (403: a
// port or lease of another tenant's) is a DaemonError with the daemon's sentence.
enum class Install { kInstalled, kIdTaken };

// One daemon's control plane: its address, how to reach it (ClientAccess), and the network
// namespace to send from when its address is a namespace's own loopback (a path such as
// /var/run/netns/NAME; "" for this thread's namespace). Copyable; every request is a new
// connection (the daemons serve one request per connection), bounded by control_client.h's
// timeouts, so no call hangs.
class DaemonClient {
 public:
  // `who` names the daemon in error sentences: "switch 'tor0'", "the PS at 127.0.0.1:40123".
  DaemonClient(std::string who, SocketAddress control, ClientAccess access, std::string netns = "");

  const std::string& who() const { return who_; }
  const SocketAddress& control() const { return control_; }
  // Where its requests go: the namespace and the control address. Two daemons in two namespaces
  // may have the same address (each its own 127.0.0.1): this tells them apart.
  std::string where() const { return netns_ + " " + control_.to_string(); }

  // Leases (tenancy.h's routes, the same on both daemons): what a request installs with
  // `lease` != 0 hangs on it and goes when it expires or is revoked.
  LeaseTable::Id grant_lease(Duration ttl) const;  // the daemon clamps ttl to [1 s, 1 h]
  void keep_alive(LeaseTable::Id lease) const;
  void revoke(LeaseTable::Id lease) const;

  // DELETE /jobs/<job> (both daemons).
  void remove_job(JobId job) const;

 protected:
  struct Answer {
    int status = 0;    // 0: no answer
    std::string body;  // the answer's body, or why none came ("(Connection): is the daemon running there?")
  };
  // Sends one request (method "GET", "POST", "PUT" or "DELETE"), from the client's namespace.
  Answer send(const char* method, const std::string& path, const std::string& body = "") const;
  // send(), and the answer's body parsed as JSON when the status is 2xx; else DaemonError:
  // "<who> refused to <what>: <its error>", or "<who> did not answer GET http://.../stats
  // (Connection): is the daemon running there?".
  nlohmann::json call(const char* method, const std::string& path, const std::string& what,
                      const std::string& body = "") const;
  // The DaemonError for an answer that is not 2xx.
  DaemonError error(const Answer& answer, const char* method, const std::string& path, const std::string& what) const;
  // POST /jobs with `body` (the daemon's part of job `job`'s plan), on `lease` (0: none).
  Install install(JobId job, const std::string& body, LeaseTable::Id lease) const;
  // "?lease=ID" for a lease, "" for none.
  static std::string lease_query(LeaseTable::Id lease);
  // GET /stats' document read with `read` (its stats.h codec). A document that does not read is
  // a ControlError naming the daemon: it is of another build of atp (a renamed counter).
  template <class Read>
  auto stats_with(Read read) const -> decltype(read(std::string())) {
    const std::string path = "/stats";
    const Answer answer = send("GET", path);
    if (answer.status / 100 != 2) throw error(answer, "GET", path, "report its stats");
    try {
      return read(answer.body);
    } catch (const ControlError& e) {
      throw ControlError(who_ + " answered GET /stats with a document this atp cannot read (" + std::string(e.what()) +
                         "): is it an atp daemon of another build?");
    }
  }

 private:
  std::string who_;
  SocketAddress control_;
  ClientAccess access_;
  std::string netns_;
};

// `atp switch`'s control plane.
class SwitchClient : public DaemonClient {
 public:
  using DaemonClient::DaemonClient;

  // A host attached at run time (POST /hosts): its overlay address and port, and the switch as
  // its answer describes it (name, whether it aggregates, its table).
  struct Attachment {
    HostAttachment host;
    SwitchSpec tor;
  };
  // `shared`: a peer every tenant's jobs may name (a PS), the operator's from then on
  // (POST /hosts?shared=1); it hangs on no lease.
  Attachment attach_host(const SocketAddress& peer, LeaseTable::Id lease = 0, bool shared = false) const;
  // DELETE /hosts/<port>: the port loses its peer (a host's, or a linked switch's from the config),
  // its routes and its owner, and is reused by the next attach_host. Throws DaemonError.
  void detach_host(PortId port) const;

  Install install_job(const SwitchJobPlan& plan, LeaseTable::Id lease = 0) const;
  void set_port(PortId port, const PortSettings& settings) const;

  // GET /stats (stats_with's errors).
  SwitchStats stats() const;
  // Its UDP data address ("data" in GET /stats): where hosts and peer switches send. A switch on
  // interface ports has none: DaemonError.
  SocketAddress data_address() const;
};

// `atp ps`'s control plane.
class PsClient : public DaemonClient {
 public:
  using DaemonClient::DaemonClient;

  Install install_job(const PsConfig& config, LeaseTable::Id lease = 0) const;

  // GET /stats (stats_with's errors).
  PsStats stats() const;
  // Its UDP data address ("data" in GET /stats): what the job's switch attaches.
  SocketAddress data_address() const;
};

}  // namespace atp::control
