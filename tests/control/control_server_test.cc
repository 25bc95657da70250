// Unit tests of the control server's pieces (src/control/): the refusals before a route runs, a
// connection's stream under its byte bound and deadlines, the thread pool's bounds and the linger.
// The server as a whole, over sockets and TLS, is control_test.cc's.
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../../src/control/connection_pool.h"
#include "../../src/control/server_connection.h"
#include "../../src/control/server_refusals.h"
#include "../../src/control/server_transport.h"
#include "atp/control/control.h"
#include "support/test_access.h"

namespace atp::control::detail {
namespace {

using namespace std::chrono_literals;

// A request with `headers` (name, value) as httplib hands it to the pre-routing handler.
httplib::Request request(const std::string& method, const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  for (const auto& [name, value] : headers) req.headers.emplace(name, value);
  return req;
}

// "status message" of a refusal, or "none".
std::string refusal_text(const std::optional<Refusal>& refusal) {
  return refusal ? std::to_string(refusal->status) + " " + refusal->message : "none";
}

TEST(ServerRefusals, BodiesTheServerWillNotReadAreRefusedWithOneSentence) {
  EXPECT_EQ(refusal_text(refuse_before_body(request("GET", "/stats"))), "none");
  EXPECT_EQ(refusal_text(refuse_before_body(request("POST", "/jobs", {{"Content-Length", "2"}}))), "none");
  EXPECT_EQ(refusal_text(refuse_before_body(
                request("POST", "/jobs", {{"Content-Length", "2"}, {"Content-Encoding", "identity"}}))),
            "none");
  EXPECT_EQ(refusal_text(refuse_before_body(request("POST", "/jobs"))), "411 POST needs a Content-Length header");
  EXPECT_EQ(refusal_text(refuse_before_body(request("PUT", "/ports/1"))), "411 PUT needs a Content-Length header");
  EXPECT_EQ(refusal_text(refuse_before_body(request("POST", "/jobs", {{"Transfer-Encoding", "chunked"}}))),
            "411 send the request body with a Content-Length header, not Transfer-Encoding: chunked");
  EXPECT_EQ(refusal_text(
                refuse_before_body(request("POST", "/jobs", {{"Content-Length", "1"}, {"Content-Encoding", "gzip"}}))),
            "415 request bodies must not be compressed (Content-Encoding: gzip)");
  EXPECT_EQ(refusal_text(refuse_before_body(request("POST", "/jobs", {{"Content-Length", "-1"}}))),
            "400 Content-Length: expected a number of bytes, got '-1'");
  EXPECT_EQ(refusal_text(refuse_before_body(request("POST", "/jobs", {{"Content-Length", ""}}))),
            "400 Content-Length: expected a number of bytes, got ''");
  // Twenty digits would overflow std::stoull: refused as text, never parsed.
  EXPECT_EQ(refusal_text(refuse_before_body(request("POST", "/jobs", {{"Content-Length", "99999999999999999999"}}))),
            "400 Content-Length: expected a number of bytes, got '99999999999999999999'");
  EXPECT_EQ(
      refusal_text(refuse_before_body(request("POST", "/jobs", {{"Content-Length", std::to_string(kMaxBodyBytes)}}))),
      "none");
  EXPECT_EQ(refusal_text(
                refuse_before_body(request("POST", "/jobs", {{"Content-Length", std::to_string(kMaxBodyBytes + 1)}}))),
            "413 the request body is 1048577 bytes, more than the 1048576 bytes a control request may have");
  EXPECT_EQ(refusal_text(refuse_before_body(request(
                "POST", "/jobs",
                {{"Content-Length", "8193"}, {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}}))),
            "413 the request body is 8193 bytes, more than the 8192 bytes a form (Content-Type: "
            "application/x-www-form-urlencoded) may have; send it with Content-Type: application/json");
  EXPECT_EQ(refusal_text(refuse_before_body(
                request("POST", "/jobs", {{"Content-Length", "8193"}, {"Content-Type", "application/json"}}))),
            "none");
}

TEST(ServerRefusals, ATokenIsCheckedBeforeTheBody) {
  const ServerAccess access = server_access(test::test_access());
  const auto known = std::pair<std::string, std::string>{"Authorization", "Bearer " + test::kOperatorToken};
  EXPECT_EQ(refusal_text(refuse_unauthenticated(access, request("GET", "/stats", {known}))), "none");
  EXPECT_EQ(refusal_text(refuse_unauthenticated(
                access, request("GET", "/stats", {{"Authorization", "Bearer " + test::kAliceToken}}))),
            "none");
  const std::optional<Refusal> missing = refuse_unauthenticated(access, request("GET", "/stats"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->message.rfind("this control plane needs a token: send 'Authorization: Bearer TOKEN'", 0), 0u)
      << missing->message;
  EXPECT_EQ(refusal_text(refuse_unauthenticated(access, request("GET", "/stats", {{"Authorization", "Bearer x"}}))),
            "401 the Authorization header holds no token this daemon knows");
  EXPECT_EQ(refuse_unauthenticated(access, request("GET", "/metrics"))->status, 401);
  ServerAccess open = access;
  open.metrics_open = true;
  EXPECT_EQ(refusal_text(refuse_unauthenticated(open, request("GET", "/metrics"))), "none");
  EXPECT_EQ(refuse_unauthenticated(open, request("POST", "/metrics"))->status, 401) << "only GET /metrics is open";

  // A stranger hears nothing about its body: the 401 comes first.
  EXPECT_EQ(refuse_early(access, request("POST", "/jobs", {{"Content-Length", "99999999"}}))->status, 401);
  EXPECT_EQ(refuse_early(access, request("POST", "/jobs", {known, {"Content-Length", "99999999"}}))->status, 413);
  EXPECT_EQ(refusal_text(refuse_early(access, request("POST", "/jobs", {known, {"Content-Length", "2"}}))), "none");
}

TEST(ServerRefusals, ARefusalIsAnsweredAsOneJsonSentence) {
  httplib::Response unauthorized;
  answer_refusal({401, "no token"}, unauthorized);
  EXPECT_EQ(unauthorized.status, 401);
  EXPECT_EQ(unauthorized.get_header_value("WWW-Authenticate"), "Bearer realm=\"atp\"");
  EXPECT_EQ(unauthorized.body, error_body("no token") + "\n");
  EXPECT_EQ(unauthorized.get_header_value("Content-Type"), "application/json");
  httplib::Response too_large;
  answer_refusal({413, "too large"}, too_large);
  EXPECT_EQ(too_large.status, 413);
  EXPECT_FALSE(too_large.has_header("WWW-Authenticate"));
}

TEST(ServerRefusals, HttplibsOwnErrorsGetASentence) {
  const httplib::Request req = request("DELETE", "/nowhere");
  EXPECT_EQ(sentence_for(404, req), "no such endpoint: DELETE /nowhere");
  EXPECT_EQ(sentence_for(400, req).rfind("malformed HTTP request (", 0), 0u);
  EXPECT_EQ(sentence_for(413, req), "the request body is too large (at most 1048576 bytes, 8192 as a form)");
  EXPECT_EQ(sentence_for(414, req), "the request line is longer than 8192 bytes");
  EXPECT_EQ(sentence_for(415, req), "unsupported Content-Encoding");
  EXPECT_EQ(sentence_for(416, req), "Range requests are not supported");
  EXPECT_EQ(sentence_for(500, req), "internal error");
  EXPECT_EQ(sentence_for(418, req), "HTTP 418");
  // A path of a megabyte is cut in the sentence.
  EXPECT_LT(sentence_for(404, request("GET", "/" + std::string(1 << 20, 'a'))).size(), 200u);
}

// ---- the connection's stream -------------------------------------------------------------------

// A transport that hands out `available` bytes of 'x' at most `chunk` per call (then the client
// has closed), or asks to wait for the socket when `stall`, and takes at most `chunk` bytes per
// send into `sent`.
class FakeTransport final : public Transport {
 public:
  explicit FakeTransport(std::size_t available, std::size_t chunk = 4096) : available_(available), chunk_(chunk) {}
  Step receive(char* data, std::size_t size) override {
    if (stall) return {-1, POLLIN};
    const std::size_t n = std::min({size, chunk_, available_});
    std::memset(data, 'x', n);
    available_ -= n;
    return {static_cast<ssize_t>(n), 0};
  }
  Step send(const char* data, std::size_t size) override {
    if (stall) return {-1, POLLOUT};
    const std::size_t n = std::min(size, chunk_);
    sent.append(data, n);
    return {static_cast<ssize_t>(n), 0};
  }
  bool stall = false;
  std::string sent;

 private:
  std::size_t available_;
  std::size_t chunk_;
};

// Reads `stream` until it ends or fails; the bytes read, and the last read's result.
std::pair<std::size_t, ssize_t> read_all(httplib::Stream& stream) {
  std::size_t total = 0;
  char buffer[1000];
  for (;;) {
    const ssize_t n = stream.read(buffer, sizeof buffer);
    if (n <= 0) return {total, n};
    total += static_cast<std::size_t>(n);
  }
}

// Two connected sockets: [0] the server's, [1] the client's.
class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  ~SocketPair() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  int server() const { return fds_[0]; }
  int client() const { return fds_[1]; }
  void close_client() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST(ConnectionStream, ReadsARequestUntilTheClientCloses) {
  FakeTransport transport(10'000);
  const ConnectionState state(ServerLimits{});
  ConnectionStream stream(transport, -1, state);
  ASSERT_TRUE(stream.open());
  EXPECT_EQ(read_all(stream), (std::pair<std::size_t, ssize_t>{10'000, 0}));
}

// A client that sends without end is cut at kMaxRequestBytes: the stream fails, it does not
// read on.
TEST(ConnectionStream, ReadsAtMostTheRequestBound) {
  FakeTransport transport(3 * kMaxRequestBytes);
  const ConnectionState state(ServerLimits{});
  ConnectionStream stream(transport, -1, state);
  EXPECT_EQ(read_all(stream), (std::pair<std::size_t, ssize_t>{kMaxRequestBytes, -1}));
  char byte = 0;
  EXPECT_EQ(stream.read(&byte, 1), -1) << "still cut on the next read";
}

// httplib does not retry a partial write: the stream does, until all of it is sent.
TEST(ConnectionStream, WritesAllOfAnAnswerInPieces) {
  FakeTransport transport(0, /*chunk=*/3);
  const ConnectionState state(ServerLimits{});
  ConnectionStream stream(transport, -1, state);
  const std::string answer = "HTTP/1.1 200 OK\r\n\r\n{}";
  EXPECT_EQ(stream.write(answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(transport.sent, answer);
}

// A client that stops sending is given up at the request deadline, not waited for.
TEST(ConnectionStream, AStalledClientIsGivenUpAtTheDeadline) {
  SocketPair sockets;
  FakeTransport transport(100);
  transport.stall = true;
  const ConnectionState state(ServerLimits{.request_deadline = 200ms, .slow_request = 10s});
  ConnectionStream stream(transport, sockets.server(), state);
  const auto start = std::chrono::steady_clock::now();
  char byte = 0;
  EXPECT_EQ(stream.read(&byte, 1), -1);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 2s);
  EXPECT_FALSE(stream.is_readable()) << "the reading phase is out of time";
}

// Past slow_request a connection gives its thread up, but only while another one waits for it;
// and every connection gives up at once when the server stops.
TEST(ConnectionStream, GivesItsThreadUpToWaitingConnectionsAndWhenStopping) {
  SocketPair sockets;
  FakeTransport transport(100);
  transport.stall = true;
  ConnectionState state(ServerLimits{.request_deadline = 10s, .slow_request = 0ms});
  state.waiting = 1;
  ConnectionStream slow(transport, sockets.server(), state);
  char byte = 0;
  EXPECT_EQ(slow.read(&byte, 1), -1);
  EXPECT_FALSE(slow.is_writable());

  ConnectionState stopping(ServerLimits{});
  stopping.stopping = true;
  transport.stall = false;
  ConnectionStream stopped(transport, sockets.server(), stopping);
  EXPECT_FALSE(stopped.open());
  EXPECT_EQ(stopped.read(&byte, 1), -1) << "not even bytes the transport has";
}

TEST(ConnectionStream, ReadsFromASocketAndNamesItsEnds) {
  SocketPair sockets;
  const ConnectionState state(ServerLimits{.request_deadline = 2s, .slow_request = 2s});
  const std::unique_ptr<Transport> transport = plain_transport(sockets.server());
  ConnectionStream stream(*transport, sockets.server(), state);
  ASSERT_TRUE(stream.open());
  const std::string request = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(sockets.client(), request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  sockets.close_client();
  char buffer[64] = {};
  ASSERT_EQ(stream.read(buffer, 4), 4);
  EXPECT_EQ(std::string(buffer, 4), "GET ");
  EXPECT_TRUE(stream.is_readable()) << "the rest is buffered";
  EXPECT_EQ(stream.read(buffer, sizeof buffer), static_cast<ssize_t>(request.size() - 4));
  EXPECT_EQ(stream.read(buffer, sizeof buffer), 0) << "the client closed";
  std::string ip = "unset";
  int port = -1;
  stream.get_remote_ip_and_port(ip, port);  // a Unix socket has neither
  EXPECT_EQ(ip, "");
  EXPECT_EQ(port, 0);
  EXPECT_EQ(stream.socket(), sockets.server());
}

TEST(MemoryStream, ReadsAtMostTheRequestBound) {
  std::string answer;
  const std::string small = "GET / HTTP/1.1\r\n\r\n";
  MemoryStream whole(small, answer);
  EXPECT_EQ(read_all(whole), (std::pair<std::size_t, ssize_t>{small.size(), 0}));

  const std::string endless(kMaxRequestBytes + 10, 'h');
  MemoryStream cut(endless, answer);
  EXPECT_EQ(read_all(cut), (std::pair<std::size_t, ssize_t>{kMaxRequestBytes, -1}));

  const std::string exact(kMaxRequestBytes, 'h');
  MemoryStream bound(exact, answer);
  EXPECT_EQ(read_all(bound), (std::pair<std::size_t, ssize_t>{kMaxRequestBytes, 0}));

  EXPECT_EQ(whole.write("ab", 2), 2);
  EXPECT_EQ(whole.write("c", 1), 1);
  EXPECT_EQ(answer, "abc");
}

// The linger reads and drops what the client still sends, and ends when it closes.
TEST(Linger, DropsWhatTheClientStillSendsUntilItCloses) {
  SocketPair sockets;
  const ConnectionState state(ServerLimits{});
  const std::string rest(10'000, 'b');
  ASSERT_EQ(::send(sockets.client(), rest.data(), rest.size(), 0), static_cast<ssize_t>(rest.size()));
  sockets.close_client();
  const auto start = std::chrono::steady_clock::now();
  linger(sockets.server(), state);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 200ms) << "it waited for the linger's end, not the close";
  char byte = 0;
  EXPECT_EQ(::recv(sockets.server(), &byte, 1, MSG_DONTWAIT), 0) << "everything the client sent was read";
}

// ---- the thread pool ---------------------------------------------------------------------------

// One worker, one place in the queue: a third connection is refused on the enqueuing thread, the
// one queued is served once the worker is free, and after shutdown every connection is refused.
TEST(ConnectionPool, RefusesConnectionsBeyondTheWorkersAndTheQueue) {
  ConnectionState state(ServerLimits{.workers = 1, .queued_connections = 1});
  ConnectionPool pool(state);
  std::promise<void> first_started;
  std::promise<void> release_first;
  std::shared_future<void> released = release_first.get_future().share();
  std::atomic<int> served{0};
  std::atomic<int> refused{0};
  auto count = [&] { (refusing_connection() ? refused : served) += 1; };

  pool.enqueue([&] {
    count();
    first_started.set_value();
    released.wait();
  });
  first_started.get_future().wait();
  std::promise<void> second_done;
  pool.enqueue([&] {
    count();
    second_done.set_value();
  });
  EXPECT_EQ(state.waiting.load(), 1u) << "no idle thread takes the second up";
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id refused_on;
  pool.enqueue([&] {
    count();
    refused_on = std::this_thread::get_id();
  });
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(refused_on, caller) << "refused at once, on the enqueuing thread";
  EXPECT_FALSE(refusing_connection()) << "only while the refused connection runs";

  release_first.set_value();
  second_done.get_future().wait();
  EXPECT_EQ(served.load(), 2);

  pool.shutdown();
  EXPECT_TRUE(state.stopping.load());
  pool.enqueue(count);
  EXPECT_EQ(refused.load(), 2);
  EXPECT_EQ(served.load(), 2);
}

TEST(ServerTransport, ATlsContextNeedsBothFilesOrNeither) {
  ServerAccess access = server_access(test::test_access());
  EXPECT_EQ(tls_context(access), nullptr) << "plain HTTP";
  access.tls_cert_file = "/nowhere/server.crt";
  try {
    tls_context(access);
    ADD_FAILURE() << "a certificate without a key was taken";
  } catch (const AuthError& e) {
    EXPECT_STREQ(e.what(),
                 "TLS needs both a certificate file and its private key file (--tls-cert and --tls-key); only the "
                 "certificate '/nowhere/server.crt' was given");
  }
  access.tls_key_file = "/nowhere/server.key";
  try {
    tls_context(access);
    ADD_FAILURE() << "a missing certificate file was taken";
  } catch (const AuthError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cannot read the TLS certificate file '/nowhere/server.crt': ", 0), 0u)
        << e.what();
  }
}

// A TLS transport on a socket that speaks no TLS fails its handshake instead of waiting for it.
TEST(ServerTransport, ATlsHandshakeWithAPlainClientFails) {
  SocketPair sockets;
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  ASSERT_TRUE(context);
  const std::unique_ptr<Transport> transport = tls_transport(context.get(), sockets.server());
  const std::string request = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(sockets.client(), request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  const ConnectionState state(ServerLimits{.request_deadline = 2s, .slow_request = 2s});
  ConnectionStream stream(*transport, sockets.server(), state);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stream.open());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_FALSE(transport->holds_received());
}

}  // namespace
}  // namespace atp::control::detail
