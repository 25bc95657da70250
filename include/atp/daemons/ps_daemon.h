// The `atp ps` daemon: one PsEndpoint per installed job on a UDP socket and an event-loop thread,
// with an HTTP control plane (install/remove jobs, metrics). An adapter: no protocol logic here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "atp/control/control_auth.h"
#include "atp/control/stats.h"
#include "atp/io/udp_socket.h"
#include "atp/ps.h"
#include "atp/wire.h"

namespace atp {

struct PsDaemonConfig {
  SocketAddress data;         // UDP bind address of the data plane; port 0: the kernel picks one
  SocketAddress control;      // HTTP bind address of the control plane; port 0: the kernel picks one
  bool serve_control = true;  // false: no HTTP server (jobs only through the C++ API)
  // Every packet any endpoint sends goes here: the PS host's ToR switch (or, in tests without a
  // switch, anything that forwards by the ATP header's dst). The data socket is connected to it,
  // so the PS accepts datagrams from the uplink only: another process on the host cannot inject
  // gradients. nullopt: each packet goes to its ATP destination's IP at kUdpPort (the job's
  // multicast group for parameter packets), for networks where the overlay addresses are the
  // hosts' IPs; the socket then accepts datagrams from any address, as its peers are many hosts.
  std::optional<SocketAddress> uplink;
  // The PS host's overlay address (10.0.0.x). 0: accept jobs whatever their PsConfig::self;
  // else a job whose self differs is refused, so a job meant for another PS is not installed here.
  Address address = 0;
  // The most jobs installed at once (each holds a PsEndpoint, up to its per-job memory budget):
  // what POST /jobs can make the PS hold is bounded by this, not by 65536 job ids. One more is
  // refused (PsJobError, 409).
  std::size_t max_jobs = 1024;
  control::AccessConfig access;  // who may use the control plane (control_auth.h)
};

// A job that cannot be installed (already installed, or meant for another PS address), or that
// the endpoint refused (PsJobRefused): what() is one sentence.
class PsJobError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A job whose configuration PsEndpoint's constructor refused (std::invalid_argument, e.g. a
// worst-case memory over its per-job budget) or that does not fit in memory: "job 3: <why>".
// POST /jobs answers it 400, where other PsJobErrors are 409 (a conflict with what is installed).
class PsJobRefused : public PsJobError {
 public:
  using PsJobError::PsJobError;
};

// Threads: start() runs the data plane on its own event-loop thread and the HTTP server on
// another. Every public method is thread-safe; the endpoints are only touched by the loop
// thread (API calls are handed over through a queue and wait for the answer; HTTP requests
// wait at most 5 s, then answer 503).
//
// Control plane (HTTP, control::make_server: a bearer token on every request (401 without one the
// daemon knows: config.access), request bodies of at most 1 MiB, every error a status and
// {"error": "one sentence"}, slow clients bounded by control::ServerLimits). A job belongs to the
// tenant that installed it; the operator's token may do anything:
//   POST /jobs       body: control::to_json(PsConfig); 201 {"installed": id}. 400 names a bad
//                    field, or is the endpoint's refusal (PsJobRefused); 409 for a job already
//                    installed, one meant for another PS address, one past max_jobs, or one
//                    whose ps_job_memory_bound with the installed jobs' exceeds the machine's
//                    memory; 403 for another tenant's job. ?lease=ID hangs it on a lease.
//   DELETE /jobs/<id>  200 {"removed": id}; 404 when it is not installed; 403 when another's.
//   POST /leases, POST /leases/<id>/keepalive, DELETE /leases/<id>: control::add_lease_routes.
//   GET /metrics     Prometheus text; GET /stats: JSON (the data endpoint, daemon and job counters).
class PsDaemon {
 public:
  // Binds the UDP socket and the HTTP port now, so the endpoints are known before start().
  // Throws UdpSetupError or std::runtime_error ("cannot bind HTTP 127.0.0.1:80: ...").
  explicit PsDaemon(const PsDaemonConfig& config);
  ~PsDaemon();  // stop()
  PsDaemon(const PsDaemon&) = delete;
  PsDaemon& operator=(const PsDaemon&) = delete;

  void start();  // starts the threads; once
  void stop();   // stops and joins them; idempotent, safe without start()

  SocketAddress data_endpoint() const;
  SocketAddress control_endpoint() const;  // port 0 if serve_control is false

  // Installs a job (throws PsJobError, PsJobRefused) / removes it (false if it was not installed).
  void add_job(const PsConfig& config);
  bool remove_job(JobId job);
  control::PsStats stats() const;

  // stats() as GET /metrics and GET /stats answer it.
  std::string metrics_text() const;  // Prometheus text format
  std::string stats_json() const;

  // Answers one control request given as the bytes an HTTP client sends, as the control plane
  // would over a connection (control::answer_request), and returns the answer's bytes. Before
  // start() the request runs on the calling thread. For the fuzzer and tests; throws
  // std::logic_error when serve_control is false.
  std::string answer_control_request(std::string_view request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
