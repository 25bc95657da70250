// An HTTP client for a daemon's control plane (`atp switch`, `atp ps`): what the runners, the
// `atp` command and ClusterJob talk to the daemons with. One place for its address, token, TLS
// trust and timeouts.
#pragma once

#include <httplib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "atp/control/control_auth.h"
#include "atp/io/socket_address.h"

namespace atp::control {

// The PEM file a client trusts daemons' TLS certificates with: the environment variable
// ATP_TLS_CA (the CA that signed the daemons' --tls-cert, or a daemon's self-signed certificate
// itself); "" when it is unset or empty (plain HTTP). Throws AuthError when it names a file that
// cannot be read or holds no PEM certificate: never a silent fall back to plain HTTP.
inline std::string tls_ca_file() {
  const char* path = std::getenv("ATP_TLS_CA");
  if (path == nullptr || *path == '\0') return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw AuthError(std::string("ATP_TLS_CA names '") + path + "', which cannot be read (" + std::strerror(errno) +
                    "); set it to the PEM file of the CA of the daemons' certificates, or unset it for plain HTTP");
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    throw AuthError(std::string("ATP_TLS_CA names '") + path +
                    "', which holds no PEM certificate; set it to the PEM file of the CA of the daemons' "
                    "certificates, or unset it for plain HTTP");
  }
  return path;
}

// How a client reaches daemons: the token it sends, and the CA it trusts their TLS certificates
// with ("": plain HTTP).
struct ClientAccess {
  std::string token;
  std::string tls_ca;
};
// For daemons someone else started: client_token() and tls_ca_file(). Throws AuthError. A program
// that starts its own daemons (the runners, ClusterJob's local cluster) knows their token and
// speaks plain HTTP to them whatever ATP_TLS_CA says.
inline ClientAccess client_access() { return {client_token(), tls_ca_file()}; }

// A client sending access.token with every request. A daemon that does not accept the
// connection within 2 s, or answer within 5 s, is a failed request (httplib::Result without a
// response), not a hang. With access.tls_ca the client speaks https, and a daemon whose
// certificate is not signed by that CA, or does not name `control`'s IP (subjectAltName IP:...),
// is a failed request (Error::SSLServerVerification); a daemon serving plain HTTP then fails too
// (the handshake).
inline httplib::Client client(const SocketAddress& control, const ClientAccess& access) {
  const std::string text = control.to_string();
  const std::string& ca = access.tls_ca;
  httplib::Client c =
      ca.empty() ? httplib::Client(text.substr(0, text.rfind(':')), control.port) : httplib::Client("https://" + text);
  if (!ca.empty()) {
    c.set_ca_cert_path(ca);
    c.enable_server_certificate_verification(true);
  }
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  c.set_bearer_token_auth(access.token);
  return c;
}

}  // namespace atp::control
