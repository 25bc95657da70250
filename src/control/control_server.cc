// The daemons' HTTP control server (cpp-httplib): bearer tokens checked before any route, one
// request per connection (in clear or over TLS) under deadlines and thread bounds that slow clients
// cannot exhaust, every error one JSON sentence; and the lease routes both daemons serve.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "atp/control/control.h"
#include "atp/io/event_loop.h"
#include "atp/io/log.h"

namespace atp::control {
namespace {

using Clock = std::chrono::steady_clock;

// The request line and headers may add this much to a request's body: the most a request reads.
constexpr std::size_t kMaxRequestBytes = kMaxBodyBytes + (std::size_t{64} << 10);
// How often a connection waiting for its client looks whether it should give up.
constexpr auto kPollSlice = std::chrono::milliseconds(50);
// After the answer, how long the connection waits for the client to close (reading and dropping
// what it still sends) before closing it: a close with unread bytes resets the connection, and
// the reset can overtake the answer (a 413 for a body the client is still sending).
constexpr auto kLingerTime = std::chrono::milliseconds(250);
// And drops at most this much meanwhile: more than a request may have, since a client refused
// for a body of several MiB still has that body in flight (in its socket buffers and ours);
// stopping at kMaxRequestBytes reset the connection under the 413 now and then.
constexpr std::size_t kMaxLingerBytes = std::size_t{16} << 20;

// What the connections of one server share with its thread pool.
struct ConnectionState {
  explicit ConnectionState(const ServerLimits& l) : limits(l) {}
  const ServerLimits limits;
  std::atomic<std::size_t> waiting{0};  // accepted connections no thread has taken up yet
  std::atomic<bool> stopping{false};    // the server is stopping: every connection gives up
};

// Set on the thread that runs a connection the pool refuses (too many waiting, or stopping):
// the server then answers it 503 at once instead of serving it.
thread_local bool t_refuse_connection = false;

// How a connection's bytes cross its socket: as they are, or inside TLS. Each call does what it
// can without blocking, and says what the socket must be ready for when it could not finish.
class Transport {
 public:
  // What a call did: moved `bytes` (> 0; 0 from receive: the client closed), or must be called
  // again once the socket is ready for `wait_for` (POLLIN or POLLOUT), or failed (bytes -1 and
  // wait_for 0).
  struct Step {
    ssize_t bytes;
    short wait_for;
  };
  virtual ~Transport() = default;
  // Before the request's first byte: TLS's handshake (bytes 1 when done).
  virtual Step open() { return {1, 0}; }
  virtual Step receive(char* data, std::size_t size) = 0;
  virtual Step send(const char* data, std::size_t size) = 0;
  // Received bytes that receive() holds already, the socket being readable or not.
  virtual bool holds_received() const { return false; }
  // After the answer, before the socket shuts down: TLS's close_notify. Never waits.
  virtual void close() {}
};

// The socket's own bytes (plain HTTP).
class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int sock) : sock_(sock) {}
  Step receive(char* data, std::size_t size) override { return step(::recv(sock_, data, size, MSG_DONTWAIT), POLLIN); }
  Step send(const char* data, std::size_t size) override {
    return step(::send(sock_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT), POLLOUT);
  }

 private:
  static Step step(ssize_t n, short events) {
    if (n >= 0) return {n, 0};
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {-1, events};
    return {-1, 0};  // an error or a reset
  }
  int sock_;
};

