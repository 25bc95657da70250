// Network namespaces: the probe, a thread's visit, and the clean-up of dead runs' leftovers.
#include "atp/io/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "atp/io/processes.h"

namespace atp::netns {

std::string unavailable_reason() {
  if (::geteuid() != 0) return "network namespaces need root (run as root, or use --backend loopback)";
  std::string output;
  if (processes::run_command({"ip", "-V"}, "", &output) != 0) {
    return "the `ip` command (Debian package iproute2) is missing";
  }
  if (processes::run_command({"ethtool", "--version"}, "", &output) != 0) {
    return "the `ethtool` command (Debian package ethtool) is missing";
  }
  // Root is not always enough (a container without CAP_SYS_ADMIN): try one namespace.
  const std::string probe = "atp" + std::to_string(::getpid()) + "-probe";
  if (processes::run_command({"ip", "netns", "add", probe}, "", &output) != 0) {
    while (!output.empty() && output.back() == '\n') output.pop_back();
    return "cannot create a network namespace here (`ip netns add` said: " + output + ")";
  }
  processes::run_command({"ip", "netns", "del", probe}, "", &output);
  return "";
}

std::vector<std::string> namespaces_with_prefix(const std::string& prefix) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/var/run/netns", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

int remove_stale() {
  int removed = 0;
  for (const std::string& name : namespaces_with_prefix("atp")) {
    if (!processes::left_by_dead_process(name, "atp")) continue;  // atp<pid>-<node>
    std::string ignored;
    if (processes::run_command({"ip", "netns", "del", name}, "", &ignored) == 0) ++removed;
  }
  return removed;
}

ThreadInNamespace::ThreadInNamespace(const std::string& path) {
  home_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home_ < 0)
    throw std::runtime_error(std::string("cannot open this thread's network namespace: ") + std::strerror(errno));
  const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0 || ::setns(target, CLONE_NEWNET) != 0) {
    const std::string why = std::strerror(errno);
    if (target >= 0) ::close(target);
    ::close(home_);
    throw std::runtime_error("cannot enter the network namespace " + path + ": " + why);
  }
  ::close(target);
}

ThreadInNamespace::~ThreadInNamespace() {
  // Going home cannot fail for a namespace we came from (we hold a reference to it).
  [[maybe_unused]] const int r = ::setns(home_, CLONE_NEWNET);
  ::close(home_);
}

}  // namespace atp::netns
