// Linux network namespaces: whether this process may build them, entering one from a thread,
// and finding and removing those of runs that are gone (named atp<pid>-<node>).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace atp::netns {

// "" when this process can build namespaces (it creates and removes one to find out); else one
// sentence saying why not (not root, no `ip` or `ethtool`, namespaces not permitted, as in some
// containers), for a test to skip with or a command to print.
std::string unavailable_reason();

// Removes what earlier runs left behind (namespaces named atp<pid>-* whose process is gone,
// e.g. after a SIGKILL). Returns how many namespaces it removed.
int remove_stale();

// Moves the calling thread into a network namespace for its lifetime and back afterwards.
// Sockets created meanwhile stay in that namespace, so this is how a process talks to a daemon
// listening on a namespace's own 127.0.0.1. Throws std::runtime_error naming the namespace.
class ThreadInNamespace {
 public:
  explicit ThreadInNamespace(const std::string& path);
  ~ThreadInNamespace();
  ThreadInNamespace(const ThreadInNamespace&) = delete;
  ThreadInNamespace& operator=(const ThreadInNamespace&) = delete;

 private:
  int home_ = -1;  // the thread's namespace before
};

// Returns once every interface set up in namespace `name` is running (its operational state up),
// or throws std::runtime_error naming those that are not after `timeout`. The end of a veth pair
// set up before its peer drops every frame it sends (its queues stay on the kernel's noop qdisc)
// until the link watcher, seeing the carrier, activates them; that waits for the rtnl lock, which
// other namespaces' removal can hold for a second and more.
void wait_until_carrying(const std::string& name, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Every namespace whose name starts with `prefix`, sorted (for tests: none after teardown).
std::vector<std::string> namespaces_with_prefix(const std::string& prefix);

}  // namespace atp::netns
