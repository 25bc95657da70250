// Daemons as child processes (daemon_processes.h).
#include "atp/cluster/daemon_processes.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "atp/control/control_auth.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/switch_config.h"

namespace atp {

namespace {

// The daemons this process starts share its stderr: they log failures only, not every job and
// host their runner installs (`atp switch --log-level`).
constexpr const char* kChildLogLevel = "warn";

bool executable(const std::string& path) {
  std::error_code ignored;
  return !path.empty() && std::filesystem::is_regular_file(path, ignored) && ::access(path.c_str(), X_OK) == 0;
}

// "... control http://127.0.0.1:40123, ...", "... control https://127.0.0.1:40123, ..." (TLS) or
// "... control 127.0.0.1:40123 ...": the address.
SocketAddress control_from_line(const std::string& line, const std::string& who) {
  std::size_t at = line.find("control ");
  if (at == std::string::npos) throw std::runtime_error(who + " did not start (its first line: '" + line + "')");
  at += 8;
  if (line.compare(at, 7, "http://") == 0) at += 7;
  if (line.compare(at, 8, "https://") == 0) at += 8;
  std::size_t end = at;
  while (end < line.size() &&
         (std::isdigit(static_cast<unsigned char>(line[end])) || line[end] == '.' || line[end] == ':')) {
    ++end;
  }
  return SocketAddress::parse(line.substr(at, end - at));
}

}  // namespace

std::string find_atp_binary(const std::string& configured) {
  if (!configured.empty()) {
    if (!executable(configured)) throw std::runtime_error("the atp binary '" + configured + "' is no executable file");
    return configured;
  }
  if (const char* env = std::getenv("ATP_BINARY"); env != nullptr && *env != '\0') {
    if (!executable(env)) {
      throw std::runtime_error(std::string("ATP_BINARY='") + env + "' is no executable file; set it to the atp binary");
    }
    return env;
  }
  // The file this function was linked into: the PyTorch extension (atp_torch/_C...so), whose
  // package has the binary beside it, or a program next to its atp.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&find_atp_binary), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ignored;
    const auto beside = std::filesystem::canonical(info.dli_fname, ignored).parent_path() / "atp";
    if (executable(beside.string())) return beside.string();
  }
  throw std::runtime_error(
      "no atp binary to start the daemons from: set ATP_BINARY to it (it is build/atp in a build tree)");
}

processes::Child& start_switch_process(processes::ChildSet& children, const std::string& binary,
                                       const std::string& name, const std::string& config_file,
                                       const std::string& token_file, const std::string& netns) {
  return children.start(
      "switch '" + name + "'",
      {binary, "switch", "--config", config_file, "--token-file", token_file, "--log-level", kChildLogLevel}, false,
      netns);
}

processes::Child& start_ps_process(processes::ChildSet& children, const std::string& binary, const std::string& host,
                                   const PsProcessOptions& options, const std::string& token_file,
                                   const std::string& netns) {
  std::vector<std::string> args = {binary,         "ps",
                                   "--listen",     options.listen.to_string(),
                                   "--control",    options.control.to_string(),
                                   "--token-file", token_file,
                                   "--log-level",  kChildLogLevel};
  if (options.uplink) args.insert(args.end(), {"--uplink", options.uplink->to_string()});
  if (!options.address.empty()) args.insert(args.end(), {"--address", options.address});
  return children.start("ps '" + host + "'", args, false, netns);
}

std::vector<SocketAddress> control_addresses(processes::ChildSet& children,
                                             const std::vector<processes::Child*>& started,
                                             processes::Clock::time_point deadline) {
  const std::vector<std::string> lines = children.first_lines(started, deadline);
  std::vector<SocketAddress> addresses;
  for (std::size_t i = 0; i < started.size(); ++i) addresses.push_back(control_from_line(lines[i], started[i]->name));
  return addresses;
}

LocalDaemons::LocalDaemons(const std::string& binary, std::uint32_t aggregators, const std::string& token)
    : token_(token.empty() ? control::random_token() : token) {
  const std::string token_file = (dir_.path() / "token").string();
  processes::write_private_file(token_file, token_ + "\n");
  const auto config = dir_.path() / "switch.yaml";
  control::SwitchDaemonConfig sw_config;  // UDP ports on 127.0.0.1, the data and control ports the kernel's
  sw_config.name = "local";
  sw_config.pipeline.num_aggregators = aggregators;
  processes::write_file(config, control::to_yaml(sw_config));
  processes::Child& sw = start_switch_process(children_, binary, "local", config.string(), token_file);
  switch_control_ = control_addresses(children_, {&sw}, processes::Clock::now() + processes::kStartupTimeout).front();
  PsProcessOptions options;
  options.listen = SocketAddress::loopback(0);
  options.uplink = control::SwitchClient(sw.name, switch_control_, access()).data_address();
  processes::Child& ps = start_ps_process(children_, binary, "local", options, token_file);
  ps_control_ = control_addresses(children_, {&ps}, processes::Clock::now() + processes::kStartupTimeout).front();
}

}  // namespace atp
