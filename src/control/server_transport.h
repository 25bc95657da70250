// How the control server's connections move their bytes: in clear or inside TLS (OpenSSL), each
// call non-blocking so that every wait is the connection's own, under its deadlines. Private to
// the control layer (control_server.cc, server_connection.cc).
#pragma once

#include <openssl/ssl.h>
#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <memory>

#include "atp/control/control.h"

namespace atp::control::detail {

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

// The socket's own bytes (plain HTTP). The socket stays as it is: each call asks not to block.
std::unique_ptr<Transport> plain_transport(int sock);

// TLS over the socket with `context` (from tls_context), the server's side. OpenSSL reads and
// writes the socket itself: it is made non-blocking, so that every wait is the caller's. Where
// that or OpenSSL's setup fails, open() fails.
std::unique_ptr<Transport> tls_transport(SSL_CTX* context, int sock);

// The TLS context of a server with `access`'s certificate and key; null when it has neither.
// Throws AuthError naming the file that is missing, unreadable, not PEM, or a key that is not the
// certificate's.
std::shared_ptr<SSL_CTX> tls_context(const ServerAccess& access);

// OpenSSL writes to the socket with write(), which raises SIGPIPE when the client has gone (the
// daemons do not ignore it): the thread serving a TLS connection blocks SIGPIPE meanwhile, and
// takes the one that came before unblocking it.
class SigpipeBlocked {
 public:
  SigpipeBlocked();
  ~SigpipeBlocked();
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_, old_;
};

}  // namespace atp::control::detail
