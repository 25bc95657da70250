// Tests of the Orchestrator and its daemon clients against real `atp switch` and `atp ps`
// processes (the freshly built binary, ATP_BINARY): a job planned over hosts attached at run
// time is installed on every daemon its plan names; a taken id leaves nothing behind; a restarted
// switch gets its jobs again; revoking the leases removes what hung on them; every refusal is one
// sentence naming the daemon.
#include "atp/cluster/orchestrator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "atp/cluster/daemon_processes.h"
#include "atp/cluster/protocols.h"
#include "atp/control/control_auth.h"
#include "atp/control/stats.h"
#include "atp/io/processes.h"
#include "support/racked_daemons.h"

namespace atp {
namespace {

using namespace std::chrono_literals;

class OrchestratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    processes::write_private_file(dir_.path() / "token", access_.token + "\n");
    processes::write_file(dir_.path() / "switch.yaml",
                          "name: tor0\naggregators: 64\nlisten: 127.0.0.1:0\ncontrol: 127.0.0.1:0\n");
    start_switch();
    PsProcessOptions ps;
    ps.listen = SocketAddress::loopback(0);
    ps.uplink = sw().data_address();
    processes::Child& child = start_ps_process(children_, binary_, "ps", ps, token_file());
    orchestrator_.set_ps("ps", control::PsClient("ps 'ps'", control_of(child), access_));
  }

  void start_switch() {
    processes::Child& child =
        start_switch_process(children_, binary_, "tor0", (dir_.path() / "switch.yaml").string(), token_file());
    switch_child_ = &child;
    orchestrator_.set_switch("tor0", control::SwitchClient("switch 'tor0'", control_of(child), access_));
  }

  SocketAddress control_of(processes::Child& child) {
    return control_addresses(children_, {&child}, processes::Clock::now() + 10s).front();
  }
  std::string token_file() const { return (dir_.path() / "token").string(); }
  const control::SwitchClient& sw() { return orchestrator_.switch_client("tor0"); }
  const control::PsClient& ps() { return orchestrator_.ps_client("ps"); }

  // Attaches the PS and `workers` hosts (unused UDP ports: nothing is sent in these tests).
  JobSpec attach_job(int workers) {
    orchestrator_.attach("tor0", "ps", ps().data_address(), Orchestrator::Attach::kShared);
    JobSpec spec;
    spec.name = "job";
    spec.ps = {"ps"};
    for (int w = 0; w < workers; ++w) {
      spec.workers.push_back("w" + std::to_string(w));
      orchestrator_.attach("tor0", spec.workers.back(), SocketAddress::loopback(static_cast<std::uint16_t>(40001 + w)));
    }
    return spec;
  }

  // Whether the switch and the PS have job `id` installed, by their /stats.
  bool on_switch(JobId id) {
    const control::SwitchStats stats = sw().stats();
    return std::any_of(stats.jobs.begin(), stats.jobs.end(),
                       [id](const control::SwitchJobStats& j) { return j.job == id && j.installed; });
  }
  bool on_ps(JobId id) { return ps().stats().jobs.contains(id); }
  std::size_t switch_ports() { return sw().stats().ports.size(); }

  processes::TempDir dir_{"atp-orchestrator-test"};
  control::ClientAccess access_{control::random_token(), ""};
  std::string binary_ = find_atp_binary(ATP_BINARY);
  processes::ChildSet children_;
  processes::Child* switch_child_ = nullptr;
  Orchestrator orchestrator_;
};

TEST_F(OrchestratorTest, InstallsAPlannedJobOnTheSwitchAndThePs) {
  JobSpec spec = attach_job(3);
  spec.id = 7;
  const EndpointJobPlan plan = orchestrator_.plan(protocol("atp"), spec);
  ASSERT_EQ(plan.workers.size(), 3u);
  EXPECT_EQ(orchestrator_.install(plan), control::Install::kInstalled);
  EXPECT_TRUE(on_switch(7));
  EXPECT_TRUE(on_ps(7));
  // The same id again: taken, and the first job stays as it was.
  EXPECT_EQ(orchestrator_.install(plan), control::Install::kIdTaken);
  EXPECT_TRUE(on_switch(7));
  EXPECT_TRUE(on_ps(7));
}

