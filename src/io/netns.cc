// Network namespaces: the probe, a thread's visit, and the clean-up of dead runs' leftovers.
#include "atp/io/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

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

namespace {

// The interfaces `ip -o link show` lists as set up (the UP flag) whose operational state is not
// up yet ("3: a@b: <NO-CARRIER,BROADCAST,MULTICAST,UP,M-DOWN> ... state LOWERLAYERDOWN ..."); a
// loopback's stays UNKNOWN.
std::vector<std::string> up_but_not_running(const std::string& listing) {
  std::vector<std::string> waiting;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t flags = line.find('<'), flags_end = line.find('>');
    if (flags == std::string::npos || flags_end == std::string::npos) continue;
    const std::string f = "," + line.substr(flags + 1, flags_end - flags - 1) + ",";
    if (f.find(",UP,") == std::string::npos) continue;
    if (line.find(" state UP ") != std::string::npos || line.find(" state UNKNOWN ") != std::string::npos) continue;
    const std::size_t colon = line.find(": ");
    waiting.push_back(line.substr(colon + 2, line.find_first_of(":@", colon + 2) - colon - 2));
  }
  return waiting;
}

}  // namespace

void wait_until_carrying(const std::string& name, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string listing;
    // `ip link show` dumps under the rtnl lock, which the link watcher holds while it sets a link's
    // state up and then activates its queues: a link shown up is carrying.
    if (processes::run_command({"ip", "-n", name, "-o", "link", "show"}, "", &listing) != 0) {
      throw std::runtime_error("cannot list the interfaces of network namespace " + name + ": " + listing);
    }
    const std::vector<std::string> waiting = up_but_not_running(listing);
    if (waiting.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (const std::string& w : waiting) names += (names.empty() ? "" : ", ") + w;
      throw std::runtime_error("in network namespace " + name + ", " + names +
                               " did not start carrying frames within " + std::to_string(timeout.count()) +
                               " ms of coming up");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
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