// TLS over the socket (OpenSSL), the server's side. OpenSSL reads and writes the socket itself:
// it is made non-blocking, so that every wait is ConnectionStream's, under its deadlines.
class TlsTransport final : public Transport {
 public:
  TlsTransport(SSL_CTX* context, int sock) : ssl_(SSL_new(context), SSL_free) {
    const int flags = ::fcntl(sock, F_GETFL);
    if (flags < 0 || ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) < 0 || (ssl_ && SSL_set_fd(ssl_.get(), sock) != 1)) {
      ssl_.reset();
    }
  }
  Step open() override {
    if (!ssl_) return {-1, 0};
    return call([this] { return SSL_accept(ssl_.get()); });
  }
  Step receive(char* data, std::size_t size) override {
    return call([&] { return SSL_read(ssl_.get(), data, static_cast<int>(std::min<std::size_t>(size, INT_MAX))); });
  }
  Step send(const char* data, std::size_t size) override {
    return call([&] { return SSL_write(ssl_.get(), data, static_cast<int>(std::min<std::size_t>(size, INT_MAX))); });
  }
  bool holds_received() const override { return ssl_ && SSL_pending(ssl_.get()) > 0; }
  // One try: the client's own close_notify is not waited for (linger drops what it sends).
  void close() override {
    if (!ssl_) return;
    ERR_clear_error();
    SSL_shutdown(ssl_.get());
    ERR_clear_error();
  }

 private:
  // Runs one OpenSSL call; the thread's error queue must be empty for SSL_get_error to be right.
  template <typename Call>
  Step call(Call ssl_call) {
    ERR_clear_error();
    const int n = ssl_call();
    if (n > 0) return {n, 0};
    const int error = SSL_get_error(ssl_.get(), n);
    ERR_clear_error();
    switch (error) {
      case SSL_ERROR_WANT_READ:
        return {-1, POLLIN};
      case SSL_ERROR_WANT_WRITE:
        return {-1, POLLOUT};
      case SSL_ERROR_ZERO_RETURN:  // the client's close_notify: it closed
        return {0, 0};
      default:  // not TLS, a bad handshake, a reset
        return {-1, 0};
    }
  }

  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_;
};

// OpenSSL writes to the socket with write(), which raises SIGPIPE when the client has gone (the
// daemons do not ignore it): the thread serving a TLS connection blocks SIGPIPE meanwhile, and
// takes the one that came before unblocking it.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    if (!sigismember(&old_, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      const timespec now{};
      ::sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_, old_;
};