// A daemon later in the plan's order that has the id: what was installed before it is removed.
TEST_F(OrchestratorTest, ATakenIdLeavesNothingInstalled) {
  JobSpec spec = attach_job(2);
  spec.id = 9;
  const EndpointJobPlan plan = orchestrator_.plan(protocol("atp"), spec);
  ASSERT_EQ(ps().install_job(plan.ps.front()), control::Install::kInstalled);  // someone else's job 9
  EXPECT_EQ(orchestrator_.install(plan), control::Install::kIdTaken);
  EXPECT_FALSE(on_switch(9)) << "the switch kept the part installed before the PS said no";
  // install_with_free_id picks another id and installs it everywhere.
  const EndpointJobPlan other = orchestrator_.install_with_free_id(protocol("atp"), spec);
  const JobId id = other.job;
  EXPECT_NE(id, 9);
  EXPECT_TRUE(on_switch(id));
  EXPECT_TRUE(on_ps(id));
}

TEST_F(OrchestratorTest, ARestartedSwitchGetsItsJobsAgain) {
  JobSpec spec = attach_job(2);
  spec.id = 3;
  ASSERT_EQ(orchestrator_.install(orchestrator_.plan(protocol("atp"), spec)), control::Install::kInstalled);
  sw().remove_job(3);  // as a restart loses it
  ASSERT_FALSE(on_switch(3));
  orchestrator_.reinstall("tor0");
  EXPECT_TRUE(on_switch(3));
}

// A Rina ring that re-forms (docs/rina.md "Failures"): its parts leave the switches, and the job
// goes in again under its id, planned without a worker, which a restart then brings back.
TEST_F(OrchestratorTest, ARinaJobRemovedFromTheSwitchesGoesInAgainUnderItsId) {
  JobSpec spec = attach_job(3);
  spec.id = 12;
  spec.ps.clear();
  ASSERT_EQ(orchestrator_.install(orchestrator_.plan(protocol("rina"), spec)), control::Install::kInstalled);
  ASSERT_TRUE(on_switch(12));
  orchestrator_.remove_from_switches(12);
  EXPECT_FALSE(on_switch(12));
  orchestrator_.remove_from_switches(12);  // nothing left: nothing to do
  spec.workers.pop_back();
  const EndpointJobPlan two = orchestrator_.plan(protocol("rina"), spec);
  ASSERT_EQ(orchestrator_.install(two), control::Install::kInstalled);
  EXPECT_TRUE(on_switch(12));
  sw().remove_job(12);  // as a restart loses it
  orchestrator_.reinstall("tor0");
  EXPECT_TRUE(on_switch(12));
}

TEST_F(OrchestratorTest, RevokingTheLeasesRemovesWhatHungOnThem) {
  orchestrator_.hold_leases(10s);
  JobSpec spec = attach_job(2);  // the workers' ports on the switch's lease, the PS's not
  const std::size_t ports = switch_ports();
  const JobId id = orchestrator_.install_with_free_id(protocol("atp"), spec).job;
  ASSERT_TRUE(on_switch(id));
  ASSERT_TRUE(on_ps(id));
  orchestrator_.revoke_leases();
  EXPECT_FALSE(on_switch(id));
  EXPECT_FALSE(on_ps(id));
  // The two workers' ports are detached; the PS's stays (the peers' counts are in the rows).
  std::size_t attached = 0;
  for (const control::SwitchPortStats& port : sw().stats().ports) attached += port.peer ? 1 : 0;
  EXPECT_EQ(ports, switch_ports());
  EXPECT_EQ(attached, 1u);
}

