// The daemons as child processes (daemon_processes.h): which atp binary, the control address
// from a daemon's first line, and a local network of switches and a PS that answer with their
// names. Runs the freshly built atp (ATP_BINARY).
#include "atp/cluster/daemon_processes.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "atp/control/daemon_clients.h"
#include "atp/control/stats.h"

namespace atp {
namespace {

// The message of what `f` throws as E ("" if it throws nothing).
template <class E, class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// ATP_BINARY as it was, restored at the end of a test.
class AtpBinaryEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("ATP_BINARY")) saved_ = v;
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("ATP_BINARY", saved_->c_str(), 1);
    } else {
      ::unsetenv("ATP_BINARY");
    }
  }
  std::optional<std::string> saved_;
};

TEST_F(AtpBinaryEnv, AConfiguredBinaryComesFirstAndMustBeExecutable) {
  ::setenv("ATP_BINARY", "/nonexistent/atp", 1);
  EXPECT_EQ(find_atp_binary(ATP_BINARY), ATP_BINARY);
  const std::string plain = ::testing::TempDir() + "/not_executable";
  std::ofstream(plain) << "text\n";
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(thrown<std::runtime_error>([&] { find_atp_binary(plain); }),
            "the atp binary '" + plain + "' is no executable file");
}

TEST_F(AtpBinaryEnv, ThenTheEnvironmentsWhichMustBeExecutable) {
  ::setenv("ATP_BINARY", ATP_BINARY, 1);
  EXPECT_EQ(find_atp_binary(), ATP_BINARY);
  ::setenv("ATP_BINARY", "/nonexistent/atp", 1);
  EXPECT_EQ(thrown<std::runtime_error>([] { find_atp_binary(); }),
            "ATP_BINARY='/nonexistent/atp' is no executable file; set it to the atp binary");
}

TEST_F(AtpBinaryEnv, WithoutEitherABinaryBesideThisOneOrOneSentenceSayingWhatToSet) {
  ::unsetenv("ATP_BINARY");
  // This test binary is in build/tests/, the atp binary in build/: nothing beside it.
  EXPECT_EQ(thrown<std::runtime_error>([] { find_atp_binary(); }),
            "no atp binary to start the daemons from: set ATP_BINARY to it (it is build/atp in a build tree)");
}

// A child that prints `line` first and then waits, as a daemon does once it is up.
processes::Child& fake_daemon(processes::ChildSet& children, const std::string& name, const std::string& line) {
  return children.start(name, {"/bin/sh", "-c", "echo '" + line + "'; exec sleep 10"});
}

TEST(ControlAddresses, ReadEachDaemonsFirstLineInOrder) {
  processes::ChildSet children;
  std::vector<processes::Child*> started = {
      &fake_daemon(children, "switch 'tor0'",
                   "atp switch tor0: data 127.0.0.1:9000, control http://127.0.0.1:40123, up"),
      &fake_daemon(children, "switch 'tor1'", "atp switch tor1: control https://127.0.0.1:40124 (TLS)"),
      &fake_daemon(children, "ps 'ps'", "atp ps: control 10.0.0.7:40125")};
  const std::vector<SocketAddress> got =
      control_addresses(children, started, processes::Clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(
      got, (std::vector<SocketAddress>{SocketAddress::parse("127.0.0.1:40123"), SocketAddress::parse("127.0.0.1:40124"),
                                       SocketAddress::parse("10.0.0.7:40125")}));
}

TEST(ControlAddresses, ADaemonThatPrintsSomethingElseIsNamedWithItsLine) {
  processes::ChildSet children;
  std::vector<processes::Child*> started = {&fake_daemon(children, "switch 'tor0'", "atp switch: bad config")};
  EXPECT_EQ(thrown<std::runtime_error>(
                [&] { control_addresses(children, started, processes::Clock::now() + std::chrono::seconds(10)); }),
            "switch 'tor0' did not start (its first line: 'atp switch: bad config')");
}

TEST(LocalDaemons, RefusesATopologyItCannotRunBeforeStartingAnything) {
  Topology none;
  EXPECT_EQ(thrown<std::invalid_argument>([&] { LocalDaemons(ATP_BINARY, none, "tor0"); }),
            "a local network has 1 to 255 switches (a host_pool each), not 0");
  Topology one;
  one.switches.push_back({"tor0", {}});
  EXPECT_NE(thrown<std::invalid_argument>([&] { LocalDaemons(ATP_BINARY, one, "core"); }).find("'core'"),
            std::string::npos);
}

TEST(LocalDaemons, EverySwitchAndThePsAnswerUnderTheirNames) {
  Topology t;
  t.switches.push_back({"tor0", {}});
  t.switches.push_back({"tor1", {}});
  t.switch_links.push_back({"tor0", "tor1"});
  const LocalDaemons local(ATP_BINARY, t, "tor1");
  const std::vector<SocketAddress> controls = local.switch_controls();
  ASSERT_EQ(controls.size(), 2u);
  EXPECT_EQ(controls[0], local.switch_control("tor0"));
  EXPECT_EQ(controls[1], local.switch_control("tor1"));
  EXPECT_THROW(local.switch_control("core"), std::out_of_range);
  for (const std::string name : {"tor0", "tor1"}) {
    const control::SwitchClient client(name, local.switch_control(name), local.access());
    EXPECT_EQ(client.stats().name, name);
  }
  const control::PsClient ps("ps", local.ps_control(), local.access());
  const control::PsStats stats = ps.stats();
  EXPECT_EQ(stats.uplink, control::SwitchClient("tor1", local.switch_control("tor1"), local.access()).stats().data)
      << "the PS sends to its switch";
  // Only with their token.
  const control::SwitchClient stranger("tor0", local.switch_control("tor0"), control::ClientAccess{"wrong", ""});
  EXPECT_THROW(stranger.stats(), control::DaemonError);
}

}  // namespace
}  // namespace atp
