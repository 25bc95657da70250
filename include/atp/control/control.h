// Messages of the daemons' HTTP control plane, as JSON: what `atp run --backend loopback` (or a user)
// sends a switch or PS to install a job or change a switch port. One codec for both sides, and
// the one HTTP server both daemons serve them with (its limits against bad and slow clients).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "atp/control/control_auth.h"
#include "atp/control/tenancy.h"
#include "atp/io/egress_fields.h"
#include "atp/io/egress_queue.h"
#include "atp/io/socket_address.h"
#include "atp/plan/plan.h"

namespace httplib {
class Server;
struct Request;
}  // namespace httplib

namespace atp::control {

// A control message that does not parse or names impossible values: what() is one sentence
// naming the field ("roles[0].children[1].fan_in: must be 1..32, got 40").
class ControlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Control messages are small (a job plan naming 1,000 ports is about 10 KB): a larger request
// body is refused (HTTP 413) before it is read.
inline constexpr std::size_t kMaxBodyBytes = std::size_t{1} << 20;
// The deepest a control message nests ({"roles": [{"ps": ...}]} is 3). Every *_from_json below
// refuses a deeper document before building it ("body nests deeper than 32 levels"), so that
// nothing recurses once per level of an attacker's nesting.
inline constexpr int kMaxJsonDepth = 32;

// `text` for an error message: whole if it is short, else its first bytes (cut at a UTF-8
// character boundary) and "...". A bad value in a request may be a megabyte long.
std::string excerpt(std::string_view text, std::size_t max_bytes = 64);

// Overlay host addresses are written as dotted quads ("10.0.0.1", format_address in wire.h).
// Throws ControlError naming `field` if `text` is not a dotted quad.
Address parse_address(const std::string& text, const std::string& field = "address");

// A switch's part of a job plan: admission, roles and the job's multicast ports. The job id is
// plan.entry.job. Shape:
//   {"job": 1, "admitted_ports": [0, 1], "roles": [{"ps": "10.0.0.3", "node": 1, "children":
//    [{"node": 2, "fan_in": 1}, {"node": 3, "fan_in": 1}]}], "multicast_ports": [0, 1]}
std::string to_json(const SwitchJobPlan& plan);
SwitchJobPlan switch_job_from_json(const std::string& text);  // throws ControlError

// A PS's part of a job plan. Shape:
//   {"job": 1, "self": "10.0.0.3", "multicast_group": "224.0.0.1", "tree": [0, 0, 1, 1],
//    "workers": ["10.0.0.1", "10.0.0.2"], "values_per_packet": 62, "first_aggregator": 0, "num_aggregators": 4096,
//    "max_window_seqs": 1024, "index": "allocated"}
// first_aggregator and num_aggregators are PsConfig::aggregators (the job's index range). Every
// key is required when parsing except values_per_packet, first_aggregator, num_aggregators,
// max_window_seqs and index (PsConfig's defaults); unknown keys are errors.
std::string to_json(const PsConfig& config);
PsConfig ps_job_from_json(const std::string& text);  // throws ControlError

// A host to attach to a switch at run time (the switch's POST /hosts): its UDP address. Shape:
//   {"peer": "127.0.0.1:40001"}
// Neither the IP nor the port may be 0; unknown keys are errors.
std::string host_to_json(const SocketAddress& peer);
SocketAddress host_from_json(const std::string& text);  // throws ControlError

// A switch port's rate limit, buffer, ECN threshold and faults at run time (PUT /ports/<i>). A
// present direction replaces that direction's settings for packets enqueued from then on; an
// absent one is left as it is. Shape (every key of a present direction is required):
//   {"egress": {"rate_gbps": 10, "buffer_packets": 64, "ecn_threshold_packets": 16, "delay_us": 5,
//               "loss": 0.01, "duplicate": 0, "reorder": 0},
//    "ingress": {...the same keys...}}
// The keys, their units and bounds are kEgressFields' (io/egress_fields.h), as in the switch config
// file and a scenario's links; delay_us may have a fraction (to the nanosecond).
struct PortSettings {
  std::optional<EgressConfig> egress;   // switch -> peer
  std::optional<EgressConfig> ingress;  // peer -> switch
};
std::string to_json(const PortSettings& settings);
PortSettings port_settings_from_json(const std::string& text);  // throws ControlError

// ---- the daemons' HTTP server ----------------------------------------------------------------

// How a control server treats its clients. The defaults are what the daemons use; tests shrink
// the times.
struct ServerLimits {
  // Connections served at once, one thread each (started as connections come, up to this many).
  std::size_t workers = 32;
  // Accepted connections waiting for a thread; one more is answered 503 at once and closed.
  std::size_t queued_connections = 128;
  // A request must arrive whole (request line, headers and body) within this much time of its
  // connection being taken up, and the answer must be written within as much again; else the
  // connection is closed. Bounds what one slow client costs whatever it trickles.
  std::chrono::milliseconds request_deadline{5000};
  // A request still arriving (or an answer still being written) after this long gives its
  // thread up when other connections wait for one: slow clients cannot starve the others.
  std::chrono::milliseconds slow_request{1000};
};

// Who may use a control server: the holders of a token its Authenticator knows (the operator's
// and the tenants'), and anyone for GET /metrics when metrics_open.
struct ServerAccess {
  std::shared_ptr<const Authenticator> authenticator;  // required
  // GET /metrics without a token, for a Prometheus scraper the operator lets in. Off by default:
  // the counters name every job and port.
  bool metrics_open = false;
  // TLS: the server's certificate (chain) and its private key, PEM files, both or neither. Set,
  // every connection starts with a TLS handshake (under ServerLimits' deadlines, as a request)
  // and nothing is served in clear. make_server reads them: a file that is missing, unreadable or
  // not PEM, a key with a passphrase, or a key that is not the certificate's is an AuthError
  // naming the file.
  std::string tls_cert_file{};
  std::string tls_key_file{};
};

// The ServerAccess for `config` (throws AuthError for a bad token).
ServerAccess server_access(const AccessConfig& config);

// An HTTP server for a daemon's control plane (cpp-httplib), for every route the daemon then
// adds. Beyond httplib's defaults it:
// - answers 401 (with WWW-Authenticate: Bearer) every request without "Authorization: Bearer T"
//   for a token T that access.authenticator knows, before its route runs or its body is read
//   (except GET /metrics when access.metrics_open); a route gets the requester's name from
//   requester();
// - speaks TLS on every connection when access names a certificate and key (a client over plain
//   HTTP gets no answer; answer_request stays plain);
// - serves one request per connection (the answer says Connection: close), under
//   ServerLimits' deadlines and thread bounds, on a socket with SO_REUSEADDR but not
//   SO_REUSEPORT (a second daemon on a control port in use fails to bind);
// - refuses, before reading a body: one over kMaxBodyBytes, or over 8192 bytes as a form
//   (application/x-www-form-urlencoded, which httplib parses) (413), a POST/PUT without
//   Content-Length or with chunked transfer encoding (411), a compressed one (415);
// - listens with a backlog of SOMAXCONN (httplib's 5 drops a burst's SYNs for a second);
// - answers every error with a JSON body {"error": "one sentence"}: httplib's own (400 for a
//   malformed request, 404 for an unknown route, ...) and, as a last resort, 500 for an
//   exception a route handler let through.
// A route handler gets a body of at most kMaxBodyBytes.
std::unique_ptr<httplib::Server> make_server(ServerAccess access, const ServerLimits& limits = {});

// Binds `server` (from make_server) to `ip`:`port`, 0 meaning a port the kernel chooses, and
// returns the port bound, or -1 when it cannot be bound (errno says why). Before the thread that
// runs listen_after_bind() starts.
int bind_server(httplib::Server& server, const std::string& ip, int port);

// The name of who sent `request` to `server` (from make_server): Authenticator::kOperator or a
// tenant's; "" for a request let in without a token (GET /metrics when open).
std::string requester(const httplib::Server& server, const httplib::Request& request);

// Answers one HTTP/1.1 request, `request` being the bytes a client would send (request line,
// headers, body), with `server`'s routes and checks but without a socket: the bytes of the
// answer. What the fuzzer and tests drive a daemon's control plane with. `server` must come
// from make_server (else std::invalid_argument).
std::string answer_request(httplib::Server& server, std::string_view request);

// Reply bodies: {"error": message} as JSON text. Never throws: bytes of `message` that are not
// UTF-8 are replaced.
std::string error_body(const std::string& message);

// A route's answer computed on a daemon's dataplane thread: a status and a JSON body.
struct Reply {
  int status = 200;
  std::string body;  // JSON text
  static Reply error(int status, const std::string& message) { return {status, error_body(message)}; }
};

// ---- leases (tenancy.h), the same routes on both daemons ----------------------------------------
//   POST /leases                {"ttl_ms": 10000} -> 201 {"lease": ID, "ttl_ms": 10000}: a lease of the
//                               requester's, its time to live clamped to LeaseTable's bounds; 503
//                               when the daemon holds LeaseTable::kMaxLeases.
//   POST /leases/<id>/keepalive  -> {"lease": ID, "ttl_ms": T}: expires T from now.
//   DELETE /leases/<id>         -> {"revoked": ID, "removed": ["job 3", "host port 5"]}: ends it
//                               now and removes what hung on it.
// 404 for a lease that does not exist (expired or revoked), 403 for another tenant's (the operator
// may keep alive or revoke any). A job or host is hung on a lease by ?lease=ID on the request
// that installs it (POST /jobs, POST /hosts; lease_param reads it).
//
// `on_loop` runs a task on the dataplane thread, where `tenancy` lives, and answers its Reply
// (or throws when that thread does not answer); `remove` (called there) removes a resource that
// hung on a revoked lease. Expired leases are the daemon's to sweep (Tenancy::expire).
using OnLoop = std::function<Reply(std::function<Reply()>)>;
void add_lease_routes(httplib::Server& server, Tenancy& tenancy, OnLoop on_loop,
                      std::function<void(Tenancy::Resource)> remove);
// A POST /leases body, {"ttl_ms": N}: N milliseconds (not yet clamped). Throws ControlError.
Duration lease_ttl_from_json(const std::string& text);
// The request's ?lease=ID: 0 when absent; throws ControlError ("lease: ...") for a bad one.
LeaseTable::Id lease_param(const httplib::Request& request);
// Why `who` may not hang what it installs on `lease` (404: it expired or was revoked; 403: another
// tenant's), or nullopt.
std::optional<Reply> refuse_lease(const Tenancy& tenancy, std::string_view who, LeaseTable::Id lease);

}  // namespace atp::control