// One connection's byte stream for httplib, over `transport`, with ServerLimits' bounds: opening
// it (TLS's handshake) and reading the request must finish within request_deadline of the
// connection being taken up, writing the answer within request_deadline of its first byte, and
// either gives up after slow_request when other connections wait. At most kMaxRequestBytes are
// read.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Transport& transport, int sock, const ConnectionState& state)
      : transport_(transport), sock_(sock), state_(state), phase_start_(Clock::now()) {}

  // What comes before the request (TLS's handshake); false when it failed or ran out of time.
  bool open() {
    return run([this] { return transport_.open(); }) > 0;
  }

  bool is_readable() const override { return used_ < filled_ || transport_.holds_received() || wait(POLLIN); }
  bool is_writable() const override { return wait(POLLOUT); }

  // After an interim "100 Continue" the body is read under the answer's deadline: still bounded.
  ssize_t read(char* ptr, size_t size) override {
    if (used_ == filled_) {
      if (received_ >= kMaxRequestBytes) return -1;
      const std::size_t most = std::min(sizeof buffer_, kMaxRequestBytes - received_);
      const ssize_t n = run([&] { return transport_.receive(buffer_, most); });
      if (n <= 0) return n;  // 0: the client closed; -1: an error, or out of time
      received_ += static_cast<std::size_t>(n);
      used_ = 0;
      filled_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, filled_ - used_);
    std::memcpy(ptr, buffer_ + used_, n);
    used_ += n;
    return static_cast<ssize_t>(n);
  }

  // All of it or -1 (httplib's write_format does not retry a partial write).
  ssize_t write(const char* ptr, size_t size) override {
    if (!writing_) {
      writing_ = true;
      phase_start_ = Clock::now();
    }
    for (std::size_t sent = 0; sent < size;) {
      const ssize_t n = run([&] { return transport_.send(ptr + sent, size - sent); });
      if (n < 0) return -1;
      sent += static_cast<std::size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  // True when this phase (reading the request, or writing the answer) is out of time, or must
  // give its thread up, `in_phase` after it began.
  bool out_of_time(Clock::duration in_phase) const {
    return state_.stopping || in_phase >= state_.limits.request_deadline ||
           (in_phase >= state_.limits.slow_request && state_.waiting > 0);
  }

  // Repeats a transport's `step` until it moves bytes or fails (its bytes), waiting for the
  // socket in between; -1 when this phase is out of time, checked before every step.
  template <typename Step>
  ssize_t run(Step step) const {
    for (;;) {
      if (out_of_time(Clock::now() - phase_start_)) return -1;
      const Transport::Step s = step();
      if (s.wait_for == 0) return s.bytes;
      if (!wait(s.wait_for)) return -1;
    }
  }

  // Waits until the socket is ready for `events`; false when this phase is out of time.
  bool wait(short events) const {
    for (;;) {
      const Clock::duration in_phase = Clock::now() - phase_start_;
      if (out_of_time(in_phase)) return false;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(state_.limits.request_deadline - in_phase);
      pollfd p{sock_, events, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::chrono::milliseconds>(kPollSlice, left).count()));
      if (ready > 0) return true;  // ready, or an error or hang-up that the transport then reports
      if (ready < 0 && errno != EINTR) return false;
    }
  }

  using NameFunction = int (*)(int, sockaddr*, socklen_t*);
  void address(NameFunction name, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof a;
    ip.clear();
    port = 0;
    if (name(sock_, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
      ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
      port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
      ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
      port = ntohs(v6.sin6_port);
    }
    ip = text;
  }

  Transport& transport_;
  int sock_;
  const ConnectionState& state_;
  Clock::time_point phase_start_;  // when reading the request, then writing the answer, began
  bool writing_ = false;
  std::size_t received_ = 0;  // bytes of the request read from the socket
  char buffer_[4096];         // httplib reads headers a byte at a time: one recv per 4 KiB instead
  std::size_t used_ = 0, filled_ = 0;
};

// A request given as bytes, for answer_request: read with the same bound as a connection's.
class MemoryStream final : public httplib::Stream {
 public:
  MemoryStream(std::string_view request, std::string& answer) : request_(request), answer_(answer) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    if (read_ >= kMaxRequestBytes && read_ < request_.size()) return -1;
    const std::size_t n = std::min({size, request_.size() - read_, kMaxRequestBytes - read_});
    std::memcpy(ptr, request_.data() + read_, n);
    read_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    answer_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string_view request_;
  std::string& answer_;
  std::size_t read_ = 0;
};

// httplib's queue of accepted connections: up to limits.workers threads, started as
// connections come; at most limits.queued_connections waiting for one. A connection beyond
// that, or one accepted while the server stops, is refused (t_refuse_connection) on the
// calling thread, which is then the accept loop's: that costs it one non-blocking send.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(ConnectionState& state) : state_(state) {}
  ~ConnectionPool() override { shutdown(); }

  void enqueue(std::function<void()> connection) override {
    {
      std::lock_guard lock(mutex_);
      if (!shutting_down_ && pending_.size() < state_.limits.queued_connections) {
        pending_.push_back(std::move(connection));
        if (idle_ == 0 && threads_.size() < state_.limits.workers) threads_.emplace_back([this] { work(); });
        update_waiting();
        ready_.notify_one();
        return;
      }
    }
    run(connection, true);
  }

  // Stops taking connections, makes the ones being served give up (state_.stopping), refuses
  // the waiting ones and joins the threads.
  void shutdown() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
      threads.swap(threads_);
    }
    state_.stopping = true;
    ready_.notify_all();
    for (std::thread& t : threads) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      update_waiting();
      ready_.wait(lock, [this] { return shutting_down_ || !pending_.empty(); });
      --idle_;
      if (pending_.empty()) return;  // shutting down, nothing left to refuse
      std::function<void()> connection = std::move(pending_.front());
      pending_.pop_front();
      update_waiting();
      const bool refuse = shutting_down_;
      lock.unlock();
      run(connection, refuse);
      lock.lock();
    }
  }

  static void run(const std::function<void()>& connection, bool refuse) {
    t_refuse_connection = refuse;
    connection();  // ControlServer::process_and_close_socket: closes the socket, never throws
    t_refuse_connection = false;
  }

  // Connections that no idle thread is about to take up (under mutex_).
  void update_waiting() { state_.waiting = pending_.size() > idle_ ? pending_.size() - idle_ : 0; }

  ConnectionState& state_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> pending_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;  // threads waiting for a connection
  bool shutting_down_ = false;
};

