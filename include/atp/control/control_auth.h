// Who may use a daemon's control plane: bearer tokens, found by daemons and clients the same way
// (as Jupyter's), and the tenants a daemon knows. Other local users are other tenants, so
// loopback is no exemption.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace atp::control {

// A token that cannot be found, read or trusted: what() is one sentence naming the file or the
// variable and what to do.
class AuthError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a token comes from, first match wins:
//   ATP_TOKEN       the token itself;
//   ATP_TOKEN_FILE  a file holding it;
//   the user's default file, $ATP_HOME/token (ATP_HOME defaults to ~/.atp).
// A token file must be a regular file that only its owner can read or write (mode 0600 or
// stricter, as ssh demands of keys); its first line is the token: 16 to 256 characters of
// letters, digits and -._~+/=.
// A daemon serving TLS (--tls-cert, --tls-key) is reached over https by clients whose ATP_TLS_CA
// names the PEM file of the CA that signed its certificate, or the self-signed certificate
// itself; without ATP_TLS_CA clients speak plain HTTP (control_client.h).
std::string default_token_file();
std::string read_token_file(const std::string& path);

// A fresh token: 64 hex digits from getrandom(). Throws AuthError if the kernel gives no randomness.
std::string random_token();

// A client's token (the `atp` command, the runners, ClusterJob, the torch backend). Throws
// AuthError when none is set and the default file does not exist.
std::string client_token();

struct DaemonToken {
  std::string token;
  std::string origin;      // "ATP_TOKEN", or the file it was read from or written to
  bool generated = false;  // a fresh token was written to `origin` at start-up
};
// A daemon's operator token: `file` (its --token-file) when given, else as client_token(); when
// none is set and the default file does not exist, a fresh random token is written there (0600,
// in a 0700 folder). Two daemons starting at once agree on one token. Throws AuthError.
DaemonToken daemon_token(const std::string& file = "");

// Further tenants of a shared daemon (--tenants FILE): one "NAME TOKEN" per line, '#' comments.
// Names are 1-64 characters of letters, digits and -._ and may not be "operator"; tokens as
// above; both unique. The file has the token file's permission rule. Throws AuthError naming the
// line.
struct Tenant {
  std::string name;
  std::string token;
};
std::vector<Tenant> read_tenants_file(const std::string& path);

// How a daemon finds its operator token, its tenants, whether /metrics is open and its TLS
// certificate: what its command line (--token-file, --tenants, --metrics-open, --tls-cert,
// --tls-key) or its owner in C++ says.
struct AccessConfig {
  // Empty: daemon_token()'s (ATP_TOKEN, ATP_TOKEN_FILE, or the default file, written at the first
  // start). An in-process daemon only its creator talks to may pass random_token().
  std::string operator_token;
  std::vector<Tenant> tenants;
  bool metrics_open = false;
  // The control plane's TLS certificate (chain) and private key, PEM files: both or neither.
  // Empty: plain HTTP (control::ServerAccess). ({}: a brace list that stops before them, as
  // tests' {token, tenants, open} does, stays free of -Wmissing-field-initializers.)
  std::string tls_cert_file{};
  std::string tls_key_file{};
};

// Maps a request's Authorization header to the tenant it speaks for. The operator (the daemon's
// own token) may do anything; a tenant only changes what it created (the daemons check).
class Authenticator {
 public:
  static constexpr std::string_view kOperator = "operator";

  explicit Authenticator(std::string operator_token, std::vector<Tenant> tenants = {});
  // kOperator, a tenant's name, or nullopt when the header is not "Bearer <a known token>".
  // Tokens are compared in constant time.
  std::optional<std::string> identify(std::string_view authorization) const;

 private:
  std::vector<Tenant> tokens_;  // the operator first
};

}  // namespace atp::control
