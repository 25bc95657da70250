// Network namespaces (netns.h): the probe's answer for root, non-root, missing tools and missing
// capabilities, a thread's visit to a namespace and its way back, and the clean-up of dead runs.
#include "atp/io/netns.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "atp/io/processes.h"
#include "support/in_child.h"

namespace atp {
namespace {

using test::in_child;

// This run's namespaces: atp<pid>-nt-..., so that no other run's are touched, and a run killed
// half-way leaves only what netns::remove_stale recognises as a dead run's.
std::string own_prefix() { return "atp" + std::to_string(::getpid()) + "-nt-"; }

std::uint64_t inode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot stat " + path);
  return st.st_ino;
}

// The network namespace the calling thread is in (its inode, as `ip netns identify` compares).
std::uint64_t thread_namespace() { return inode_of("/proc/thread-self/ns/net"); }

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Namespaces this test adds; each removed when it goes, however the test ended.
class OwnNamespaces {
 public:
  OwnNamespaces() = default;
  OwnNamespaces(const OwnNamespaces&) = delete;
  OwnNamespaces& operator=(const OwnNamespaces&) = delete;
  ~OwnNamespaces() {
    for (const std::string& name : names_) {
      std::string ignored;
      processes::run_command({"ip", "netns", "del", name}, "", &ignored);
    }
  }
  // Adds namespace `name`; returns its path.
  std::string add(const std::string& name) {
    names_.push_back(name);
    std::string output;
    if (processes::run_command({"ip", "netns", "add", name}, "", &output) != 0) {
      throw std::runtime_error("ip netns add " + name + ": " + output);
    }
    return "/var/run/netns/" + name;
  }

 private:
  std::vector<std::string> names_;
};

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = netns::unavailable_reason(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
  }
};

// The probe answers "" for root here and leaves no namespace of its own behind.
TEST_F(NetnsTest, TheProbeAnswersEmptyForRootAndLeavesNothing) {
  EXPECT_EQ(netns::unavailable_reason(), "");
  EXPECT_TRUE(netns::namespaces_with_prefix("atp" + std::to_string(::getpid()) + "-probe").empty());
}

// A process that is not root is told so, in one sentence that names the way out.
TEST(NetnsProbe, SaysRootIsNeededToAProcessThatIsNotRoot) {
  const std::string reason = in_child([] {
    if (::geteuid() == 0 && (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)) {
      return std::string("cannot drop root");
    }
    return netns::unavailable_reason();
  });
  EXPECT_EQ(reason, "network namespaces need root (run as root, or use --backend loopback)");
}

// Root without `ip`, or with `ip` but without `ethtool`, is told which package is missing.
TEST(NetnsProbe, NamesTheMissingCommandAndItsPackage) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: the tools are looked for only by root";
  const std::filesystem::path empty = ::testing::TempDir() + "netns_test_path_" + std::to_string(::getpid());
  std::filesystem::remove_all(empty);
  std::filesystem::create_directories(empty);
  const std::string without_ip = in_child([&] {
    ::setenv("PATH", empty.c_str(), 1);
    return netns::unavailable_reason();
  });
  EXPECT_EQ(without_ip, "the `ip` command (Debian package iproute2) is missing");

  std::string ip_path;
  processes::run_command({"sh", "-c", "command -v ip"}, "", &ip_path);
  while (!ip_path.empty() && ip_path.back() == '\n') ip_path.pop_back();
  ASSERT_FALSE(ip_path.empty()) << "no ip here";
  std::filesystem::create_symlink(ip_path, empty / "ip");
  const std::string without_ethtool = in_child([&] {
    ::setenv("PATH", empty.c_str(), 1);
    return netns::unavailable_reason();
  });
  EXPECT_EQ(without_ethtool, "the `ethtool` command (Debian package ethtool) is missing");
  std::filesystem::remove_all(empty);
}

// Root without CAP_SYS_ADMIN (as in some containers) is told that `ip netns add` failed and
// what it said, on one line; the failed probe leaves no namespace behind.
TEST_F(NetnsTest, RootWithoutTheCapabilityIsToldWhatIpNetnsAddSaid) {
  const std::string reason = in_child([] {
    if (::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0) return std::string("cannot drop CAP_SYS_ADMIN");
    return std::to_string(::getpid()) + " " + netns::unavailable_reason();
  });
  const std::size_t space = reason.find(' ');
  ASSERT_NE(space, std::string::npos) << reason;
  const std::string child = reason.substr(0, space);
  const std::string sentence = reason.substr(space + 1);
  EXPECT_EQ(sentence.rfind("cannot create a network namespace here (`ip netns add` said: ", 0), 0u) << sentence;
  EXPECT_TRUE(sentence.ends_with(')')) << sentence;
  EXPECT_EQ(sentence.find('\n'), std::string::npos) << "one line: " << sentence;
  EXPECT_TRUE(netns::namespaces_with_prefix("atp" + child + "-").empty());
}

