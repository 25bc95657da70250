// The daemons' HTTP control server (cpp-httplib): bearer tokens checked before any route, one
// request per connection (in clear or over TLS) under deadlines and thread bounds that slow clients
// cannot exhaust, every error one JSON sentence. Its pieces: the byte transports and TLS
// (server_transport.h), a connection's bounded stream (server_connection.h), the threads
// (connection_pool.h) and the refusals (server_refusals.h); the lease routes are lease_routes.cc.
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "atp/control/control.h"
#include "atp/io/log.h"
#include "connection_pool.h"
#include "server_connection.h"
#include "server_refusals.h"
#include "server_transport.h"

namespace atp::control {
namespace {

class ControlServer final : public httplib::Server {
 public:
  ControlServer(ServerAccess access, const ServerLimits& limits)
      : access_(std::move(access)), tls_(detail::tls_context(access_)), state_(limits) {
    if (!access_.authenticator) throw std::invalid_argument("make_server: no authenticator");
    // Called by listen_after_bind() on the listening thread, before its accept loop.
    new_task_queue = [this] {
      state_.stopping = false;
      return new detail::ConnectionPool(state_);
    };
    // httplib's default also sets SO_REUSEPORT, which lets a second daemon bind the same control
    // port silently; SO_REUSEADDR alone still allows a quick restart and makes "in use" an error.
    set_socket_options([](socket_t sock) {
      const int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    set_keep_alive_max_count(1);
    set_payload_max_length(kMaxBodyBytes);
    // A client that asks first ("Expect: 100-continue", as curl does for large bodies) is told
    // before it sends the body.
    set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::optional<detail::Refusal> refusal = detail::refuse_early(access_, req);
      if (!refusal) return 100;
      detail::answer_refusal(*refusal, res);
      return refusal->status;
    });
    set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::optional<detail::Refusal> refusal = detail::refuse_early(access_, req);
      if (!refusal) return HandlerResponse::Unhandled;
      detail::answer_refusal(*refusal, res);
      return HandlerResponse::Handled;
    });
    set_error_handler(HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return HandlerResponse::Unhandled;  // a route's own error sentence
      res.set_content(error_body(detail::sentence_for(res.status, req)) + "\n", "application/json");
      return HandlerResponse::Handled;
    }));
    set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
      std::string what = "an exception that is not a std::exception";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(error_body("internal error: " + excerpt(what, 200)) + "\n", "application/json");
    });
    // Before the response is written (httplib's logger runs after): a client that has its refusal
    // finds the line already in the log.
    set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) { log_refusal(req, res); });
  }

  // httplib closes the listening socket only in stop() of a running server: a daemon made but
  // never started would keep its control port bound until the process ends.
  ~ControlServer() override {
    if (!is_running() && svr_sock_ != INVALID_SOCKET) ::close(svr_sock_.exchange(INVALID_SOCKET));
  }

  // Every refused request is a line of the daemon's log: at info a client's mistake (4xx), at
  // error the daemon's failure (5xx). What it did when it did not refuse, the routes log.
  void log_refusal(const httplib::Request& req, const httplib::Response& res) const {
    if (res.status < 400) return;
    const log::Level level = res.status >= 500 ? log::Level::kError : log::Level::kInfo;
    if (!log::enabled(level)) return;
    const nlohmann::json body = nlohmann::json::parse(res.body, nullptr, false);
    const std::string why = body.is_object() && body.contains("error") && body["error"].is_string()
                                ? body["error"].get<std::string>()
                                : "(no error sentence)";
    const std::string who = requester(req);
    log::write(level, "refused " + req.method + " " + excerpt(req.path, 200) + " from " + req.remote_addr +
                          (who.empty() ? "" : " (" + who + ")") + ": " + std::to_string(res.status) + " " + why);
  }

  std::string requester(const httplib::Request& req) const {
    return access_.authenticator->identify(req.get_header_value("Authorization")).value_or("");
  }

  // Binds `ip`:`port` (0: a port the kernel chooses) and returns the port, or -1 (errno says why).
  // httplib 0.11.4 listens with a backlog of 5: a burst of connections (a runner installing jobs
  // while others poll stats) beyond it has its SYNs dropped and waits a second for the
  // retransmission. Listening again on the bound socket, here before any thread serves it, only
  // raises the backlog.
  int bind(const std::string& ip, int port) {
    if (port == 0) {
      port = bind_to_any_port(ip);
    } else if (!bind_to_port(ip, port)) {
      port = -1;
    }
    if (port > 0) ::listen(svr_sock_, SOMAXCONN);
    return port;
  }

  std::string answer(std::string_view request) {
    std::string answer;
    detail::MemoryStream stream(request, answer);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
    return answer;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool served = false;
    if (detail::refusing_connection()) {
      static const std::string busy = [] {
        const std::string body = error_body("the control plane is busy or stopping; try again") + "\n";
        return "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n"
               "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
      }();
      // Over TLS only closed: a 503 in clear means nothing to a TLS client, and a handshake here
      // would hold up the accept loop; the client sees its handshake fail.
      if (!tls_) {
        [[maybe_unused]] const ssize_t n = ::send(sock, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    } else {
      try {
        std::optional<detail::SigpipeBlocked> no_sigpipe;
        std::unique_ptr<detail::Transport> transport;
        if (tls_) {
          no_sigpipe.emplace();
          transport = detail::tls_transport(tls_.get(), sock);
        } else {
          transport = detail::plain_transport(sock);
        }
        detail::ConnectionStream stream(*transport, sock, state_);
        if (stream.open()) {
          bool closed = false;
          served = process_request(stream, /*close_connection=*/true, closed, nullptr);
          transport->close();
        }
      } catch (...) {  // httplib catches the handlers' exceptions; this is for its own (bad_alloc)
      }
      detail::linger(sock, state_);
    }
    ::close(sock);
    return served;
  }

  const ServerAccess access_;
  const std::shared_ptr<SSL_CTX> tls_;  // null: plain HTTP
  detail::ConnectionState state_;
};

}  // namespace

ServerAccess server_access(const AccessConfig& config) {
  const std::string token = config.operator_token.empty() ? daemon_token().token : config.operator_token;
  return {std::make_shared<const Authenticator>(token, config.tenants), config.metrics_open, config.tls_cert_file,
          config.tls_key_file};
}

std::unique_ptr<httplib::Server> make_server(ServerAccess access, const ServerLimits& limits) {
  return std::make_unique<ControlServer>(std::move(access), limits);
}

std::string requester(const httplib::Server& server, const httplib::Request& request) {
  const auto* control = dynamic_cast<const ControlServer*>(&server);
  if (!control) throw std::invalid_argument("requester: the server was not made by control::make_server");
  return control->requester(request);
}

int bind_server(httplib::Server& server, const std::string& ip, int port) {
  auto* control = dynamic_cast<ControlServer*>(&server);
  if (!control) throw std::invalid_argument("bind_server: the server was not made by control::make_server");
  return control->bind(ip, port);
}

std::string answer_request(httplib::Server& server, std::string_view request) {
  auto* control = dynamic_cast<ControlServer*>(&server);
  if (!control) throw std::invalid_argument("answer_request: the server was not made by control::make_server");
  return control->answer(request);
}

}  // namespace atp::control
