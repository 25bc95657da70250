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
#include "atp/io/udp_socket.h"

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

LocalDaemons::LocalDaemons(const std::string& binary, const Topology& topology, const std::string& ps_switch,
                           const std::string& token)
    : token_(token.empty() ? control::random_token() : token) {
  const std::size_t n = topology.switches.size();
  if (n == 0 || n > 255) {
    throw std::invalid_argument("a local network has 1 to 255 switches (a host_pool each), not " + std::to_string(n));
  }
  // Data addresses are picked before anything starts, each socket held until all are picked (so
  // they are distinct): a switch's config names its neighbours'. A switch binds its own again at
  // once; another process taking one in between fails that switch loudly.
  std::map<std::string, SocketAddress> data;
  {
    std::vector<UdpSocket> held;
    for (const SwitchSpec& sw : topology.switches) {
      held.emplace_back(SocketAddress::loopback(0));
      data[sw.name] = held.back().local_endpoint();
      names_.push_back(sw.name);
    }
  }
  auto known = [&](const std::string& name, const std::string& what) {
    if (!data.contains(name)) throw std::invalid_argument(what + " '" + name + "' is not a switch of the topology");
  };
  known(ps_switch, "the PS's switch");
  std::map<std::string, std::vector<std::string>> neighbours;
  for (const SwitchLink& l : topology.switch_links) {
    known(l.a, "link end");
    known(l.b, "link end");
    neighbours[l.a].push_back(l.b);
    neighbours[l.b].push_back(l.a);
  }
  // The daemons read their configs and the token when they start, before the line that says they
  // are up: the folder goes when they are (a process that ends without destroying this, as a
  // training script may, leaves no secret behind).
  const processes::TempDir dir("atp-local");
  const std::string token_file = (dir.path() / "token").string();
  processes::write_private_file(token_file, token_ + "\n");
  std::vector<processes::Child*> started;
  for (std::size_t i = 0; i < n; ++i) {
    const SwitchSpec& sw = topology.switches[i];
    control::SwitchDaemonConfig c;
    c.name = sw.name;
    c.pipeline = sw.config;
    c.listen = data.at(sw.name);
    if (n > 1) c.host_pool = {0x0A000000 + (static_cast<Address>(i + 1) << 16), 16};
    for (const std::string& peer : neighbours[sw.name]) c.ports.push_back({data.at(peer), {}, {}, "", ""});
    const auto config = dir.path() / ("switch-" + std::to_string(i) + ".yaml");
    processes::write_file(config, control::to_yaml(c));
    started.push_back(&start_switch_process(children_, binary, sw.name, config.string(), token_file));
  }
  const auto controls = control_addresses(children_, started, processes::Clock::now() + processes::kStartupTimeout);
  for (std::size_t i = 0; i < n; ++i) switch_control_[names_[i]] = controls[i];
  PsProcessOptions options;
  options.listen = SocketAddress::loopback(0);
  options.uplink = data.at(ps_switch);
  processes::Child& ps = start_ps_process(children_, binary, "local", options, token_file);
  ps_control_ = control_addresses(children_, {&ps}, processes::Clock::now() + processes::kStartupTimeout).front();
}

LocalDaemons::LocalDaemons(const std::string& binary, std::uint32_t aggregators, const std::string& token)
    : LocalDaemons(
          binary,
          [aggregators] {
            Topology one;
            one.switches.push_back({"local", {}});
            one.switches.back().config.num_aggregators = aggregators;
            return one;
          }(),
          "local", token) {}

std::vector<SocketAddress> LocalDaemons::switch_controls() const {
  std::vector<SocketAddress> controls;
  for (const std::string& name : names_) controls.push_back(switch_control_.at(name));
  return controls;
}

}  // namespace atp