// A switch started again under the same name has none of its predecessor's leases: the next
// thing installed there hangs on a lease granted by the new one, not on the old one's id.
TEST_F(OrchestratorTest, ARestartedSwitchGetsALeaseOfItsOwn) {
  orchestrator_.hold_leases(10s);
  attach_job(1);  // w0's port on the first switch's lease
  // The restart: killed, and started again at the same control address, as a supervisor would.
  const std::uint16_t control_port = sw().control().port;
  children_.kill(*switch_child_);
  processes::write_file(
      dir_.path() / "switch.yaml",
      "name: tor0\naggregators: 64\nlisten: 127.0.0.1:0\ncontrol: 127.0.0.1:" + std::to_string(control_port) + "\n");
  start_switch();
  ASSERT_EQ(sw().control().port, control_port);
  const std::size_t ports = switch_ports();
  EXPECT_NO_THROW(orchestrator_.attach("tor0", "w9", SocketAddress::loopback(40100)));
  EXPECT_EQ(switch_ports(), ports + 1);
  orchestrator_.revoke_leases();
  std::size_t attached = 0;
  for (const control::SwitchPortStats& port : sw().stats().ports) attached += port.peer ? 1 : 0;
  EXPECT_EQ(attached, 0u) << "w9's port did not hang on the new switch's lease";
}

// Leases live as long as the daemons grant them: a time to live of zero or less is refused (it
// would beat without pause and lease nothing).
TEST_F(OrchestratorTest, ALeaseNeedsAPositiveTimeToLive) {
  EXPECT_THROW(orchestrator_.hold_leases(0s), std::invalid_argument);
  EXPECT_THROW(orchestrator_.hold_leases(-1s), std::invalid_argument);
}

TEST_F(OrchestratorTest, RefusalsAreOneSentenceNamingTheDaemon) {
  JobSpec spec = attach_job(2);
  spec.id = 5;
  EndpointJobPlan plan = orchestrator_.plan(protocol("atp"), spec);
  plan.ps.front().max_window_seqs = 1u << 30;  // more than a PS holds for a job
  try {
    orchestrator_.install(plan);
    FAIL() << "the PS took a job with a window of 2^30 fragments";
  } catch (const control::DaemonError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("ps 'ps' refused to install job 5: ", 0), 0u) << e.what();
    EXPECT_EQ(e.status(), 400);
  }
  EXPECT_FALSE(on_switch(5)) << "the switch kept its part of a job the PS refused";
  // A switch that is gone: a sentence saying so, not a hang.
  children_.kill(*switch_child_);
  try {
    sw().stats();
    FAIL() << "a dead switch answered";
  } catch (const control::DaemonError& e) {
    EXPECT_NE(std::string(e.what()).find("switch 'tor0' did not answer GET http://"), std::string::npos) << e.what();
    EXPECT_EQ(e.status(), 0);
  }
  // A daemon the orchestrator has no client for.
  EXPECT_THROW(orchestrator_.switch_client("tor9"), std::invalid_argument);
}

// Racks of running switches: the orchestrator finds the links the operator configured (tor0 and
// tor1 to core), plans a job whose workers hang under both ToRs and whose PS is under core, and
// installs on every switch the routes it lacks.
TEST(OrchestratorRacks, DiscoversTheLinksAndPlansAcrossThem) {
  const std::string token = control::random_token();
  const test::RackedDaemons racks(find_atp_binary(ATP_BINARY), token, 64);
  Orchestrator o;
  for (const char* name : {"tor0", "tor1", "core"}) o.set_switch(name, racks.switch_client(name));
  o.set_ps("ps", racks.ps_client());
  ASSERT_EQ(o.discover_links(), 2u);
  ASSERT_EQ(o.topology().switches.size(), 3u);
  EXPECT_EQ(o.topology().switches[0].config.aggregator_width, SwitchConfig{}.aggregator_width);
  EXPECT_EQ(o.topology().switches[0].config.num_aggregators, 64u);
  for (const SwitchLink& l : o.topology().switch_links) {
    EXPECT_EQ(l.a, "core");  // names in order: core < tor0 < tor1
    ASSERT_TRUE(l.ports);
    EXPECT_EQ(l.ports->first, l.b == "tor0" ? 0 : 1);  // core's ports, in its config's order
    EXPECT_EQ(l.ports->second, 0);
  }
  EXPECT_EQ(o.discover_links(), 2u);  // again: the same links, not twice
  EXPECT_EQ(o.topology().switch_links.size(), 2u);

  o.attach("core", "ps", o.ps_client("ps").data_address(), Orchestrator::Attach::kShared);
  JobSpec spec;
  spec.name = "racks";
  spec.id = 9;
  spec.ps = {"ps"};
  for (int w = 0; w < 4; ++w) {
    spec.workers.push_back("w" + std::to_string(w));
    o.attach(w < 2 ? "tor0" : "tor1", spec.workers.back(),
             SocketAddress::loopback(static_cast<std::uint16_t>(40001 + w)));
  }
  EXPECT_EQ(format_address(o.network().host_address.at("w2")), "10.2.0.1");  // tor1's pool
  EXPECT_EQ(format_address(o.network().host_address.at("ps")), "10.3.0.1");
  const EndpointJobPlan plan = o.plan(protocol("atp"), spec);
  ASSERT_EQ(o.install(plan), control::Install::kInstalled);
  for (const char* name : {"tor0", "tor1", "core"}) {
    const control::SwitchStats s = o.switch_client(name).stats();
    ASSERT_EQ(s.jobs.size(), 1u) << name;
    EXPECT_TRUE(s.jobs[0].installed) << name;
  }
  const auto& tor0_routes = plan.switches.at("tor0").routes;
  EXPECT_EQ(tor0_routes.size(), 5u);  // the four workers and the PS
  EXPECT_TRUE(std::find(tor0_routes.begin(), tor0_routes.end(), std::pair<Address, PortId>{0x0A020001, 0}) !=
              tor0_routes.end());  // w2, under tor1: up the link
}

