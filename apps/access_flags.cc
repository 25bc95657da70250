// The daemons' control-plane access flags (where the operator token is, the tenants file,
// whether /metrics is open, and the TLS certificate and key) and their --log-level.
#include <arpa/inet.h>

#include <iostream>

#include "atp/io/log.h"
#include "commands.h"

namespace atp::cli {

void add_access_flags(CLI::App& app, AccessFlags& flags) {
  app.add_option("--token-file", flags.token_file,
                 "file holding the operator's control token (mode 0600). Default: ATP_TOKEN, ATP_TOKEN_FILE, or "
                 "$ATP_HOME/token (ATP_HOME: ~/.atp), written with a fresh token at the first start; clients "
                 "(the atp command, ClusterJob, the torch backend) look in the same places");
  app.add_option("--tenants", flags.tenants_file,
                 "file of further tenants, one 'NAME TOKEN' per line (mode 0600): each may install jobs and hosts "
                 "and change only its own");
  app.add_flag("--metrics-open", flags.metrics_open, "serve GET /metrics without a token (for a Prometheus scraper)");
  app.add_option("--tls-cert", flags.tls_cert_file,
                 "serve the control plane over TLS (https) with this certificate, a PEM file (with --tls-key); "
                 "clients trust it through ATP_TLS_CA, the PEM file of its CA or the certificate itself");
  app.add_option("--tls-key", flags.tls_key_file, "the private key of --tls-cert, an unencrypted PEM file");
}

void add_log_level_flag(CLI::App& app) {
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& name) { log::set_level(*log::parse_level(name)); },
         "what the daemon logs to stderr, one line each: info (the default) logs the jobs and hosts installed and "
         "removed and every refused request; warn and error only failures; debug and trace more; off nothing")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

std::optional<control::AccessConfig> resolve_access(const std::string& command, const AccessFlags& flags,
                                                    std::string& origin) {
  control::AccessConfig access;
  try {
    const control::DaemonToken token = control::daemon_token(flags.token_file);
    access.operator_token = token.token;
    origin = token.origin + (token.generated ? " (new)" : "");
    if (!flags.tenants_file.empty()) access.tenants = control::read_tenants_file(flags.tenants_file);
    control::Authenticator check(access.operator_token, access.tenants);  // a tenant with the operator's token
  } catch (const control::AuthError& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return std::nullopt;
  }
  access.metrics_open = flags.metrics_open;
  if (flags.tls_cert_file.empty() != flags.tls_key_file.empty()) {
    std::cerr << command << ": "
              << (flags.tls_cert_file.empty() ? "--tls-key needs --tls-cert (the certificate of that key)"
                                              : "--tls-cert needs --tls-key (the certificate's private key)")
              << "\n";
    return std::nullopt;
  }
  access.tls_cert_file = flags.tls_cert_file;
  access.tls_key_file = flags.tls_key_file;
  return access;
}

std::string control_scheme(const control::AccessConfig& access) {
  return access.tls_cert_file.empty() ? "http://" : "https://";
}

void warn_if_clear_off_loopback(const std::string& command, const control::AccessConfig& access,
                                const std::string& control) {
  if (!access.tls_cert_file.empty()) return;
  in_addr ip{};
  const std::string host = control.substr(0, control.rfind(':'));
  if (::inet_pton(AF_INET, host.c_str(), &ip) == 1 && (ntohl(ip.s_addr) >> 24) == 127) return;
  std::cerr << command << ": warning: the control plane listens on " << control
            << " without TLS: tokens and job plans cross the network in clear (--tls-cert, --tls-key)" << std::endl;
}

}  // namespace atp::cli
