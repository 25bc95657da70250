// The software ATP switch process (`atp switch`): SwitchPipeline on UDP peers or Linux interfaces
// as ports, per-port egress (and optional ingress) queues, an EventLoop, an HTTP control plane.
// An adapter, no protocol logic.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "atp/control/control_auth.h"
#include "atp/control/stats.h"
#include "atp/control/switch_config.h"
#include "atp/io/egress_queue.h"
#include "atp/io/packet_socket.h"
#include "atp/io/udp_socket.h"
#include "atp/switch.h"

namespace atp {

// The daemon's configuration and its file are the control layer's (control/switch_config.h), so
// that the process runner writes with the codec the daemon reads with.
using control::load_switch_config;
using control::parse_switch_config;
using control::SwitchConfigError;
using control::SwitchDaemonConfig;
using control::SwitchPortConfig;

// The switch process's reusable part. The constructor binds the data socket (or opens every
// interface port's packet socket, in the calling thread's network namespace) and the control
// endpoint (throws UdpSetupError, PacketSetupError naming the interface, or std::runtime_error
// naming the control address, when one is in use; SwitchConfigError for a config
// parse_switch_config would refuse for its size); start() runs the dataplane and the control
// plane on their own threads; stop() (or the destructor) ends both. The pipeline is only ever
// touched by the dataplane thread.
//
// Control plane (HTTP, control::make_server: a bearer token on every request (401 without one the
// daemon knows: config.access), request bodies of at most 1 MiB, every error a status and
// {"error": "one sentence"}, slow clients bounded by control::ServerLimits). Each job and
// attached host belongs to the tenant that installed it (control::Tenancy): another tenant's
// request to change or name it is 403, the operator's token may do anything.
//   POST /jobs       body: control::to_json(SwitchJobPlan); installs the job and its multicast group,
//                    and the routes it names that the switch lacks (they go with the last job
//                    naming them). 400 names a bad field, a port the switch does not have, or a
//                    route to a destination the switch routes to another port; 409 when the job is
//                    already installed ("job N is already installed; remove it first"); 507 when
//                    it would take the installed jobs past SwitchDaemonConfig::max_job_entries;
//                    403 when it names another tenant's host or is another tenant's job.
//                    ?lease=ID hangs it on a lease (control.h, "leases").
//   DELETE /jobs/<id>  removes the job (freeing its aggregators) and its multicast group.
//   PUT /ports/<i>   body: control::to_json(control::PortSettings); replaces port i's egress and/or
//                    ingress settings for packets enqueued from then on (creating the ingress queue
//                    if the port had none) and answers the port's settings now in force, same shape.
//                    The way to apply a scenario's time-windowed faults (from_us/until_us) to a
//                    running switch (`atp run --backend loopback`): one PUT at each window's start and
//                    end. 400 names a bad field, 404 a port the switch does not have; 403 for a
//                    tenant (a link's settings are the operator's).
//   POST /hosts      body: {"peer": "127.0.0.1:40001"}; attaches a UDP peer (a worker or PS process
//                    on an ephemeral port) to the running switch and answers
//                      {"port": P, "address": "10.0.0.7", "switch": {"name": "s0", "atp_capable": true,
//                       "aggregators": 4096, "aggregator_width": 4096}}.
//                    A peer that already is a port's peer gets that port again (idempotent). Else it
//                    takes the lowest detached port, or a new port (unlimited egress, no ingress
//                    queue, counters zero); at most 65536 ports (then 503). Its overlay address is
//                    the lowest of 10.0.0.1 upwards that no route has (a port that has routes: the
//                    lowest of them), and a route to the port is installed. 400 names a bad field;
//                    a switch on interface ports answers 400 (hosts are attached by cable there);
//                    403 for another tenant's peer (the operator's is answered, not taken over).
//                    ?lease=ID hangs the port on a lease. ?shared=1 attaches a peer many tenants'
//                    jobs use (a PS): the port is then the operator's, so any tenant may name it
//                    in a job and only the operator detaches it; shared and a lease together
//                    are 400, and another tenant's own port is not made shared (403).
//   DELETE /hosts/<port>  detaches a UDP port (attached or configured): its peer's datagrams then
//                    count as unknown_source, every route to the port is removed, its queues are
//                    reset (held packets dropped, default settings, counters zero) and sends to it
//                    count as no_port until POST /hosts reuses it. Jobs and multicast groups naming
//                    the port are left as they are. Answers {"detached": P}; 404 for a port the
//                    switch does not have or one already detached.
//   POST /leases, POST /leases/<id>/keepalive, DELETE /leases/<id>: control::add_lease_routes.
//   GET /metrics     Prometheus text (no token needed with access.metrics_open); GET /stats:
//                    JSON, the same counters (per port: egress counters, and ingress_* for the
//                    ingress queue, zero when the port has none;
//                    per switch also the Ethernet counters of interface ports, zero on UDP ports;
//                    a detached port's "peer" is "").
class SwitchDaemon {
 public:
  explicit SwitchDaemon(SwitchDaemonConfig config);
  ~SwitchDaemon();
  SwitchDaemon(const SwitchDaemon&) = delete;
  SwitchDaemon& operator=(const SwitchDaemon&) = delete;

  void start();
  void stop();  // idempotent; not from a signal handler (block signals and sigwait instead)

  // As started: PUT /ports and POST/DELETE /hosts change the queues, peers and routes, not this.
  const SwitchDaemonConfig& config() const;
  // Where hosts and peer switches send (kernel port resolved); {0, 0} on interface ports.
  SocketAddress data_endpoint() const;
  std::string control_endpoint() const;  // "host:port" of the HTTP control plane

  // Answers one control request given as the bytes an HTTP client sends, as the control plane
  // would over a connection (control::answer_request), and returns the answer's bytes. Before
  // start() the request runs on the calling thread. For the fuzzer and tests.
  std::string answer_control_request(std::string_view request);

  // The counters (what GET /stats and GET /metrics answer), and as JSON. Run on the dataplane
  // thread when started; throw std::runtime_error if it does not answer within a second.
  control::SwitchStats stats();
  std::string stats_json();
  // How many dataplane threads it runs (SwitchDaemonConfig::threads, or what 0 chose).
  std::uint32_t dataplane_threads() const;
  // CPU time (s) the dataplane threads have used since start(), all together; 0 when they are not
  // running. What `atp bench` divides packets by for a per-core rate.
  double dataplane_cpu_seconds();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