// A link with one end (core's config does not list tor0 and tor1) is one sentence naming both
// switches and the peer that is missing.
TEST(OrchestratorRacks, ALinkWithOneEndIsRefused) {
  const test::RackedDaemons racks(find_atp_binary(ATP_BINARY), control::random_token(), 64, false);
  Orchestrator o;
  for (const char* name : {"tor0", "core"}) o.set_switch(name, racks.switch_client(name));
  try {
    o.discover_links();
    FAIL() << "a link with one end was taken";
  } catch (const PlanError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("port 0 of switch 'tor0' leads to switch 'core', but 'core' has no port back "
                                          "(no port of its config has peer: 127.0.0.1:",
                                          0),
              0u)
        << e.what();
  }
}

// Switches on Linux interfaces (both on "lo", one port each: nothing is sent): the link is the
// ports whose `switch:` name each other, and a host is only under a switch whose route to it is
// not that link.
TEST(OrchestratorInterfaces, FindsTheLinkFromTheConfigsAndNoHostBehindIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: switches on interfaces need root (packet sockets)";
  const processes::TempDir dir("atp-orchestrator-test");
  const control::ClientAccess access{control::random_token(), ""};
  processes::write_private_file(dir.path() / "token", access.token + "\n");
  processes::write_file(dir.path() / "tor0.yaml",
                        "name: tor0\ncontrol: 127.0.0.1:0\nports: [{interface: lo, switch: core}]\n"
                        "routes: [{dst: 10.0.0.1, port: 0}]\n");
  processes::write_file(dir.path() / "core.yaml",
                        "name: core\ncontrol: 127.0.0.1:0\nports: [{interface: lo, switch: tor0}]\n");
  processes::ChildSet children;
  const std::string binary = find_atp_binary(ATP_BINARY);
  Orchestrator o;
  for (const char* name : {"tor0", "core"}) {
    processes::Child& child = start_switch_process(
        children, binary, name, (dir.path() / (std::string(name) + ".yaml")).string(), (dir.path() / "token").string());
    const SocketAddress control = control_addresses(children, {&child}, processes::Clock::now() + 10s).front();
    o.set_switch(name, control::SwitchClient(std::string("switch '") + name + "'", control, access));
  }
  ASSERT_EQ(o.discover_links(), 1u);
  const SwitchLink& link = o.topology().switch_links.at(0);
  EXPECT_EQ(link.a, "core");
  EXPECT_EQ(link.ports, (std::pair<PortId, PortId>{0, 0}));
  // tor0's one port is the link: its route to 10.0.0.1 leads to core, where no route leads on.
  // (switch_daemon_test has a host found on its port.)
  for (const char* name : {"tor0", "core"}) {
    try {
      o.attach(name, "w0", SocketAddress::parse("10.0.0.1:9700"));
      FAIL() << name << " attached a host that is not under it";
    } catch (const control::DaemonError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) == "tor0" ? "the link to switch core: that host hangs "
                                                                         "under another switch"
                                                                       : "switch core has no route to 10.0.0.1"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace atp
