// The control server's byte transports (server_transport.h): the socket's own bytes, or TLS over
// it with OpenSSL, and the TLS context a server's certificate and key make.
#include "server_transport.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

namespace atp::control::detail {
namespace {

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

}  // namespace

std::unique_ptr<Transport> plain_transport(int sock) { return std::make_unique<PlainTransport>(sock); }

std::unique_ptr<Transport> tls_transport(SSL_CTX* context, int sock) {
  return std::make_unique<TlsTransport>(context, sock);
}

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

SigpipeBlocked::SigpipeBlocked() {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
}

SigpipeBlocked::~SigpipeBlocked() {
  sigset_t pending;
  if (!sigismember(&old_, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
    const timespec now{};
    ::sigtimedwait(&pipe_, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace atp::control::detail