// Why a request is refused before its body is read; nullopt when it may be read.
struct Refusal {
  int status;
  std::string message;
};
std::optional<Refusal> refuse_before_body(const httplib::Request& req) {
  if (req.has_header("Content-Encoding") && req.get_header_value("Content-Encoding") != "identity") {
    // A few compressed bytes could become gigabytes: httplib bounds the bytes read, not those
    // decompressed.
    return Refusal{415, "request bodies must not be compressed (Content-Encoding: " +
                            excerpt(req.get_header_value("Content-Encoding")) + ")"};
  }
  if (req.has_header("Transfer-Encoding")) {  // chunked: httplib reads it with no size limit
    return Refusal{411, "send the request body with a Content-Length header, not Transfer-Encoding: " +
                            excerpt(req.get_header_value("Transfer-Encoding"))};
  }
  if (!req.has_header("Content-Length")) {
    // httplib would read such a body until the client closes the connection.
    if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI") {
      return Refusal{411, excerpt(req.method) + " needs a Content-Length header"};
    }
    return std::nullopt;
  }
  const std::string length = req.get_header_value("Content-Length");
  const bool digits = !length.empty() && length.size() <= 19 &&
                      std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return Refusal{400, "Content-Length: expected a number of bytes, got '" + excerpt(length) + "'"};
  if (std::stoull(length) > kMaxBodyBytes) {
    return Refusal{413, "the request body is " + length + " bytes, more than the " + std::to_string(kMaxBodyBytes) +
                            " bytes a control request may have"};
  }
  // httplib parses such a body as a form, and refuses it above 8192 bytes (curl -d sends this type).
  if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0 &&
      std::stoull(length) > CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) {
    return Refusal{413, "the request body is " + length + " bytes, more than the " +
                            std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                            " bytes a form (Content-Type: application/x-www-form-urlencoded) may have; send it "
                            "with Content-Type: application/json"};
  }
  return std::nullopt;
}

// The sentence for an error httplib answers by itself (its response has no body).
std::string sentence_for(int status, const httplib::Request& req) {
  switch (status) {
    case 400:
      return "malformed HTTP request (a bad request line or header, or a body that did not arrive whole in time)";
    case 404:
      return "no such endpoint: " + excerpt(req.method) + " " + excerpt(req.path);
    case 413:
      return "the request body is too large (at most " + std::to_string(kMaxBodyBytes) + " bytes, " +
             std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) + " as a form)";
    case 414:
      return "the request line is longer than " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) + " bytes";
    case 415:
      return "unsupported Content-Encoding";
    case 416:
      return "Range requests are not supported";
    case 500:
      return "internal error";
    default:
      return "HTTP " + std::to_string(status);
  }
}

// Where a client looks for the token by default, for the 401's sentence.
std::string token_file_hint() {
  try {
    return default_token_file();
  } catch (const AuthError&) {
    return "$ATP_HOME/token";
  }
}

// The 401 a request without a known token gets; nullopt when `access` lets it in.
std::optional<Refusal> refuse_unauthenticated(const ServerAccess& access, const httplib::Request& req) {
  if (access.metrics_open && req.method == "GET" && req.path == "/metrics") return std::nullopt;
  if (!req.has_header("Authorization")) {
    return Refusal{401,
                   "this control plane needs a token: send 'Authorization: Bearer TOKEN' with the daemon's "
                   "token (its start-up line names the file; clients read ATP_TOKEN, ATP_TOKEN_FILE or " +
                       token_file_hint() + ")"};
  }
  if (!access.authenticator->identify(req.get_header_value("Authorization"))) {
    return Refusal{401, "the Authorization header holds no token this daemon knows"};
  }
  return std::nullopt;
}

// The first refusal of a request before its body is read: a missing token, then a bad body.
std::optional<Refusal> refuse_early(const ServerAccess& access, const httplib::Request& req) {
  if (std::optional<Refusal> r = refuse_unauthenticated(access, req)) return r;
  return refuse_before_body(req);
}

void answer_refusal(const Refusal& refusal, httplib::Response& res) {
  res.status = refusal.status;
  if (refusal.status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"atp\"");
  res.set_content(error_body(refusal.message) + "\n", "application/json");
}

// The thread's last OpenSSL error, for a message ("no start line"); empties the queue.
std::string openssl_reason() {
  const unsigned long error = ERR_peek_last_error();
  const char* reason = error == 0 ? nullptr : ERR_reason_error_string(error);
  ERR_clear_error();
  return reason ? reason : "unknown error";
}

// Throws AuthError unless `path` is a regular file this process can open.
void check_tls_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw AuthError("cannot read the TLS " + what + " file '" + path + "': " + std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) throw AuthError("the TLS " + what + " file '" + path + "' is not a regular file");
}

