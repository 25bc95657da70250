// Subcommands of the `atp` command that live in their own files. Each adds itself to the
// parent CLI::App and returns the function to run when it was chosen (its exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

#include "atp/control/control_auth.h"

namespace atp::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // the work failed (a job, a daemon's run)
inline constexpr int kExitBadInput = 2;  // bad command line, config or scenario file

// `what` (a ScenarioError's sentence) prefixed with `file`, unless the parser already named it.
inline std::string with_file(const std::string& file, const std::string& what) {
  return what.rfind(file + ":", 0) == 0 ? what : file + ": " + what;
}

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// The control-plane flags of `atp switch` and `atp ps` (apps/access_flags.cc): --token-file,
// --tenants, --metrics-open, --tls-cert, --tls-key.
struct AccessFlags {
  std::string token_file;
  std::string tenants_file;
  bool metrics_open = false;
  std::string tls_cert_file;  // PEM; with tls_key_file, the control plane speaks https
  std::string tls_key_file;
};
void add_access_flags(CLI::App& app, AccessFlags& flags);
// --log-level, of the daemons: sets the process's log level (atp/io/log.h) when parsed.
void add_log_level_flag(CLI::App& app);
// What the flags name, read (and the default token generated if need be), and in `origin` where
// the token is ("/root/.atp/token", "ATP_TOKEN", "... (new)") for the daemon's start-up line; or
// nullopt after one sentence on stderr, prefixed with `command`.
std::optional<control::AccessConfig> resolve_access(const std::string& command, const AccessFlags& flags,
                                                    std::string& origin);
// The control plane's scheme for a start-up line: "https://" when `access` names a TLS
// certificate, else "http://".
std::string control_scheme(const control::AccessConfig& access);
// Warns on stderr, prefixed with `command`, when the control plane listens on `control`
// ("IP:PORT") off loopback without TLS: tokens and job plans would cross the network in clear.
void warn_if_clear_off_loopback(const std::string& command, const control::AccessConfig& access,
                                const std::string& control);

Command add_demo_command(CLI::App& parent);    // apps/demo_command.cc: `atp demo`
Command add_switch_command(CLI::App& parent);  // apps/switch_command.cc: `atp switch`
Command add_ps_command(CLI::App& parent);      // apps/ps_command.cc: `atp ps`
Command add_bench_command(CLI::App& parent);   // apps/bench_command.cc: `atp bench switch` and `allreduce`
// apps/topology_command.cc: `atp topology fat-tree`, `dragonfly` and `leaf-spine`.
Command add_topology_command(CLI::App& parent);
Command add_bom_command(CLI::App& parent);  // apps/bom_command.cc: `atp bom`
Command add_discover_command(CLI::App& parent);  // apps/discover_command.cc: `atp discover`
Command add_testbed_command(CLI::App& parent);   // apps/testbed_command.cc: `atp testbed`
// apps/bench_allreduce_command.cc: adds `allreduce` under `atp bench`; `run` is what it runs.
CLI::App* add_bench_allreduce_command(CLI::App& bench, std::function<int()>& run);

}  // namespace atp::cli
