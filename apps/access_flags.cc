// The daemons' control-plane access flags: where the operator token is, the tenants file, and
// whether /metrics is open.
#include <iostream>

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
  return access;
}

}  // namespace atp::cli