// The TLS context of a server with `access`'s certificate and key; null when it has neither.
// Throws AuthError naming the file that is missing, unreadable, not PEM, or a key that is not the
// certificate's.
std::shared_ptr<SSL_CTX> tls_context(const ServerAccess& access) {
  const std::string& cert = access.tls_cert_file;
  const std::string& key = access.tls_key_file;
  if (cert.empty() && key.empty()) return nullptr;
  if (cert.empty() || key.empty()) {
    throw AuthError("TLS needs both a certificate file and its private key file (--tls-cert and --tls-key); only " +
                    (cert.empty() ? "the key '" + key + "'" : "the certificate '" + cert + "'") + " was given");
  }
  check_tls_file(cert, "certificate");
  check_tls_file(key, "key");
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!context) throw AuthError("cannot set up TLS (OpenSSL: " + openssl_reason() + ")");
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(context.get(), SSL_OP_NO_RENEGOTIATION);  // one handshake per connection
  SSL_CTX_set_mode(context.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(context.get(), cert.c_str()) != 1) {
    throw AuthError("the TLS certificate file '" + cert + "' holds no PEM certificate (OpenSSL: " + openssl_reason() +
                    ")");
  }
  // A key with a passphrase fails here instead of asking for it on the daemon's terminal.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  std::unique_ptr<BIO, decltype(&BIO_free)> file(BIO_new_file(key.c_str(), "r"), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> private_key(
      file ? PEM_read_bio_PrivateKey(file.get(), nullptr, no_passphrase, nullptr) : nullptr, EVP_PKEY_free);
  if (!private_key) {
    throw AuthError("the TLS key file '" + key +
                    "' holds no unencrypted PEM private key (OpenSSL: " + openssl_reason() + ")");
  }
  if (SSL_CTX_use_PrivateKey(context.get(), private_key.get()) != 1 || SSL_CTX_check_private_key(context.get()) != 1) {
    ERR_clear_error();
    throw AuthError("the TLS key file '" + key + "' does not hold the private key of the certificate in '" + cert +
                    "'");
  }
  return context;
}

class ControlServer final : public httplib::Server {
 public:
  ControlServer(ServerAccess access, const ServerLimits& limits)
      : access_(std::move(access)), tls_(tls_context(access_)), state_(limits) {
    if (!access_.authenticator) throw std::invalid_argument("make_server: no authenticator");
    // Called by listen_after_bind() on the listening thread, before its accept loop.
    new_task_queue = [this] {
      state_.stopping = false;
      return new ConnectionPool(state_);
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
      const std::optional<Refusal> refusal = refuse_early(access_, req);
      if (!refusal) return 100;
      answer_refusal(*refusal, res);
      return refusal->status;
    });
    set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::optional<Refusal> refusal = refuse_early(access_, req);
      if (!refusal) return HandlerResponse::Unhandled;
      answer_refusal(*refusal, res);
      return HandlerResponse::Handled;
    });
    set_error_handler(HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return HandlerResponse::Unhandled;  // a route's own error sentence
      res.set_content(error_body(sentence_for(res.status, req)) + "\n", "application/json");
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
    MemoryStream stream(request, answer);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
    return answer;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool served = false;
    if (t_refuse_connection) {
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
        std::optional<SigpipeBlocked> no_sigpipe;
        std::unique_ptr<Transport> transport;
        if (tls_) {
          no_sigpipe.emplace();
          transport = std::make_unique<TlsTransport>(tls_.get(), sock);
        } else {
          transport = std::make_unique<PlainTransport>(sock);
        }
        ConnectionStream stream(*transport, sock, state_);
        if (stream.open()) {
          bool closed = false;
          served = process_request(stream, /*close_connection=*/true, closed, nullptr);
          transport->close();
        }
      } catch (...) {  // httplib catches the handlers' exceptions; this is for its own (bad_alloc)
      }
      linger(sock);
    }
    ::close(sock);
    return served;
  }

  // Sends end of file and drops what the client still sends until it closes: at most
  // kLingerTime or kMaxLingerBytes, and not while other connections wait for a thread.
  void linger(socket_t sock) const {
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + kLingerTime;
    char sink[4096];
    for (std::size_t dropped = 0; dropped < kMaxLingerBytes && !state_.stopping && state_.waiting == 0;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      pollfd p{sock, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(std::min(left, kPollSlice).count())) < 0) return;
      if (p.revents == 0) continue;  // nothing yet: look at the time and the waiting ones again
      const ssize_t n = ::recv(sock, sink, sizeof sink, MSG_DONTWAIT);
      if (n <= 0) return;
      dropped += static_cast<std::size_t>(n);
    }
  }

  const ServerAccess access_;
  const std::shared_ptr<SSL_CTX> tls_;  // null: plain HTTP
  ConnectionState state_;
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

