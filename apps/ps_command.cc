// `atp ps`: the parameter server daemon. Binds its data and control ports, prints them, serves
// jobs installed over HTTP until SIGINT or SIGTERM, then stops cleanly.
#include <arpa/inet.h>

#include <csignal>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "atp/daemons/ps_daemon.h"
#include "commands.h"

namespace atp::cli {
namespace {

int run_ps(const std::string& listen, const std::string& control, const std::string& uplink, const std::string& address,
           const AccessFlags& flags) {
  PsDaemonConfig config;
  try {
    config.data = SocketAddress::parse(listen);
    config.control = SocketAddress::parse(control);
    if (!uplink.empty()) config.uplink = SocketAddress::parse(uplink);
  } catch (const std::invalid_argument& e) {
    std::cerr << "atp ps: " << e.what() << "\n";
    return kExitBadInput;
  }
  if (!address.empty()) {
    in_addr parsed{};
    if (::inet_pton(AF_INET, address.c_str(), &parsed) != 1) {
      std::cerr << "atp ps: --address '" << address << "' is not an IPv4 address such as 10.0.0.3\n";
      return kExitBadInput;
    }
    config.address = ntohl(parsed.s_addr);
  }
  std::string token_origin;
  const std::optional<control::AccessConfig> access = resolve_access("atp ps", flags, token_origin);
  if (!access) return kExitBadInput;
  config.access = *access;

  // Block the stop signals before any thread exists, so every thread inherits the mask and only
  // sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<PsDaemon> daemon;
  try {
    daemon = std::make_unique<PsDaemon>(config);
  } catch (const std::exception& e) {  // a port in use, an address not on this host
    std::cerr << "atp ps: " << e.what() << "\n";
    return kExitBadInput;
  }
  daemon->start();
  warn_if_clear_off_loopback("atp ps", config.access, daemon->control_endpoint().to_string());
  // One line a parent process can parse to learn kernel-chosen ports ("control https://..." over TLS).
  std::cout << "atp ps: data " << daemon->data_endpoint().to_string() << " control "
            << (config.access.tls_cert_file.empty() ? "" : "https://") << daemon->control_endpoint().to_string()
            << " uplink " << (config.uplink ? config.uplink->to_string() : "none (to each packet's destination IP)")
            << ", token " << token_origin << std::endl;
  int signal = 0;
  sigwait(&stop_signals, &signal);
  daemon->stop();
  return kExitOk;
}

}  // namespace

Command add_ps_command(CLI::App& parent) {
  struct Options {
    std::string listen = "127.0.0.1:0";
    std::string control = "127.0.0.1:0";
    std::string uplink;
    std::string address;
    AccessFlags access;
  };
  auto options = std::make_shared<Options>();
  Command c;
  c.app = parent.add_subcommand(
      "ps", "Run a parameter server daemon: jobs are installed over HTTP (POST /jobs), packets go to the uplink");
  c.app->add_option("--listen", options->listen, "UDP address of the data plane (port 0: any free port)")
      ->capture_default_str();
  c.app->add_option("--control", options->control, "HTTP address of the control plane (port 0: any free port)")
      ->capture_default_str();
  c.app->add_option("--uplink", options->uplink,
                    "UDP address every packet is sent to: the PS host's ToR switch (loopback runs). Without it, "
                    "each packet goes to its destination's IP at UDP port " +
                        std::to_string(kUdpPort) + " (parameter packets: the job's multicast group)");
  c.app->add_option("--address", options->address,
                    "This PS host's overlay address (10.0.0.x); jobs for another address are refused");
  add_access_flags(*c.app, options->access);
  add_log_level_flag(*c.app);
  c.app->footer(
      "Control plane (every request with 'Authorization: Bearer TOKEN'): POST /jobs (a PsConfig as JSON), DELETE "
      "/jobs/<id>, POST /leases, GET /metrics (Prometheus), GET /stats (JSON).\nPrints 'atp ps: data IP:PORT "
      "control IP:PORT ...' once ready; SIGINT or SIGTERM stops it.");
  c.run = [options] {
    return run_ps(options->listen, options->control, options->uplink, options->address, options->access);
  };
  return c;
}

}  // namespace atp::cli