// The thread is in the namespace while the object lives and back home after; sockets it made
// meanwhile stay in the namespace. Another thread of the process never moves.
TEST_F(NetnsTest, AThreadEntersTheNamespaceAndComesBack) {
  OwnNamespaces own;
  const std::string path = own.add(own_prefix() + "enter");
  const std::uint64_t home = thread_namespace();
  const std::uint64_t target = inode_of(path);
  ASSERT_NE(home, target);
  int socket_fd = -1;
  {
    netns::ThreadInNamespace in(path);
    EXPECT_EQ(thread_namespace(), target);
    socket_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  EXPECT_EQ(thread_namespace(), home);
  ASSERT_GE(socket_fd, 0);
  const int socket_namespace = ::ioctl(socket_fd, SIOCGSKNS);  // the socket's namespace, as an fd
  ::close(socket_fd);
  ASSERT_GE(socket_namespace, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(socket_namespace, &st), 0);
  ::close(socket_namespace);
  EXPECT_EQ(st.st_ino, target) << "the socket stays where it was made";
}

// Only the calling thread moves: the main thread stays home while another thread is inside.
TEST_F(NetnsTest, OnlyTheCallingThreadMoves) {
  OwnNamespaces own;
  const std::string path = own.add(own_prefix() + "thread");
  const std::uint64_t home = thread_namespace();
  std::promise<std::uint64_t> inside;
  std::promise<void> checked;
  std::uint64_t after = 0;
  std::thread visitor([&] {
    {
      netns::ThreadInNamespace in(path);
      inside.set_value(thread_namespace());
      checked.get_future().wait();
    }
    after = thread_namespace();
  });
  const std::uint64_t visitor_inside = inside.get_future().get();
  EXPECT_EQ(thread_namespace(), home) << "the main thread did not move";
  checked.set_value();
  visitor.join();
  EXPECT_EQ(visitor_inside, inode_of(path));
  EXPECT_EQ(after, home);
}

// A namespace that is not there, or a file that is no namespace, is one sentence naming the path
// and the reason; the thread stays home and no descriptor is left open.
TEST(ThreadInNamespace, AMissingOrWrongPathIsOneSentenceNamingIt) {
  const std::uint64_t home = thread_namespace();
  const std::size_t fds = open_fds();
  const std::string missing = "/var/run/netns/" + own_prefix() + "absent";
  try {
    netns::ThreadInNamespace in(missing);
    ADD_FAILURE() << "entered a namespace that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot enter the network namespace " + missing + ": No such file or directory");
  }
  try {
    netns::ThreadInNamespace in("/proc/self/exe");
    ADD_FAILURE() << "entered a file that is no namespace";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot enter the network namespace /proc/self/exe: Invalid argument");
  }
  EXPECT_EQ(thread_namespace(), home);
  EXPECT_EQ(open_fds(), fds) << "a descriptor leaked";
}

// Entering and leaving many times leaks no descriptor (each visit holds two, briefly one).
TEST_F(NetnsTest, VisitsLeaveNoDescriptorOpen) {
  OwnNamespaces own;
  const std::string path = own.add(own_prefix() + "fds");
  const std::size_t before = open_fds();
  std::size_t during = 0;
  for (int i = 0; i < 50; ++i) {
    netns::ThreadInNamespace in(path);
    during = open_fds();
  }
  EXPECT_EQ(during, before + 1) << "the way home is held while inside";
  EXPECT_EQ(open_fds(), before);
}

// Only the namespaces of the prefix are listed, sorted; removed ones are no longer listed.
TEST_F(NetnsTest, ListsTheNamespacesOfAPrefixSorted) {
  const std::string prefix = own_prefix() + "list-";
  {
    OwnNamespaces own;
    own.add(prefix + "b");
    own.add(prefix + "a");
    own.add(own_prefix() + "other");
    EXPECT_EQ(netns::namespaces_with_prefix(prefix), (std::vector<std::string>{prefix + "a", prefix + "b"}));
  }
  EXPECT_TRUE(netns::namespaces_with_prefix(prefix).empty());
}

// A dead run's namespace (atp<pid>-..., pid gone) is removed; a live run's, and names that are no
// run's, are kept.
TEST_F(NetnsTest, RemovesOnlyTheNamespacesOfDeadRuns) {
  for (const std::string& name : netns::namespaces_with_prefix("atp")) {
    if (processes::left_by_dead_process(name, "atp")) GTEST_SKIP() << "skipped: another run's leftover " << name;
  }
  const pid_t dead = ::fork();  // a pid that was ours and is now no process's
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string pid = std::to_string(::getpid());
  const std::string stale = "atp" + std::to_string(dead) + "-stale";
  const std::string live = own_prefix() + "live";
  const std::string no_run = "atpx" + pid + "-kept";
  OwnNamespaces own;  // removes whatever remove_stale leaves, on every way out
  own.add(stale);
  own.add(live);
  own.add(no_run);
  // What is gone and what is kept, not remove_stale's count: another test's remove_stale (ctest -j)
  // may take the stale one first.
  netns::remove_stale();
  EXPECT_TRUE(netns::namespaces_with_prefix(stale).empty());
  EXPECT_EQ(netns::namespaces_with_prefix(live), std::vector<std::string>{live});
  EXPECT_EQ(netns::namespaces_with_prefix(no_run), std::vector<std::string>{no_run});
}

// An interface up on the kernel's noop qdisc drops what it sends: a veth end up while its peer is
// down stays there (no carrier), which wait_until_carrying names once its time is up; with the peer
// up as well, it returns.
TEST_F(NetnsTest, WaitsUntilEveryInterfaceThatIsUpCarriesFrames) {
  OwnNamespaces own;
  const std::string name = own_prefix() + "carry";
  own.add(name);
  const auto ip = [&](const std::string& command) {
    std::string output;
    ASSERT_EQ(processes::run_command({"sh", "-c", "ip -n " + name + " " + command}, "", &output), 0) << output;
  };
  netns::wait_until_carrying(name);  // nothing up, nothing to wait for
  ip("link add name a type veth peer name b");
  ip("link set dev a up");
  try {
    netns::wait_until_carrying(name, std::chrono::milliseconds(50));
    ADD_FAILURE() << "a, up without a carrier, was taken as carrying";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "in network namespace " + name + ", a did not start carrying frames within 50 ms of coming up");
  }
  ip("link set dev b up");
  netns::wait_until_carrying(name);
}

}  // namespace
}  // namespace atp
