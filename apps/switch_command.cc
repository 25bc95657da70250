// `atp switch --config FILE`: runs a software ATP switch (on UDP peers or Linux interfaces) until
// SIGINT/SIGTERM;
// `atp switch stats --control HOST:PORT`: prints a running switch's counters as JSON.
#include <httplib.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "atp/control/control_client.h"
#include "atp/daemons/switch_daemon.h"
#include "atp/io/packet_socket.h"
#include "atp/io/udp_socket.h"
#include "commands.h"

namespace atp::cli {
namespace {

int run_switch(const std::string& config_path, const AccessFlags& flags) {
  if (config_path.empty()) {
    std::cerr << "atp switch: --config FILE is required (or use `atp switch stats --control HOST:PORT`)\n";
    return kExitBadInput;
  }
  SwitchDaemonConfig config;
  try {
    config = load_switch_config(config_path);
  } catch (const SwitchConfigError& e) {
    std::cerr << "atp switch: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::string token_origin;
  const std::optional<control::AccessConfig> access = resolve_access("atp switch", flags, token_origin);
  if (!access) return kExitBadInput;
  config.access = *access;
  // Signals are taken synchronously by sigwait below: blocked here, before any thread starts,
  // so that every thread of the daemon inherits the mask and none is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // The constructor binds the config's data and control addresses: failing there (an address in
  // use or not on this host) is the config's fault, as for `atp ps`.
  std::unique_ptr<SwitchDaemon> daemon;
  try {
    daemon = std::make_unique<SwitchDaemon>(config);
  } catch (const UdpSetupError& e) {
    std::cerr << "atp switch: " << e.what() << "; choose another `listen:` address\n";
    return kExitBadInput;
  } catch (const PacketSetupError& e) {  // an `interface:` port: the message names the interface
    std::cerr << "atp switch: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {  // the control address; its message names it and the key
    std::cerr << "atp switch: " << e.what() << "\n";
    return kExitBadInput;
  }
  try {
    daemon->start();
  } catch (const std::exception& e) {
    std::cerr << "atp switch: " << e.what() << "\n";
    return kExitFailed;
  }
  std::string data = "data " + daemon->data_endpoint().to_string();
  if (config.interface_ports()) {
    data = "interfaces";
    for (const SwitchPortConfig& port : config.ports) data += " " + port.interface;
  }
  warn_if_clear_off_loopback("atp switch", config.access, daemon->control_endpoint());
  const std::uint32_t threads = daemon->dataplane_threads();
  std::cout << "atp switch " << config.name << ": " << data << ", control " << control_scheme(config.access)
            << daemon->control_endpoint() << ", " << config.ports.size() << " ports, " << threads
            << (threads == 1 ? " dataplane thread" : " dataplane threads") << ", token " << token_origin << std::endl;
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  daemon->stop();
  return kExitOk;
}

int print_stats(const std::string& control) {
  SocketAddress endpoint;
  try {
    endpoint = SocketAddress::parse(control);
  } catch (const std::invalid_argument&) {
    std::cerr << "atp switch stats: --control must be HOST:PORT like 127.0.0.1:9100, got '" << control << "'\n";
    return kExitBadInput;
  }
  const std::string text = endpoint.to_string();
  control::ClientAccess access;
  try {
    access = control::client_access();
  } catch (const control::AuthError& e) {
    std::cerr << "atp switch stats: " << e.what() << "\n";
    return kExitBadInput;
  }
  httplib::Client client = control::client(endpoint, access);
  const httplib::Result result = client.Get("/stats");
  if (!result) {
    std::cerr << "atp switch stats: cannot reach the switch control endpoint " << text << " ("
              << httplib::to_string(result.error()) << ")\n";
    return kExitFailed;
  }
  if (result->status != 200) {
    std::cerr << "atp switch stats: " << text << " answered HTTP " << result->status << ": " << result->body << "\n";
    return kExitFailed;
  }
  std::cout << result->body;
  return kExitOk;
}

}  // namespace

Command add_switch_command(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("switch", "run a software ATP switch on UDP ports or Linux interfaces (until Ctrl-C)");
  auto config_path = std::make_shared<std::string>();
  auto control = std::make_shared<std::string>();
  auto access = std::make_shared<AccessFlags>();
  c.app->add_option("--config", *config_path,
                    "switch config (YAML): aggregators, ports, routes, control address. A port is `peer: IP:PORT` "
                    "(a UDP peer) or `interface: NAME` (a Linux interface such as a veth end, read and written as "
                    "Ethernet frames; needs root or CAP_NET_RAW, offloads off: ethtool -K NAME tx off rx off tso off "
                    "gso off gro off); all ports of a switch are of one kind");
  add_access_flags(*c.app, *access);
  add_log_level_flag(*c.app);
  c.app->require_subcommand(0, 1);
  CLI::App* stats = c.app->add_subcommand("stats", "print a running switch's counters as JSON");
  stats->add_option("--control", *control, "the switch's control endpoint HOST:PORT")->required();
  c.run = [config_path, control, stats, access] {
    return stats->parsed() ? print_stats(*control) : run_switch(*config_path, *access);
  };
  return c;
}

}  // namespace atp::cli