LeaseTable::Id lease_param(const httplib::Request& request) {
  if (!request.has_param("lease")) return 0;
  const std::string text = request.get_param_value("lease");
  LeaseTable::Id id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc() || end != text.data() + text.size() || id == 0) {
    throw ControlError("lease: expected a lease id (POST /leases grants one), got '" + excerpt(text) + "'");
  }
  return id;
}

namespace {

Reply lease_failure(LeaseTable::Outcome outcome, const std::string& lease) {
  if (outcome == LeaseTable::Outcome::kNotOwner) return Reply::error(403, "lease " + lease + " is another tenant's");
  return Reply::error(404, "lease " + lease + " does not exist (it expired or was revoked); grant a new one");
}

}  // namespace

std::optional<Reply> refuse_lease(const Tenancy& tenancy, std::string_view who, LeaseTable::Id lease) {
  const LeaseTable::Outcome outcome = tenancy.check_lease(lease, who);
  if (outcome == LeaseTable::Outcome::kOk) return std::nullopt;
  return lease_failure(outcome, std::to_string(lease));
}

void add_lease_routes(httplib::Server& server, Tenancy& tenancy, OnLoop on_loop,
                      std::function<void(Tenancy::Resource)> remove) {
  using nlohmann::json;
  const auto answer = [](httplib::Response& res, const Reply& reply) {
    res.status = reply.status;
    res.set_content(reply.body + "\n", "application/json");
  };
  // Runs `task` on the loop; a loop that does not answer is a 503.
  const auto run = [on_loop](std::function<Reply()> task) {
    try {
      return on_loop(std::move(task));
    } catch (const std::exception& e) {
      return Reply::error(503, e.what());
    }
  };
  const auto ms = [](Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  // The lease id of a /leases/<id> path; 0 when it is not one.
  const auto path_id = [](const std::string& digits) {
    LeaseTable::Id id = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    return error == std::errc() && end == digits.data() + digits.size() ? id : 0;
  };

  server.Post("/leases", [&server, &tenancy, run, answer, ms](const httplib::Request& req, httplib::Response& res) {
    Duration ttl{};
    try {
      ttl = lease_ttl_from_json(req.body);
    } catch (const ControlError& e) {
      return answer(res, Reply::error(400, e.what()));
    }
    answer(res, run([&tenancy, who = requester(server, req), ttl, ms] {
             const LeaseTable::Id id = tenancy.grant(who, ttl, EventLoop::now());
             if (id == 0) {
               return Reply::error(503, "this daemon holds " + std::to_string(LeaseTable::kMaxLeases) +
                                            " leases, the most it keeps; revoke one first");
             }
             return Reply{201, json{{"lease", id}, {"ttl_ms", ms(tenancy.ttl(id))}}.dump()};
           }));
  });
  server.Post(R"(/leases/(\d+)/keepalive)",
              [&server, &tenancy, run, answer, ms, path_id](const httplib::Request& req, httplib::Response& res) {
                const std::string text = excerpt(req.matches[1].str());
                answer(res, run([&tenancy, who = requester(server, req), id = path_id(req.matches[1].str()), text, ms] {
                         const LeaseTable::Outcome o = tenancy.keep_alive(id, who, EventLoop::now());
                         if (o != LeaseTable::Outcome::kOk) return lease_failure(o, text);
                         return Reply{200, json{{"lease", id}, {"ttl_ms", ms(tenancy.ttl(id))}}.dump()};
                       }));
              });
  server.Delete(R"(/leases/(\d+))", [&server, &tenancy, run, answer, remove, path_id](const httplib::Request& req,
                                                                                      httplib::Response& res) {
    const std::string text = excerpt(req.matches[1].str());
    answer(res, run([&tenancy, who = requester(server, req), id = path_id(req.matches[1].str()), text, remove] {
             std::vector<Tenancy::Resource> held;
             const LeaseTable::Outcome o = tenancy.revoke(id, who, held);
             if (o != LeaseTable::Outcome::kOk) return lease_failure(o, text);
             json removed = json::array();
             for (Tenancy::Resource r : held) {
               remove(r);
               removed.push_back(Tenancy::describe(r));
             }
             return Reply{200, json{{"revoked", id}, {"removed", removed}}.dump()};
           }));
  });
}

}  // namespace atp::control
