// Tests of scenario files and the in-process runner: every bad file gets one sentence naming
// its key, the examples run to exact results under loss, crashes, collisions and overflow.
#include "atp/scenario/scenario.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "../../src/backends/processes/tcp_flow.h"
#include "atp/backends/processes.h"
#include "atp/backends/simulated.h"
#include "atp/io/event_loop.h"
#include "atp/io/machine.h"
#include "atp/io/socket_address.h"

namespace atp {
namespace {

// The examples live in the source tree: where ATP_SOURCE_DIR says, or CMake's source directory,
// or next to this file.
std::filesystem::path source_dir() {
  if (const char* env = std::getenv("ATP_SOURCE_DIR")) return env;
#ifdef ATP_TEST_SOURCE_DIR
  return ATP_TEST_SOURCE_DIR;  // CMake's; __FILE__ is relative under ccache's base_dir
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
#endif
}

std::string example(const std::string& name) { return (source_dir() / "examples" / name).string(); }

ScenarioResult run_example(const std::string& name) { return run_inproc(load_scenario_file(example(name))); }

const JobResult& job_named(const ScenarioResult& r, const std::string& name) {
  for (const auto& j : r.jobs) {
    if (j.name == name) return j;
  }
  throw std::runtime_error("no job " + name);
}

// A small valid scenario; the error cases below change one thing in it.
constexpr const char* kValid = R"(
seed: 1
topology:
  switches: [{name: tor0, atp: true, aggregators: 4096}, {name: core, atp: false}]
  hosts: [{name: w0, switch: tor0}, {name: w1, switch: tor0}, {name: ps0, switch: core}]
  links: [[tor0, core]]
jobs:
  - {name: a, workers: [w0, w1], ps: [ps0], elements: 1000, rounds: 2}
)";

std::string replaced(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const std::size_t at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("test bug: '" + from + "' not in the base scenario");
  return text.replace(at, from.size(), to);
}

std::string parse_error(const std::string& text) {
  try {
    parse_scenario_yaml(text);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(no error)";
}

// What every job starts from, in a file or built in code (atp bench, atp demo): the algorithm, the
// id of its place in the file, in-network aggregation as the algorithm has it, a name.
// PLink's groups: the racks, sqrt(n) groups dealt at random from the seed (a partition of the
// ranks, the same for the same seed, so every backend deals alike, another for another seed), or
// the probed groups, which must be there.
TEST(ScenarioJob, GroupsAreTheRacksBalancedRandomOrProbed) {
  Scenario s;
  Topology& t = s.topology;
  t.switches.resize(2);
  t.switches[0].name = "tor0";
  t.switches[1].name = "tor1";
  ScenarioJob job = scenario_job(*find_algorithm("plink"), 0);
  std::vector<std::string>& workers = job.spec.workers;
  for (int i = 0; i < 9; ++i) {
    workers.push_back("h" + std::to_string(i));
    t.hosts.push_back(HostSpec{workers.back(), i < 5 ? "tor0" : "tor1"});
  }
  EXPECT_EQ(job_groups(s, job), job_racks(t, workers));
  job.grouping = JobGrouping::kRandom;
  const RankGroups random = job_groups(s, job);
  ASSERT_EQ(random.size(), 3u);
  std::vector<int> seen;
  for (const auto& g : random) {
    EXPECT_EQ(g.size(), 3u);
    seen.insert(seen.end(), g.begin(), g.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(job_groups(s, job), random);
  s.seed = 2;
  EXPECT_NE(job_groups(s, job), random);
  job.grouping = JobGrouping::kProbe;
  EXPECT_THROW(job_groups(s, job), std::invalid_argument);
  job.probed_groups = {{0, 8}, {1, 2, 3, 4, 5, 6, 7}};
  EXPECT_EQ(job_groups(s, job), job.probed_groups);
}

TEST(ScenarioJob, StartsFromItsAlgorithmAndPlace) {
  const ScenarioJob atp = scenario_job(default_algorithm(), 0, "bench");
  EXPECT_EQ(atp.algorithm, &default_algorithm());
  EXPECT_EQ(atp.spec.id, 1);
  EXPECT_EQ(atp.spec.name, "bench");
  EXPECT_TRUE(atp.spec.in_network_aggregation);
  const ScenarioJob ps = scenario_job(*find_algorithm("ps"), 2);
  EXPECT_EQ(ps.spec.id, 3);
  EXPECT_EQ(ps.spec.name, "job3");
  EXPECT_FALSE(ps.spec.in_network_aggregation);
}

TEST(ScenarioYaml, ValidBaseParses) {
  const Scenario s = parse_scenario_yaml(kValid);
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_EQ(s.jobs[0].spec.id, 1);
  EXPECT_EQ(s.jobs[0].spec.workers, (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(s.jobs[0].elements, 1000u);
  EXPECT_EQ(s.topology.switches[1].config.atp_capable, false);
  EXPECT_EQ(s.topology.switch_links.size(), 1u);
}

TEST(ScenarioYaml, EveryKeyIsRead) {
  const Scenario s = parse_scenario_yaml(R"(
seed: 42
time_limit_s: 3.5
link: {delay_us: 1.5, rate_gbps: 25, buffer_packets: 100, ecn_threshold_packets: 20}
topology:
  switches: [{name: t, atp: true, aggregators: 512, width: 128, reclaim_timeout_us: 700}]
  hosts: [{name: w0, switch: t}, {name: w1, switch: t}, {name: p, switch: t}]
jobs:
  - {name: j, workers: [w0, w1], ps: [p], elements: 1e4, rounds: 3, values_per_packet: 100, scale: 1.0e6,
     magnitude: 2.5, index: linear, congestion_control: false, window: 16, max_window: 64, compute_us: 10,
     start_us: 5, rto_us: 300, progress_timeout_us: 9000, initial_seq: 4294967000}
faults:
  - {link: [w0, t], one_way: true, loss: 0.1, duplicate: 0.2, reorder: 0.3, delay_us: 4, from_us: 1, until_us: 2}
  - {crash: w1, at_us: 77}
  - {crash: w0, at_round: 2}
)");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.time_limit, std::chrono::milliseconds(3500));
  EXPECT_EQ(s.link.delay, std::chrono::nanoseconds(1500));
  EXPECT_EQ(s.link.rate_gbps, 25);
  EXPECT_EQ(s.link.buffer_packets, 100u);
  EXPECT_EQ(s.link.ecn_threshold_packets, 20u);
  const SwitchConfig& sw = s.topology.switches[0].config;
  EXPECT_EQ(sw.num_aggregators, 512u);
  EXPECT_EQ(sw.aggregator_width, 128);
  EXPECT_EQ(sw.reclaim_timeout, std::chrono::microseconds(700));
  const ScenarioJob& j = s.jobs[0];
  EXPECT_EQ(j.elements, 10000u);
  EXPECT_EQ(j.rounds, 3u);
  EXPECT_EQ(j.spec.values_per_packet, 100);
  EXPECT_EQ(j.spec.scale, 1e6);
  EXPECT_EQ(j.magnitude, 2.5);
  EXPECT_EQ(j.spec.index_policy, IndexPolicy::kLinear);
  EXPECT_FALSE(j.spec.congestion.enabled);
  EXPECT_EQ(j.spec.congestion.initial_window, 16u);
  EXPECT_EQ(j.spec.congestion.max_window, 64u);
  EXPECT_EQ(j.compute_time, std::chrono::microseconds(10));
  EXPECT_EQ(j.start_time, std::chrono::microseconds(5));
  EXPECT_EQ(j.spec.retransmit_timeout, std::chrono::microseconds(300));
  EXPECT_EQ(j.spec.progress_timeout, std::chrono::microseconds(9000));
  EXPECT_EQ(j.spec.initial_seq, 4294967000u);
  ASSERT_EQ(s.link_faults.size(), 1u);
  const LinkFault& f = s.link_faults[0];
  EXPECT_TRUE(f.one_way);
  EXPECT_EQ(*f.overrides.loss, 0.1);
  EXPECT_EQ(*f.overrides.duplicate, 0.2);
  EXPECT_EQ(*f.overrides.reorder, 0.3);
  EXPECT_EQ(*f.overrides.delay, std::chrono::microseconds(4));
  EXPECT_FALSE(f.overrides.rate_gbps.has_value());
  EXPECT_EQ(f.from, std::chrono::microseconds(1));
  EXPECT_EQ(*f.until, std::chrono::microseconds(2));
  ASSERT_EQ(s.crashes.size(), 2u);
  EXPECT_EQ(*s.crashes[0].at_time, std::chrono::microseconds(77));
  EXPECT_EQ(*s.crashes[1].at_round, 2u);
}

struct ErrorCase {
  const char* from;      // text in kValid to replace
  const char* to;        // its replacement
  const char* expected;  // the whole message, or its start when it ends in "..."
};

class ScenarioYamlError : public ::testing::TestWithParam<ErrorCase> {};

// A job's first RTO, where the file sets no rto_us, is at least the time its workers' first
// windows take to cross one link (first_retransmit_timeout): 8 workers' 57.6 KB at 200 Mbit/s,
// 18.4 ms; the paper's 1 ms on fast or unlimited links; rto_us as written.
TEST(ScenarioYaml, AJobsFirstTimeoutIsSizedForTheLinkUnlessSet) {
  const auto first_rto = [](const std::string& link, const std::string& job_extra) {
    return parse_scenario_yaml(
               link +
               "topology: {switches: [{name: t}], hosts: [{name: a, switch: t}, {name: b, switch: t}, "
               "{name: c, switch: t}, {name: d, switch: t}, {name: e, switch: t}, {name: f, switch: t}, "
               "{name: g, switch: t}, {name: h, switch: t}, {name: p, switch: t}]}\n"
               "jobs: [{workers: [a, b, c, d, e, f, g, h], ps: [p], elements: 100" +
               job_extra + "}]\n")
        .jobs[0]
        .spec.retransmit_timeout;
  };
  EXPECT_EQ(first_rto("link: {rate_mbps: 200}\n", ""), std::chrono::nanoseconds(8 * kInitialWindowBytes * 8 * 5));
  EXPECT_EQ(first_rto("link: {rate_gbps: 100}\n", ""), std::chrono::milliseconds(1));
  EXPECT_EQ(first_rto("", ""), std::chrono::milliseconds(1));
  EXPECT_EQ(first_rto("link: {rate_mbps: 200}\n", ", rto_us: 300"), std::chrono::microseconds(300));
}

// A background flow's sender TCP: CUBIC asking for ECN unless the flow says otherwise.
// Where `link:` sets no buffer or threshold, a switch's port holds 1 MB and marks from a depth
// sized for `link:`'s rate (switch_port_egress: 20 packets at 1 Gbit/s) and a host's NIC queue neither; what `link:`
// sets, both ends take, but a host's queue never marks. A buffer in packets replaces the default in bytes.
TEST(ScenarioYaml, SwitchPortsAndHostNicsStartFromTheirOwnQueues) {
  const std::string topology = "topology: {switches: [{name: t}], hosts: [{name: a, switch: t}]}\n";
  const Scenario plain = parse_scenario_yaml("link: {rate_gbps: 1}\n" + topology);
  EXPECT_EQ(link_base(plain, false).buffer_bytes, kSwitchPortBufferBytes);
  EXPECT_EQ(link_base(plain, false).buffer_packets, 0u);
  EXPECT_EQ(link_base(plain, true).buffer_bytes, 0u);
  EXPECT_EQ(link_base(plain, false).ecn_threshold_packets, kSwitchPortEcnThresholdPackets);
  EXPECT_EQ(link_base(plain, false).rate_gbps, 1);
  EXPECT_EQ(link_base(plain, true).buffer_packets, 0u);
  EXPECT_EQ(link_base(plain, true).ecn_threshold_packets, 0u);
  EXPECT_EQ(link_base(plain, true).delay, sim::ChannelConfig{}.delay);
  const Scenario fast = parse_scenario_yaml("link: {rate_gbps: 100}\n" + topology);
  EXPECT_EQ(link_base(fast, false).ecn_threshold_packets, switch_port_ecn_threshold(100));  // sized for the rate
  EXPECT_EQ(link_base(fast, true).ecn_threshold_packets, 0u);
  const Scenario set =
      parse_scenario_yaml("link: {rate_gbps: 1, buffer_packets: 0, ecn_threshold_packets: 7}\n" + topology);
  EXPECT_EQ(link_base(set, false).buffer_packets, 0u);
  EXPECT_EQ(link_base(set, false).ecn_threshold_packets, 7u);
  EXPECT_EQ(link_base(set, true).buffer_packets, 0u);
  EXPECT_EQ(link_base(set, true).ecn_threshold_packets, 0u);
  EXPECT_EQ(link_base(set, false).buffer_bytes, 0u);  // buffer_packets: 0 is no limit at all
  const Scenario packets = parse_scenario_yaml("link: {buffer_packets: 50}\n" + topology);
  EXPECT_EQ(link_base(packets, false).buffer_packets, 50u);
  EXPECT_EQ(link_base(packets, false).buffer_bytes, 0u);
  const Scenario bytes = parse_scenario_yaml("link: {buffer_bytes: 30000, mtu_bytes: 1500}\n" + topology);
  EXPECT_EQ(link_base(bytes, false).buffer_bytes, 30000u);
  EXPECT_EQ(bytes.mtu_bytes, 1500u);
  EXPECT_EQ(plain.mtu_bytes, kDefaultMtuBytes);
}

TEST(ScenarioYaml, BackgroundFlowsNameTheirTcp) {
  const Scenario s = parse_scenario_yaml(replaced(
      "seed: 1", "seed: 1\nbackground: [{from: w0, to: w1}, {from: w1, to: w0, congestion: bbr, ecn: false}]"));
  ASSERT_EQ(s.background.size(), 2u);
  EXPECT_EQ(s.background[0].congestion, "cubic");
  EXPECT_TRUE(s.background[0].ecn);
  EXPECT_EQ(s.background[1].congestion, "bbr");
  EXPECT_FALSE(s.background[1].ecn);
}

TEST_P(ScenarioYamlError, NamesTheKeyInOneSentence) {
  const ErrorCase& c = GetParam();
  const std::string message = parse_error(replaced(c.from, c.to));
  std::string expected = c.expected;
  if (expected.size() > 3 && expected.substr(expected.size() - 3) == "...") {
    expected.resize(expected.size() - 3);
    EXPECT_EQ(message.substr(0, expected.size()), expected) << message;
  } else {
    EXPECT_EQ(message, expected);
  }
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScenarioYamlError,
    ::testing::Values(
        // Unknown keys: typos must not pass silently.
        ErrorCase{"seed: 1", "sede: 1", "sede: unknown key (expected one of: description, seed, ..."},
        ErrorCase{"elements: 1000", "elemnts: 1000", "jobs[0].elemnts: unknown key (expected one of: name, ..."},
        ErrorCase{"atp: false", "atp: false, aggregator: 5", "topology.switches[1].aggregator: unknown key ..."},
        // Wrong types and ranges.
        ErrorCase{"aggregators: 4096", "aggregators: -3",
                  "topology.switches[0].aggregators: must be a positive integer, got -3"},
        // What a switch daemon's config takes (the process backends write it there).
        ErrorCase{"aggregators: 4096", "aggregators: 4096, reclaim_timeout_us: 2000000000000",
                  "topology.switches[0].reclaim_timeout_us: must be at most 1099511627776 microseconds, got "
                  "2000000000000"},
        ErrorCase{"elements: 1000", "elements: lots", "jobs[0].elements: must be a positive integer, got lots"},
        ErrorCase{"elements: 1000", "elements: 1.5", "jobs[0].elements: must be a positive integer, got 1.5"},
        ErrorCase{"rounds: 2", "rounds: [2]", "jobs[0].rounds: must be a positive integer, got a list"},
        ErrorCase{"atp: true", "atp: maybe", "topology.switches[0].atp: must be true or false, got maybe"},
        ErrorCase{"workers: [w0, w1]", "workers: w0", "jobs[0].workers: must be a list, got w0"},
        ErrorCase{"rounds: 2", "rounds: 2, index: random",
                  "jobs[0].index: must be 'allocated', 'hashed', 'linear' or 'hashed_slots', got random"},
        // PLink's grouping: its algorithm's key only. A probe's rounds are its pairings.
        ErrorCase{"rounds: 2", "rounds: 2, grouping: random",
                  "jobs[0].grouping: is PLink's key (algorithm plink); algorithm atp does not group its workers "
                  "that way"},
        ErrorCase{"ps: [ps0], elements: 1000, rounds: 2", "algorithm: plink, elements: 1000, rounds: 2, grouping: near",
                  "jobs[0].grouping: must be 'topology' (the racks), 'random' (Balanced Random) or 'probe' "
                  "(ProbeEmbed's groups), got near"},
        ErrorCase{"ps: [ps0], elements: 1000, rounds: 2", "algorithm: ring, elements: 1000, rounds: 2, autotune: true",
                  "jobs[0].autotune: is PLink's key (algorithm plink or plink_fa); algorithm ring has no masters to "
                  "move"},
        ErrorCase{"ps: [ps0], elements: 1000, rounds: 2", "algorithm: ring, elements: 1000, rounds: 2, connections: 2",
                  "jobs[0].connections: is PLink's key (algorithm plink or plink_fa); algorithm ring keeps one "
                  "connection per pair"},
        ErrorCase{"ps: [ps0], elements: 1000, rounds: 2",
                  "algorithm: plink, elements: 1000, rounds: 2, connections: 17",
                  "jobs[0].connections: must be at most 16, got 17"},
        ErrorCase{"ps: [ps0], elements: 1000, rounds: 2", "algorithm: probe, elements: 1000, rounds: 2",
                  "jobs[0].rounds: algorithm probe runs one round per pairing of its workers (every pair once); "
                  "remove rounds"},
        // A background flow's TCP: named congestion controls only; ECN on or off.
        ErrorCase{"seed: 1", "seed: 1\nbackground: [{from: w0, to: w1, congestion: vegas}]",
                  "background[0].congestion: must be cubic, reno or bbr, got 'vegas'"},
        ErrorCase{"seed: 1", "seed: 1\nbackground: [{from: w0, to: w1, ecn: sometimes}]",
                  "background[0].ecn: must be true or false, got sometimes"},
        ErrorCase{"seed: 1", "seed: 1\naggregator_sharing: fixed",
                  "aggregator_sharing: must be 'dynamic' or 'static', got fixed"},
        ErrorCase{"seed: 1", "seed: 1\naggregator_sharing: [static]",
                  "aggregator_sharing: must be a non-empty string, got a list"},
        ErrorCase{"seed: 1", "seed: 1\nlink: {rate_gbps: -1}",
                  "link.rate_gbps: must be a number of Gbit/s between 0 (unlimited) and 1000000, got -1"},
        ErrorCase{"rounds: 2", "rounds: 2, scale: 0", "jobs[0].scale: must be a positive number, got 0"},
        ErrorCase{"rounds: 2", "rounds: 2, rto_us: 0.0001",
                  "jobs[0].rto_us: must be a positive number of microseconds (at least 0.001), got 0.0001"},
        ErrorCase{"rounds: 2", "rounds: 2, window: 300, max_window: 100",
                  "jobs[0].max_window: the window (300) must not exceed max_window (100)"},
        ErrorCase{"rounds: 2", "rounds: 2, values_per_packet: 5000",
                  "jobs[0].values_per_packet: must be 1..4096, got 5000"},
        // Names that do not exist or clash.
        ErrorCase{"workers: [w0, w1]", "workers: [w0, w1, w9]", "jobs[0].workers[2]: unknown host 'w9'"},
        ErrorCase{"workers: [w0, w1]", "workers: [w0, tor0]", "jobs[0].workers[1]: 'tor0' is a switch, not a host"},
        ErrorCase{"workers: [w0, w1]", "workers: [w0, w0]", "jobs[0].workers[1]: host 'w0' is listed twice"},
        ErrorCase{"ps: [ps0]", "ps: [w1]",
                  "jobs[0].ps[0]: host 'w1' is also a worker of this job; only algorithm ps (no in-network "
                  "aggregation) may put a PS shard on a worker's host"},
        ErrorCase{"{name: w1, switch: tor0}", "{name: w1, switch: tor9}",
                  "topology.hosts[1].switch: unknown switch 'tor9'"},
        ErrorCase{"{name: w1, switch: tor0}", "{name: core, switch: tor0}",
                  "topology.hosts[1].name: the name 'core' is already used"},
        ErrorCase{"links: [[tor0, core]]", "links: [[tor0, w0]]",
                  "topology.links[0][1]: 'w0' is a host; hosts are linked to their switch automatically, ..."},
        ErrorCase{"links: [[tor0, core]]", "links: [[tor0, core], [core, tor0]]",
                  "topology.links[1]: duplicate link between 'core' and 'tor0'"},
        ErrorCase{"links: [[tor0, core]]", "links: []",
                  "topology.links: switch 'core' is not connected to switch 'tor0'; switch-to-switch links must "
                  "connect every switch"},
        ErrorCase{"  - {name: a,", "  - {name: b, workers: [w0], ps: [ps0], elements: 1}\n  - {name: b,",
                  "jobs[1].name: the job name 'b' is already used"},
        ErrorCase{"  - {name: a, workers: [w0, w1], ps: [ps0], elements: 1000, rounds: 2}", "  - {name: a, ps: [ps0]}",
                  "jobs[0]: missing required key 'workers'"},
        ErrorCase{"jobs:", "jobz:", "jobz: unknown key ..."},
        ErrorCase{"rounds: 2}", "rounds: 2, elements: 5}", "jobs[0].elements: the key appears twice"},
        ErrorCase{"jobs:\n", "jobs: []\nx:\n", "x: unknown key ..."},
        // Bad faults.
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{loss: 0.1}]",
                  "faults[0]: must have one of 'link' (a link fault), ..."},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{link: [w0, tor0], loss: 1.5}]",
                  "faults[0].loss: must be a probability between 0 and 1, got 1.5"},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{link: [w0, core], loss: 0.1}]",
                  "faults[0].link: there is no link between 'w0' and 'core'"},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{link: [w0, tor0], los: 0.1}]", "faults[0].los: unknown key ..."},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{crash: w7, at_round: 1}]", "faults[0].crash: unknown host 'w7'"},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{crash: w0}]",
                  "faults[0]: a crash needs 'at_round' (0-based) or 'at_us'"},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{crash: w0, at_round: 1, at_us: 5}]",
                  "faults[0]: must have either 'at_round' or 'at_us', not both"},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{crash: ps0, at_round: 1}]",
                  "faults[0].at_round: host 'ps0' runs no worker; use at_us"},
        ErrorCase{"rounds: 2}", "rounds: 2}\nfaults: [{link: [w0, tor0], from_us: 5, until_us: 5}]",
                  "faults[0].until_us: must be after from_us"},
        // Not YAML at all.
        ErrorCase{"rounds: 2}", "rounds: 2", "scenario: line ..."}));

// The restart and noise faults: every mistake names its key. The base has a host without a role.
TEST(ScenarioYaml, RestartAndNoiseErrorsNameTheKey) {
  const std::string base = replaced("{name: ps0, switch: core}]",
                                    "{name: ps0, switch: core}, {name: n0, switch: tor0}, {name: n1, switch: core}]");
  const std::pair<const char*, const char*> cases[] = {
      {"{restart: tor9, at_us: 5}", "faults[0].restart: unknown switch 'tor9'"},
      {"{restart: w0, at_us: 5}", "faults[0].restart: unknown switch 'w0'"},
      {"{restart: tor0}", "faults[0]: missing required key 'at_us'"},
      {"{restart: tor0, at_us: 5, down: 3}", "faults[0].down: unknown key ..."},
      {"{noise: w1}", "faults[0].noise: host 'w1' is a worker or PS of a job; noise needs a host of its own"},
      {"{noise: ps0}", "faults[0].noise: host 'ps0' is a worker or PS of a job; noise needs a host of its own"},
      {"{noise: tor0}", "faults[0].noise: 'tor0' is a switch; noise comes from a host"},
      {"{noise: n9}", "faults[0].noise: unknown host 'n9'"},
      {"{noise: n1}",
       "faults[0].noise: host 'n1' is under switch 'core', which has atp: false; only ATP switches check where a "
       "job's packets come from, so noise must enter at one"},
      {"{noise: n0, rate_pps: 0}", "faults[0].rate_pps: must be packets per second, 1 to 1e6, got 0"},
      {"{noise: n0, from_us: 10, until_us: 10}", "faults[0].until_us: must be after from_us"},
      {"{noise: n0, restart: tor0, at_us: 5}", "faults[0]: must have exactly one of 'link' (a link fault), ..."},
  };
  for (const auto& [fault, expected_text] : cases) {
    SCOPED_TRACE(fault);
    const std::string message = parse_error(base + "faults: [" + fault + "]\n");
    std::string expected = expected_text;
    if (expected.ends_with("...")) {
      expected.resize(expected.size() - 3);
      EXPECT_EQ(message.substr(0, expected.size()), expected) << message;
    } else {
      EXPECT_EQ(message, expected);
    }
  }
  // And the valid forms parse into the scenario.
  const Scenario s = parse_scenario_yaml(
      base + "faults: [{restart: tor0, at_us: 5, down_us: 7}, {noise: n0, rate_pps: 300, from_us: 1, until_us: 9}]\n");
  ASSERT_EQ(s.restarts.size(), 1u);
  EXPECT_EQ(s.restarts[0].switch_name, "tor0");
  EXPECT_EQ(s.restarts[0].at, std::chrono::microseconds(5));
  EXPECT_EQ(s.restarts[0].down, std::chrono::microseconds(7));
  ASSERT_EQ(s.noise.size(), 1u);
  EXPECT_EQ(s.noise[0].host, "n0");
  EXPECT_EQ(s.noise[0].rate_pps, 300);
  EXPECT_EQ(s.noise[0].from, std::chrono::microseconds(1));
  EXPECT_EQ(*s.noise[0].until, std::chrono::microseconds(9));
}

TEST(ScenarioYaml, NotAMapAndMissingFile) {
  EXPECT_EQ(parse_error("- 1\n- 2\n").substr(0, 40), "scenario: the file must be a YAML map wi");
  try {
    load_scenario_file("/nonexistent/x.yaml");
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/x.yaml: cannot open the file (No such file or directory)");
  }
}

// `aggregator_sharing: static` gives the jobs with in-network aggregation shares 0..K-1 of K in
// file order; `dynamic`, the default, tells each that K jobs share the tables. ps and ring jobs
// use no aggregators and get neither.
TEST(ScenarioYaml, AggregatorSharingGivesEachAtpJobItsShare) {
  const std::string jobs = R"(
topology:
  switches: [{name: t, aggregators: 100}]
  hosts: [{name: h0, switch: t}, {name: h1, switch: t}, {name: h2, switch: t}, {name: h3, switch: t}]
jobs:
  - {name: a, workers: [h0, h1], ps: [h2], elements: 10}
  - {name: p, algorithm: ps, workers: [h0, h1], ps: [h3], elements: 10}
  - {name: r, algorithm: ring, workers: [h0, h1], elements: 10}
  - {name: b, workers: [h1, h3], ps: [h2], elements: 10}
)";
  // Dynamic: every ATP job hashes over the whole table and keeps to its part (2 ATP jobs).
  for (const std::string& dynamic : {std::string(), std::string("aggregator_sharing: dynamic\n")}) {
    for (const ScenarioJob& j : parse_scenario_yaml(dynamic + jobs).jobs) {
      EXPECT_FALSE(j.spec.aggregator_share.has_value()) << j.spec.name;
      EXPECT_EQ(j.spec.sharing_jobs, j.algorithm->in_network_aggregation && j.algorithm->parameter_servers ? 2u : 1u)
          << j.spec.name;
      EXPECT_EQ(j.spec.sharing_index, j.spec.name == "b" ? 1u : 0u) << j.spec.name;  // file order among a, b
    }
  }
  const Scenario s = parse_scenario_yaml("aggregator_sharing: static\n" + jobs);
  for (const ScenarioJob& j : s.jobs) EXPECT_EQ(j.spec.sharing_jobs, 1u) << j.spec.name;
  ASSERT_EQ(s.jobs.size(), 4u);
  ASSERT_TRUE(s.jobs[0].spec.aggregator_share.has_value());
  EXPECT_EQ(s.jobs[0].spec.aggregator_share->index, 0u);
  EXPECT_EQ(s.jobs[0].spec.aggregator_share->count, 2u);
  EXPECT_FALSE(s.jobs[1].spec.aggregator_share.has_value());
  EXPECT_FALSE(s.jobs[2].spec.aggregator_share.has_value());
  ASSERT_TRUE(s.jobs[3].spec.aggregator_share.has_value());
  EXPECT_EQ(s.jobs[3].spec.aggregator_share->index, 1u);
  EXPECT_EQ(s.jobs[3].spec.aggregator_share->count, 2u);
}

TEST(ScenarioYaml, ExamplesParse) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_scenario_file(entry.path().string()));
    ++count;
  }
  EXPECT_GE(count, 6);
}

// PlanError from plan_job comes back as one ScenarioError sentence naming the job.
TEST(ScenarioRun, PlanErrorsNameTheJob) {
  // A PS holding up to 2 x 2^20 fragments of 4096 values: above the memory a PS job may use.
  const Scenario s =
      parse_scenario_yaml(replaced("rounds: 2}", "rounds: 2, values_per_packet: 4096, max_window: 1048576}"));
  try {
    run_inproc(s);
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.substr(0, 9), "jobs[0]: ") << m;
    EXPECT_NE(m.find("4096 values per packet"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(ScenarioRun, QuickstartIsCorrect) {
  const ScenarioResult r = run_example("quickstart.yaml");
  ASSERT_EQ(r.jobs.size(), 1u);
  const JobResult& a = r.jobs[0];
  EXPECT_TRUE(a.correct) << a.error;
  EXPECT_EQ(a.completed_rounds, 2u);
  EXPECT_EQ(a.fragments, 2u * ((100000 + 61) / 62));
  EXPECT_GT(a.switch_aggregations.at("tor0"), 0u);
  EXPECT_EQ(a.switch_aggregations.at("core"), 0u);  // not ATP-capable: it only forwards
  EXPECT_EQ(r.leaked_aggregators, 0u);
  EXPECT_FALSE(r.time_limit_reached);
}

TEST(ScenarioRun, LossyIsCorrectWithRetransmissions) {
  const ScenarioResult r = run_example("lossy.yaml");
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.completed_rounds, 2u);
  EXPECT_GT(j.retransmissions, 0u);
  std::uint64_t lost = 0;
  for (const auto& l : r.links) lost += l.lost;
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
}

TEST(ScenarioRun, CrashFailsOnlyItsJob) {
  const ScenarioResult r = run_example("crash.yaml");
  const JobResult& a = job_named(r, "a");
  const JobResult& b = job_named(r, "b");
  EXPECT_FALSE(a.correct);
  EXPECT_EQ(a.completed_rounds, 1u);  // the crash came before round 1
  EXPECT_NE(a.error.find("crashed"), std::string::npos) << a.error;
  EXPECT_TRUE(b.correct) << b.error;
  EXPECT_EQ(b.completed_rounds, 3u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  EXPECT_FALSE(all_correct(r));
}

// Rina's failures (docs/rina.md "Failures", paper §IV-C2): racks of three (tor0, tor1) and of two
// (tor2) whose ToRs aggregate, and a worker on its own (a0). A crashed worker is left out: its
// rack goes on as one member of the others (its agent's too: the next rank is the agent), a rack
// left with one worker has it as a member of its own, and the ring goes round the rest. The
// rounds from the crash on are the survivors' exact sum (the reference leaves the gone worker
// out), on every survivor, with and without loss.
struct RinaFailure {
  const char* name;
  const char* faults;                    // the crashes
  std::vector<ExcludedWorker> excluded;  // what the job reports (from_round: the crash's round; 99: any)
};
using RinaFailureParam = std::tuple<RinaFailure, std::uint64_t, bool>;  // case, seed, loss
class RinaFailures : public ::testing::TestWithParam<RinaFailureParam> {};

TEST_P(RinaFailures, TheOthersGoOnWithTheirExactSum) {
  const auto& [c, seed, loss] = GetParam();
  std::string text = R"(
seed: )" + std::to_string(seed) +
                     R"(
link: {delay_us: 2, rate_gbps: 10}
topology:
  switches:
    - {name: spine, atp: false}
    - {name: tor0, atp: true}
    - {name: tor1, atp: true}
    - {name: tor2, atp: true}
    - {name: edge, atp: false}
  hosts:
    - {name: w0, switch: tor0}
    - {name: w1, switch: tor0}
    - {name: w2, switch: tor0}
    - {name: w3, switch: tor1}
    - {name: w4, switch: tor1}
    - {name: w5, switch: tor1}
    - {name: w6, switch: tor2}
    - {name: w7, switch: tor2}
    - {name: a0, switch: edge}
  links: [[tor0, spine], [tor1, spine], [tor2, spine], [edge, spine]]
jobs:
  - {name: rina, algorithm: rina, workers: [w0, w1, w2, w3, w4, w5, w6, w7, a0], elements: 20000, rounds: 4,
     values_per_packet: 62, progress_timeout_us: 50000}
faults:
)" + std::string(c.faults);
  if (loss) text += "\n  - {link: [tor0, spine], loss: 0.01}\n  - {link: [w4, tor1], loss: 0.01}";
  const ScenarioResult r = run_inproc(parse_scenario_yaml(text));
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.completed_rounds, 4u);
  EXPECT_EQ(j.wrong_values, 0u);
  ASSERT_EQ(j.excluded_workers.size(), c.excluded.size());
  for (std::size_t k = 0; k < c.excluded.size(); ++k) {
    EXPECT_EQ(j.excluded_workers[k].host, c.excluded[k].host);
    // The crash's round, or the one before where some survivor had not completed that yet when
    // the crashed worker, done with it, was about to start the next: all redo it.
    if (c.excluded[k].from_round != 99) {
      EXPECT_LE(j.excluded_workers[k].from_round, c.excluded[k].from_round);
      EXPECT_GE(j.excluded_workers[k].from_round + 1, c.excluded[k].from_round);
    }
  }
  EXPECT_FALSE(r.time_limit_reached);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  if (loss) {
    EXPECT_GT(j.retransmissions, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    CasesSeedsLoss, RinaFailures,
    ::testing::Combine(::testing::Values(RinaFailure{"agent", "  - {crash: w0, at_round: 1}", {{"w0", 1}}},
                                         RinaFailure{"worker", "  - {crash: w4, at_round: 2}", {{"w4", 2}}},
                                         RinaFailure{"autonomous", "  - {crash: a0, at_round: 3}", {{"a0", 3}}},
                                         RinaFailure{"rack_of_two", "  - {crash: w7, at_round: 1}", {{"w7", 1}}},
                                         RinaFailure{"mid_round", "  - {crash: w2, at_us: 40}", {{"w2", 99}}},
                                         RinaFailure{"two",
                                                     "  - {crash: w3, at_round: 1}\n  - {crash: w6, at_round: 2}",
                                                     {{"w3", 1}, {"w6", 2}}}),
                       ::testing::Values(1u, 2u, 3u), ::testing::Bool()),
    [](const ::testing::TestParamInfo<RinaFailureParam>& p) {
      return std::string(std::get<0>(p.param).name) + "_seed" + std::to_string(std::get<1>(p.param)) +
             (std::get<2>(p.param) ? "_loss" : "");
    });

TEST(ScenarioRun, CrashAtTimeOfThePs) {
  // The PS stops mid-round: its workers fail after their progress timeout, honestly reported.
  const Scenario s =
      parse_scenario_yaml(replaced("elements: 1000, rounds: 2}",
                                   "elements: 20000, rounds: 2, values_per_packet: 62, progress_timeout_us: 20000}\n"
                                   "faults: [{crash: ps0, at_us: 7}]"));
  const ScenarioResult r = run_inproc(s);
  const JobResult& a = r.jobs.at(0);
  EXPECT_FALSE(a.correct);
  EXPECT_EQ(a.completed_rounds, 0u);
  EXPECT_NE(a.error.find("failed"), std::string::npos) << a.error;
  EXPECT_EQ(r.leaked_aggregators, 0u);
  EXPECT_FALSE(r.time_limit_reached);
}

TEST(ScenarioRun, WithoutReclaimADeadJobLeaks) {
  // The authors' switch has no reclaim timer: the aggregators of a job that died stay held.
  Scenario s = load_scenario_file(example("crash.yaml"));
  s.topology.switches[0].config.reclaim_timeout = Duration::zero();
  const ScenarioResult r = run_inproc(s);
  EXPECT_TRUE(job_named(r, "b").correct) << job_named(r, "b").error;
  EXPECT_GT(r.leaked_aggregators, 0u);
}

TEST(ScenarioRun, OverflowTakesTheFloatPathAndIsCorrect) {
  const ScenarioResult r = run_example("overflow.yaml");
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_GT(j.float_fragments, 0u);
  EXPECT_LT(j.float_fragments, j.fragments);  // and most fragments still went the int32 way
}

// Two jobs on a table of 64: by default each keeps to 32 aggregators of its own and never
// collides; with the paper's hashed index (every fragment a new draw) they collide, are
// aggregated at the PS, and stay exact.
TEST(ScenarioRun, SmallTableCollidesAndStaysCorrect) {
  Scenario s = load_scenario_file(example("two-jobs-small-table.yaml"));
  const ScenarioResult defaults = run_inproc(s);
  for (const auto& j : defaults.jobs) {
    EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
    EXPECT_EQ(j.collisions, 0u) << j.name;
  }
  for (ScenarioJob& job : s.jobs) job.spec.index_policy = IndexPolicy::kHashed;
  const ScenarioResult hashed = run_inproc(s);
  for (const auto& j : hashed.jobs) {
    EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
    EXPECT_GT(j.collisions, 0u) << j.name;
  }
  EXPECT_EQ(defaults.leaked_aggregators, 0u);
  EXPECT_EQ(hashed.leaked_aggregators, 0u);
}

// Two ATP jobs and a PS-baseline job on one switch of 64 aggregators, linear indices and a
// fixed window of 32 fragments. With static sharing each ATP job gets 32 aggregators of its own
// (the ps job counts for no share): a window of linear indices fits its share, so neither job
// ever finds an aggregator busy, its own or the other's. With dynamic sharing both jobs' windows
// land on the same aggregators and collide. Every result is exact either way.
std::string two_jobs_on_one_small_switch(const std::string& sharing) {
  return "aggregator_sharing: " + sharing + R"(
seed: 4
link: {delay_us: 1, rate_gbps: 100}
topology:
  switches: [{name: tor, aggregators: 64}]
  hosts: [{name: a0, switch: tor}, {name: a1, switch: tor}, {name: a2, switch: tor}, {name: b0, switch: tor},
          {name: b1, switch: tor}, {name: pa, switch: tor}, {name: pb, switch: tor}, {name: pc, switch: tor}]
jobs:
  - {name: a, workers: [a0, a1, a2], ps: [pa], elements: 40000, rounds: 2, index: linear, congestion_control: false,
     window: 32}
  - {name: c, algorithm: ps, workers: [a0, b0], ps: [pc], elements: 5000}
  - {name: b, workers: [b0, b1], ps: [pb], elements: 30000, rounds: 3, index: linear, congestion_control: false,
     window: 32, compute_us: 3}
)";
}

TEST(ScenarioRun, StaticSharingKeepsTwoJobsOffEachOthersAggregators) {
  const ScenarioResult r = run_inproc(parse_scenario_yaml(two_jobs_on_one_small_switch("static")));
  for (const char* name : {"a", "b"}) {
    const JobResult& j = job_named(r, name);
    EXPECT_TRUE(j.correct) << name << ": " << j.error;
    EXPECT_EQ(j.collisions, 0u) << name;
    EXPECT_EQ(j.retransmissions, 0u) << name;
    EXPECT_EQ(j.ps_packets_received, j.fragments) << name;  // every fragment fully aggregated in the switch
    EXPECT_EQ(j.switch_aggregations.at("tor"), j.workers * j.fragments) << name;
    EXPECT_DOUBLE_EQ(j.in_network_share, 1.0) << name;
  }
  EXPECT_TRUE(job_named(r, "c").correct) << job_named(r, "c").error;
  EXPECT_EQ(r.leaked_aggregators, 0u);

  // The same jobs sharing the whole table dynamically: their linear windows overlap.
  const ScenarioResult d = run_inproc(parse_scenario_yaml(two_jobs_on_one_small_switch("dynamic")));
  std::uint64_t collisions = 0;
  for (const JobResult& j : d.jobs) {
    EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
    collisions += j.collisions;
  }
  EXPECT_GT(collisions, 0u);
}

// A scenario on one ToR of `aggregators` aggregators with hosts w0-w3 and ps, every link `link`,
// top-level keys `head` and the job list `jobs` (YAML lines), run in process.
ScenarioResult run_on_one_rack(const std::string& head, const std::string& link, int aggregators,
                               const std::string& jobs) {
  return run_inproc(
      parse_scenario_yaml(head + "\nlink: " + link +
                          "\ntopology:\n  switches: [{name: tor, aggregators: " + std::to_string(aggregators) + R"(}]
  hosts: [{name: w0, switch: tor}, {name: w1, switch: tor}, {name: w2, switch: tor}, {name: w3, switch: tor},
          {name: ps, switch: tor}]
jobs:
)" + jobs));
}

// Jobs a, b and c of workers w0-w3 and PS ps, each with `keys`, started at `starts` (us).
std::string jobs_a_b_c(const std::string& keys, const std::array<int, 3>& starts) {
  std::string jobs;
  for (std::size_t k = 0; k < 3; ++k) {
    jobs += "  - {name: " + std::string(1, static_cast<char>('a' + k)) + ", workers: [w0, w1, w2, w3], ps: [ps], " +
            keys + ", start_us: " + std::to_string(starts[k]) + "}\n";
  }
  return jobs;
}

// Three jobs with index hashed_slots (the default until the switch allocated) and every transport
// key at its default on a table of 3 x 32 aggregators: each keeps 32 slots (a third), and a slot
// that finds its aggregator taken moves to the one free the longest, so the slots settle and
// collide no more: 40 rounds collide exactly as often as the first 10 (with rehashing they went on
// colliding, 464-768 times in 10 rounds and 972-1,220 in 40), every result exact, nearly every
// packet aggregated in the switch.
TEST(ScenarioRun, HashedSlotsSettleThreeJobsOnAScarceTable) {
  auto three_jobs = [](int rounds) {
    return run_on_one_rack("seed: 3", "{delay_us: 1, rate_gbps: 100}", 96,
                           jobs_a_b_c("elements: 31000, rounds: " + std::to_string(rounds) +
                                          ", values_per_packet: 62, index: hashed_slots, compute_us: 20",
                                      {0, 7, 13}));
  };
  const ScenarioResult ten = three_jobs(10), forty = three_jobs(40);
  ASSERT_EQ(ten.jobs.size(), 3u);
  ASSERT_EQ(forty.jobs.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    const JobResult& j = forty.jobs[k];
    EXPECT_TRUE(ten.jobs[k].correct) << j.name << ": " << ten.jobs[k].error;
    EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
    EXPECT_LE(j.collisions, 4u * 32) << j.name;
    EXPECT_EQ(j.collisions, ten.jobs[k].collisions) << j.name << ": collisions after the slots settled";
    EXPECT_GE(j.in_network_share, 0.99) << j.name;
  }
  EXPECT_EQ(forty.leaked_aggregators, 0u);
}

// Issue 19's test of dynamic sharing: three jobs whose compute phases (100 us) are longer than
// their allreduce, on a table of 48 aggregators (16 per job when static). With the defaults the
// switch allocates: a job that communicates while the others compute takes what the table has, and
// the table brake gives a job that comes along its share. Dynamic beats static shares (6,276 vs
// 4,319 iterations per simulated second: 1.45x), every result exact, no aggregator left held.
TEST(ScenarioRun, DynamicSharingBeatsStaticSharesOnAScarceTableWhenJobsCompute) {
  auto run = [](const std::string& sharing) {
    return run_on_one_rack(
        "seed: 3\naggregator_sharing: " + sharing, "{delay_us: 1, rate_gbps: 100}", 48,
        jobs_a_b_c("elements: 31000, rounds: 6, warmup_rounds: 1, values_per_packet: 62, compute_us: 100",
                   {0, 33, 67}));
  };
  auto iterations_per_second = [](const ScenarioResult& r) {
    double sum = 0;
    for (const JobResult& j : r.jobs) sum += (j.completed_rounds - j.warmup_rounds) / j.seconds;
    return sum / static_cast<double>(r.jobs.size());
  };
  const ScenarioResult fixed = run("static"), dynamic = run("dynamic");
  for (const ScenarioResult* r : {&fixed, &dynamic}) {
    ASSERT_EQ(r->jobs.size(), 3u);
    for (const JobResult& j : r->jobs) EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
    EXPECT_EQ(r->leaked_aggregators, 0u);
  }
  EXPECT_GE(iterations_per_second(dynamic), 1.25 * iterations_per_second(fixed))
      << iterations_per_second(dynamic) << " vs " << iterations_per_second(fixed);
  std::uint64_t marks = 0;
  for (const JobResult& j : dynamic.jobs) {
    EXPECT_GE(j.in_network_share, 0.9) << j.name;
    marks += j.table_marks;
  }
  EXPECT_GT(marks, 0u) << "the brake never acted: the table was not scarce";
}

// A job that starts while another holds the table gets an even share of it from its first round
// (the table brake, and its window starting at its part), not what the first job leaves over:
// both jobs' rounds while they overlap take about what two static halves take (1.7-1.9 ms; alone
// 0.9 ms), every result exact. The links' queues are the defaults' (a switch port holds 100).
TEST(ScenarioRun, AJobArrivingAtAFullTableGetsItsShare) {
  const ScenarioResult r = run_on_one_rack(
      "seed: 3", "{delay_us: 20, rate_gbps: 100}", 96,
      "  - {name: a, workers: [w0, w1, w2, w3], ps: [ps], elements: 62000, rounds: 20, values_per_packet: 62}\n"
      "  - {name: b, workers: [w0, w1, w2, w3], ps: [ps], elements: 62000, rounds: 5, values_per_packet: 62, "
      "start_us: 100}\n");
  ASSERT_EQ(r.jobs.size(), 2u);
  for (const JobResult& j : r.jobs) EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
  EXPECT_EQ(r.leaked_aggregators, 0u);
  const JobResult& b = r.jobs[1];
  ASSERT_EQ(b.round_end_seconds.size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    const double round = b.round_end_seconds[k] - (k == 0 ? 0.0 : b.round_end_seconds[k - 1]);
    EXPECT_LT(round, 2.2e-3) << "b's round " << k << " beside a";
  }
  EXPECT_GE(b.in_network_share, 0.8);
}

// Hashed indices inside a share collide with the job's own fragments only; with a table too
// small for two shares of a window, both jobs still finish exact through the PS.
TEST(ScenarioRun, StaticSharingExampleIsCorrect) {
  const ScenarioResult r = run_example("static-sharing.yaml");
  for (const JobResult& j : r.jobs) EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
  EXPECT_EQ(r.leaked_aggregators, 0u);
}

// A share of no aggregators is one ScenarioError sentence naming the job and the switch.
TEST(ScenarioRun, StaticShareOfNoAggregatorsNamesTheJob) {
  const Scenario s = parse_scenario_yaml(R"(
aggregator_sharing: static
topology:
  switches: [{name: tor, aggregators: 1}]
  hosts: [{name: w0, switch: tor}, {name: w1, switch: tor}, {name: w2, switch: tor}, {name: w3, switch: tor},
          {name: p, switch: tor}]
jobs:
  - {name: a, workers: [w0, w1], ps: [p], elements: 10}
  - {name: b, workers: [w2, w3], ps: [p], elements: 10}
)");
  try {
    run_inproc(s);
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "jobs[0]: job 'a' gets 1 of 2 static shares of the aggregators, but switch 'tor', the smallest ATP "
              "table, has only 1; give it at least 2 aggregators or share the tables dynamically");
  }
}

// Regression: after a timeout every worker of a job resends at once; uncapped, unjittered
// bursts filled a 50-packet drop-tail queue ahead of one worker's resend at every timeout,
// so job j2 made no progress for 50 ms and failed although nothing had crashed.
TEST(ScenarioRun, TimeoutResendBurstsDoNotStarveAWorker) {
  const ScenarioResult r = run_inproc(parse_scenario_yaml(R"(
seed: 85
time_limit_s: 5
link: {delay_us: 0.5, rate_gbps: 100, buffer_packets: 50, ecn_threshold_packets: 20}
topology:
  switches: [{name: tor0, aggregators: 64, width: 256, reclaim_timeout_us: 500}, {name: tor1, aggregators: 64, width: 256}, {name: core, atp: false}]
  hosts: [{name: h0_0, switch: tor0}, {name: h0_1, switch: tor0}, {name: h0_2, switch: tor0}, {name: h0_3, switch: tor0}, {name: h0_4, switch: tor0}, {name: h1_0, switch: tor1}, {name: h1_1, switch: tor1}, {name: h1_2, switch: tor1}, {name: h1_3, switch: tor1}, {name: h1_4, switch: tor1}, {name: h1_5, switch: tor1}]
  links: [[tor0, core], [tor1, core]]
jobs:
  - {name: j0, workers: [h1_5, h0_2, h0_1, h1_0, h0_4, h1_3, h0_0, h1_1], ps: [h1_2, h1_4], elements: 7059, values_per_packet: 7, index: linear, window: 1, progress_timeout_us: 50000}
  - {name: j1, workers: [h0_4, h1_0], ps: [h1_5, h0_1], elements: 9438, values_per_packet: 7, magnitude: 5.0, index: linear, window: 1, rto_us: 100, progress_timeout_us: 50000, initial_seq: 4294967200}
  - {name: j2, workers: [h1_2, h1_0, h1_3, h0_1, h0_0, h1_1], ps: [h0_3], elements: 9013, rounds: 3, values_per_packet: 7, index: linear, rto_us: 100, progress_timeout_us: 50000}
faults:
  - {link: [h0_2, tor0], loss: 0.05, duplicate: 0.01}
  - {link: [h1_1, tor1], loss: 0.05}
)"));
  for (const auto& job : r.jobs) EXPECT_TRUE(job.correct) << job.name << ": " << job.error;
  EXPECT_GT(r.links.size(), 0u);
}

// Regression: 32 workers under one ToR, 200 Mbit/s links, every key at its default. The first
// RTO (1 ms) passes before the first window's results come; every worker resends, and each
// resend of a fragment the ToR already summed is a packet to the PS and an answer from it, so the
// PS's link queued 32 packets a fragment. Round trips grew to 10 ms, every later fragment timed
// out too, and the estimate (Karn: no sample from a resent fragment; clipped samples) never saw
// them: 21,201 resends and 0.6 s a round where the link takes 11 ms. A spurious timeout's round
// trip now raises the estimate.
TEST(ScenarioRun, ThirtyTwoWorkersOnSlowLinksDoNotTimeOutIntoCollapse) {
  const ScenarioResult r = run_inproc(parse_scenario_yaml(R"(
link: {rate_mbps: 200, ecn_threshold_packets: 16}
topology:
  switches: [{name: tor0}, {name: core}]
  hosts: [{name: w0, switch: tor0}, {name: w1, switch: tor0}, {name: w2, switch: tor0}, {name: w3, switch: tor0}, {name: w4, switch: tor0}, {name: w5, switch: tor0}, {name: w6, switch: tor0}, {name: w7, switch: tor0}, {name: w8, switch: tor0}, {name: w9, switch: tor0}, {name: w10, switch: tor0}, {name: w11, switch: tor0}, {name: w12, switch: tor0}, {name: w13, switch: tor0}, {name: w14, switch: tor0}, {name: w15, switch: tor0}, {name: w16, switch: tor0}, {name: w17, switch: tor0}, {name: w18, switch: tor0}, {name: w19, switch: tor0}, {name: w20, switch: tor0}, {name: w21, switch: tor0}, {name: w22, switch: tor0}, {name: w23, switch: tor0}, {name: w24, switch: tor0}, {name: w25, switch: tor0}, {name: w26, switch: tor0}, {name: w27, switch: tor0}, {name: w28, switch: tor0}, {name: w29, switch: tor0}, {name: w30, switch: tor0}, {name: w31, switch: tor0}, {name: ps0, switch: core}]
  links: [[tor0, core]]
jobs:
  - {workers: [w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15, w16, w17, w18, w19, w20, w21, w22, w23, w24, w25, w26, w27, w28, w29, w30, w31], ps: [ps0], elements: 65536, rounds: 6}
)"));
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_LE(j.retransmissions, 8u * 32u) << "a few per worker while the first round trips are learnt";
  EXPECT_GE(j.in_network_share, 0.95);
}

TEST(ScenarioRun, Fig9PsReceivesOnePacketPerFragment) {
  const ScenarioResult r = run_example("fig9.yaml");
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.completed_rounds, 2u);
  EXPECT_EQ(j.fragments, 2u * 1000u);  // 62000 values / 62 per packet, two rounds
  EXPECT_EQ(j.ps_packets_received, j.fragments);
  EXPECT_EQ(j.retransmissions, 0u);
  EXPECT_EQ(j.collisions, 0u);
  // Level 0: sw0 and sw1 each add their two workers; level 1: sw2 adds two partial sums and w4, w5.
  EXPECT_EQ(j.switch_aggregations.at("sw0"), 2 * j.fragments);
  EXPECT_EQ(j.switch_aggregations.at("sw1"), 2 * j.fragments);
  EXPECT_EQ(j.switch_aggregations.at("sw2"), 4 * j.fragments);
  EXPECT_DOUBLE_EQ(j.in_network_share, 1.0);
}

// Switch links with cycles (every leaf to both spines): exact, every leaf aggregates, nothing
// reaches the PS unaggregated, and no worker's result is sent twice.
TEST(ScenarioRun, LeafSpineWithCyclesIsExactAndAggregatesAtTheLeaves) {
  const ScenarioResult r = run_example("leaf-spine.yaml");
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.ps_packets_received, j.fragments);
  EXPECT_EQ(j.retransmissions, 0u);
  for (const char* leaf : {"leaf0", "leaf1", "leaf2"}) EXPECT_EQ(j.switch_aggregations.at(leaf), 2 * j.fragments);
  EXPECT_EQ(j.switch_aggregations.at("leaf3"), 4 * j.fragments);  // 3 partial sums and w6
  EXPECT_EQ(j.switch_aggregations.count("spine1"), 0u);           // ties go to spine0
  EXPECT_DOUBLE_EQ(j.in_network_share, 1.0);
}

TEST(ScenarioRun, SameSeedSameJsonOtherSeedOtherTrace) {
  Scenario s = load_scenario_file(example("lossy.yaml"));
  const std::string first = to_json(run_inproc(s));
  EXPECT_EQ(first, to_json(run_inproc(s)));
  s.seed += 1;
  EXPECT_NE(first, to_json(run_inproc(s)));
}

TEST(ScenarioRun, TimeLimitIsReported) {
  const Scenario s = parse_scenario_yaml(replaced("seed: 1", "seed: 1\ntime_limit_s: 0.000002"));
  const ScenarioResult r = run_inproc(s);
  EXPECT_TRUE(r.time_limit_reached);
  EXPECT_FALSE(r.jobs.at(0).correct);
  EXPECT_NE(r.jobs.at(0).error.find("time limit"), std::string::npos) << r.jobs.at(0).error;
}

TEST(ScenarioRun, LinkDownForAWhileThenRecovers) {
  // The worker's link drops everything for the first 300 us, then works: a timed fault.
  const Scenario s = parse_scenario_yaml(
      replaced("rounds: 2}", "rounds: 2, rto_us: 100}\nfaults: [{link: [w0, tor0], loss: 1.0, until_us: 300}]"));
  const ScenarioResult r = run_inproc(s);
  const JobResult& a = r.jobs.at(0);
  EXPECT_TRUE(a.correct) << a.error;
  EXPECT_GT(a.retransmissions, 0u);
  EXPECT_GT(a.seconds, 300e-6);
}

TEST(ScenarioRun, ComputeTimeAndStartTimeDelayRounds) {
  const Scenario s = parse_scenario_yaml(replaced("rounds: 2}", "rounds: 3, start_us: 100, compute_us: 1000}"));
  const ScenarioResult r = run_inproc(s);
  const JobResult& a = r.jobs.at(0);
  EXPECT_TRUE(a.correct) << a.error;
  EXPECT_GT(a.seconds, 2000e-6);  // two off phases between three rounds
  EXPECT_GT(r.simulated_seconds, 2100e-6);
}

TEST(ScenarioRun, CrashedJobsAggregatorsAreReclaimed) {
  // Job a's partial sums wait for a worker that is gone: the switch's timeout must free them.
  const ScenarioResult r = run_example("crash.yaml");
  EXPECT_GT(job_named(r, "a").reclaimed_aggregators, 0u);
  EXPECT_EQ(job_named(r, "b").reclaimed_aggregators, 0u);  // b finished: its parameter packets freed all
  EXPECT_EQ(r.leaked_aggregators, 0u);
}

double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// Packets the links lost or dropped from a full queue, over every direction.
std::uint64_t link_losses(const ScenarioResult& r) {
  std::uint64_t n = 0;
  for (const auto& l : r.links) n += l.lost + l.queue_drops;
  return n;
}

// The shared ToR restarts mid-job: it loses its aggregators and drops everything while down.
// Retransmission and the PS must still give exact results, over several seeds.
class ScenarioRestart : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ScenarioRestart, JobsSurviveTheirSwitchLosingAllState) {
  Scenario s = load_scenario_file(example("switch-restart.yaml"));
  s.seed = GetParam();
  ASSERT_EQ(s.restarts.size(), 1u);
  const SwitchRestart restart = s.restarts[0];
  Scenario without = s;
  without.restarts.clear();
  const ScenarioResult base = run_inproc(without);
  const ScenarioResult r = run_inproc(s);
  EXPECT_EQ(link_losses(r), 0u);  // so every packet lost was lost by the switch
  for (std::size_t j = 0; j < r.jobs.size(); ++j) {
    const JobResult& job = r.jobs[j];
    SCOPED_TRACE(job.name);
    EXPECT_TRUE(job.correct) << job.error;
    EXPECT_EQ(job.completed_rounds, job.rounds);
    // Mid-job: without the restart the job was still running at `at` and needed no timeout;
    // with it, it needed timeouts and finished only after the switch came back.
    EXPECT_GT(base.jobs[j].seconds, to_seconds(restart.at));
    EXPECT_EQ(base.jobs[j].timeouts, 0u);
    EXPECT_GT(job.timeouts, 0u);
    EXPECT_GT(job.seconds, to_seconds(restart.at + restart.down));
    // Aggregations before the restart are kept and the fresh switch aggregates again.
    EXPECT_GT(job.switch_aggregations.at("tor"), 0u);
  }
  // The switch came back knowing its jobs: nothing rejected as unknown or not admitted.
  EXPECT_EQ(r.rejected_packets, 0u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  EXPECT_EQ(r.host_dropped_packets, 0u);
  EXPECT_EQ(to_json(r), to_json(run_inproc(s)));  // same seed, same trace
}

INSTANTIATE_TEST_SUITE_P(Seeds, ScenarioRestart, ::testing::Values(21, 1, 2, 3));

TEST(ScenarioRun, AWorkerLinkDownForAMillisecondCostsRttsNotAWindowOfRtos) {
  // Every packet on a0's link is lost for 1 ms: a0 loses its whole window of results. Recovery
  // resends the next fragments as resent ones complete (RTTs); one RTO (500 us) per fragment
  // would take about a window x RTO (0.9 s here, past the 200 ms progress timeout).
  const Scenario s = parse_scenario_yaml(R"(
seed: 21
link: {delay_us: 2, rate_gbps: 10}
topology:
  switches: [{name: tor, atp: true, reclaim_timeout_us: 5000}]
  hosts: [{name: a0, switch: tor}, {name: a1, switch: tor}, {name: ps_a, switch: tor}]
jobs:
  - {name: a, workers: [a0, a1], ps: [ps_a], elements: 250000, rounds: 3, rto_us: 500, progress_timeout_us: 200000}
faults:
  - {link: [a0, tor], loss: 1.0, from_us: 600, until_us: 1600}
)");
  const ScenarioResult r = run_inproc(s);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_TRUE(r.jobs[0].correct) << r.jobs[0].error;
  EXPECT_GT(r.jobs[0].timeouts, 0u);
  // 0.12 s: the holes go as results come back, and a timeout of the same data again resends half
  // as many as the one before. Full-window bursts at every backed-off timeout made this 0.09 s,
  // and collapsed the 200 Mbit/s netns testbed (docs/benchmarks.md).
  EXPECT_LT(r.simulated_seconds, 0.15) << to_summary(r);
}

TEST(ScenarioRun, RestartKeepsTheCountersOfTheLostPipeline) {
  // A restart after the job finished changes nothing the job did: every count must be the same
  // as without it, although the pipeline that counted them was thrown away.
  Scenario s = load_scenario_file(example("noise.yaml"));
  const ScenarioResult base = run_inproc(s);
  ASSERT_LT(base.simulated_seconds, 0.05);
  s.restarts.push_back(SwitchRestart{"tor", std::chrono::milliseconds(50), std::chrono::milliseconds(1)});
  const ScenarioResult r = run_inproc(s);
  const JobResult& job = r.jobs.at(0);
  EXPECT_TRUE(job.correct) << job.error;
  EXPECT_EQ(job.switch_aggregations, base.jobs[0].switch_aggregations);
  EXPECT_EQ(job.collisions, base.jobs[0].collisions);
  EXPECT_GT(r.noise_packets, 0u);
  EXPECT_EQ(r.rejected_packets, base.rejected_packets);
  EXPECT_EQ(r.noise_packets, base.noise_packets);
}

// A host floods its ToR with every kind of bad packet noise_packet makes (random bytes, spoofed
// gradients and parameter packets of the installed job, unknown jobs, corrupted headers): the
// switch must reject each one, and the job must not notice.
class ScenarioNoise : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ScenarioNoise, SwitchRejectsEveryNoisePacket) {
  Scenario s = load_scenario_file(example("noise.yaml"));
  s.seed = GetParam();
  const ScenarioResult r = run_inproc(s);
  const JobResult& job = r.jobs.at(0);
  EXPECT_TRUE(job.correct) << job.error;
  EXPECT_EQ(job.completed_rounds, job.rounds);
  EXPECT_GT(r.noise_packets, 100u);  // at 10k pps over the ~25 ms the job runs
  EXPECT_EQ(r.rejected_packets, r.noise_packets);
  EXPECT_EQ(r.host_dropped_packets, 0u);  // none got past the switch to a host
  EXPECT_EQ(link_losses(r), 0u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  // The noise stopped with the job instead of running to the time limit.
  EXPECT_FALSE(r.time_limit_reached);
  EXPECT_LT(r.simulated_seconds, job.seconds + 1e-3);
  EXPECT_EQ(to_json(r), to_json(run_inproc(s)));  // same seed, same trace

  // The noise touches nothing the job computes: same counts as the same run without it.
  Scenario quiet = s;
  quiet.noise.clear();
  const ScenarioResult quiet_result = run_inproc(quiet);
  const JobResult& alone = quiet_result.jobs.at(0);
  EXPECT_EQ(job.switch_aggregations, alone.switch_aggregations);
  EXPECT_EQ(job.ps_packets_received, alone.ps_packets_received);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ScenarioNoise, ::testing::Values(17, 1, 2, 3));

TEST(ScenarioRun, NoiseWindowIsRespected) {
  // from/until bound the noise: 10k pps for 5 ms is 50 packets, all inside the job's run.
  Scenario s = load_scenario_file(example("noise.yaml"));
  s.noise[0].rate_pps = 10000;
  s.noise[0].from = std::chrono::milliseconds(2);
  s.noise[0].until = std::chrono::milliseconds(7);
  const ScenarioResult r = run_inproc(s);
  EXPECT_TRUE(r.jobs.at(0).correct) << r.jobs.at(0).error;
  EXPECT_EQ(r.noise_packets, 50u);
  EXPECT_EQ(r.rejected_packets, 50u);
}

// A sweep over the shapes a job can take: workers spread over three racks (two levels), one or
// two PS shards, clean or lossy links, a roomy or a tiny aggregator table, inputs that fit int32
// or overflow it. Every combination must give exact results and leave no aggregator behind.
using SweepParam = std::tuple<int /*workers*/, int /*ps*/, bool /*lossy*/, int /*aggregators*/, double /*magnitude*/>;
class ScenarioSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(ScenarioSweep, ExactAndNoLeaks) {
  const auto [workers, ps, lossy, aggregators, magnitude] = GetParam();
  std::string yaml = "seed: " + std::to_string(workers * 1000 + ps * 100 + aggregators) + "\n";
  yaml += "link: {delay_us: 1, rate_gbps: 50}\n";
  yaml += "topology:\n  switches:\n";
  for (int t = 0; t < 3; ++t) {
    yaml += "    - {name: tor" + std::to_string(t) + ", aggregators: " + std::to_string(aggregators) + "}\n";
  }
  yaml += "    - {name: core, atp: false}\n  hosts:\n";
  std::string worker_list, ps_list;
  for (int w = 0; w < workers; ++w) {
    yaml += "    - {name: w" + std::to_string(w) + ", switch: tor" + std::to_string(w % 3) + "}\n";
    worker_list += (w ? ", w" : "w") + std::to_string(w);
  }
  for (int p = 0; p < ps; ++p) {
    // The first PS shares rack tor2 with workers (two-level aggregation), the second sits behind the core.
    yaml += "    - {name: ps" + std::to_string(p) + ", switch: " + (p == 0 ? "tor2" : "core") + "}\n";
    ps_list += (p ? ", ps" : "ps") + std::to_string(p);
  }
  yaml += "  links: [[tor0, core], [tor1, core], [tor2, core]]\n";
  yaml += "jobs:\n  - {name: sweep, workers: [" + worker_list + "], ps: [" + ps_list +
          "], elements: 54321, rounds: 2, rto_us: 200, magnitude: " + std::to_string(magnitude) + "}\n";
  if (lossy) {
    yaml += "faults:\n";
    yaml += "  - {link: [w0, tor0], loss: 0.02, duplicate: 0.01, reorder: 0.02}\n";
    yaml += "  - {link: [tor2, core], loss: 0.01, duplicate: 0.01, reorder: 0.01}\n";
    yaml += "  - {link: [ps0, tor2], loss: 0.01, reorder: 0.02}\n";
  }
  SCOPED_TRACE(yaml);
  const ScenarioResult r = run_inproc(parse_scenario_yaml(yaml));
  const JobResult& j = r.jobs.at(0);
  EXPECT_TRUE(j.correct) << j.error;
  EXPECT_EQ(j.completed_rounds, 2u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
  EXPECT_EQ(r.host_dropped_packets, 0u);
  // 12 at the first round's 2^26 (the default 1e8, a power of two): 3 workers' sums pass 2^31.
  if (magnitude > 5) {
    EXPECT_GT(j.float_fragments, 0u);
  } else {
    EXPECT_EQ(j.float_fragments, 0u);
  }
  if (!lossy && aggregators >= 4096 && magnitude < 5 && ps == 1) {
    // Most of it aggregated in the switches. (The second PS, behind the plain core switch, only
    // gets rack-level partial sums, and none at all when every rack has a single worker.)
    EXPECT_GT(j.in_network_share, 0.5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ScenarioSweep,
                         ::testing::Combine(::testing::Values(3, 7), ::testing::Values(1, 2), ::testing::Bool(),
                                            ::testing::Values(8, 4096), ::testing::Values(1.0, 12.0)));

TEST(ScenarioReport, JsonHasEveryRequiredKey) {
  const ScenarioResult r = run_example("crash.yaml");
  const auto j = nlohmann::json::parse(to_json(r));
  for (const char* key :
       {"backend", "leaked_aggregators", "noise_packets", "rejected_packets", "jobs", "links", "simulated_seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_EQ(j["jobs"].size(), 2u);
  for (const auto& job : j["jobs"]) {
    for (const char* key :
         {"name", "correct", "completed_rounds", "switch_aggregations", "ps_packets_received", "retransmissions",
          "collisions", "reclaimed_aggregators", "float_fragments", "fragments", "seconds", "error"}) {
      EXPECT_TRUE(job.contains(key)) << key;
    }
    EXPECT_TRUE(job["switch_aggregations"].contains("tor"));
  }
  EXPECT_EQ(j["jobs"][0]["correct"], false);
  EXPECT_EQ(j["jobs"][1]["correct"], true);
  // One entry per direction of every link: 6 hosts, no switch links.
  ASSERT_EQ(j["links"].size(), 12u);
  for (const auto& l : j["links"]) {
    for (const char* key : {"from", "to", "packets", "bytes"}) EXPECT_TRUE(l.contains(key)) << key;
  }
  EXPECT_EQ(j["links"][0]["from"], "a0");
  EXPECT_EQ(j["links"][0]["to"], "tor");
  EXPECT_EQ(j["links"][1]["from"], "tor");
  EXPECT_EQ(j["links"][1]["to"], "a0");
  EXPECT_GT(j["links"][0]["bytes"].get<std::uint64_t>(), 0u);
}

TEST(ScenarioReport, SummaryNamesEveryJob) {
  const ScenarioResult r = run_example("crash.yaml");
  const std::string s = to_summary(r);
  EXPECT_NE(s.find("backend inproc"), std::string::npos);
  EXPECT_NE(s.find("\na "), std::string::npos);
  EXPECT_NE(s.find("\nb "), std::string::npos);
  EXPECT_NE(s.find("crashed"), std::string::npos);
  EXPECT_NE(s.find("aggregators reclaimed by switch timeouts: "), std::string::npos) << s;
  EXPECT_EQ(s.find("noise:"), std::string::npos) << s;  // no noise, no noise line
}

TEST(ScenarioReport, SummaryCountsNoise) {
  const ScenarioResult r = run_example("noise.yaml");
  const std::string s = to_summary(r);
  const std::string line = "noise: " + std::to_string(r.noise_packets) + " packets sent, " +
                           std::to_string(r.rejected_packets) + " rejected by switches";
  EXPECT_NE(s.find(line), std::string::npos) << s;
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

// ATP's loss detection finds every hole of a window once it is overdue, and repeats a fast resend
// that got no answer, so a lossy link's losses are repaired before the RTO, whose 1 ms floor is
// tens of round trips. The quick start's link (1% loss, duplicates and reordering one way and the
// other), 10 rounds, four seeds: about 1,350 packets lost. With the expected fragment alone resent
// on three later results (before 2026-11-28) 66 timeouts fired; now 6.
TEST(ScenarioRun, ALossyLinksHolesAreRepairedBeforeTheRto) {
  std::uint64_t lost = 0, timeouts = 0, fast = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Scenario s = load_scenario_file(example("quickstart.yaml"));
    s.seed = seed;
    for (ScenarioJob& job : s.jobs) job.rounds = 10;
    const ScenarioResult r = run_inproc(s);
    for (const JobResult& j : r.jobs) {
      EXPECT_TRUE(j.correct) << j.error;
      timeouts += j.timeouts;
      fast += j.fast_retransmits;
    }
    for (const LinkResult& l : r.links) lost += l.lost;
  }
  EXPECT_GT(lost, 1000u);
  EXPECT_GT(fast, lost / 2);
  EXPECT_LE(timeouts * 100, lost) << timeouts << " timeouts for " << lost << " packets lost";
}

// loss_recovery: timeout is SwitchML's recovery (the baseline of Fig. 10): with loss, results
// stay exact but nothing is resent before the RTO; ATP's own recovery resends on out-of-order results.
TEST(ScenarioRun, TimeoutOnlyRecoveryResendsOnlyAfterTimeouts) {
  Scenario s = load_scenario_file(example("lossy.yaml"));
  const ScenarioResult atp = run_inproc(s);
  for (ScenarioJob& job : s.jobs) job.spec.loss_recovery = LossRecovery::kTimeoutOnly;
  const ScenarioResult timeout = run_inproc(s);
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    EXPECT_TRUE(atp.jobs[j].correct) << atp.jobs[j].error;
    EXPECT_TRUE(timeout.jobs[j].correct) << timeout.jobs[j].error;
    EXPECT_GT(atp.jobs[j].fast_retransmits, 0u);
    EXPECT_EQ(timeout.jobs[j].fast_retransmits, 0u);
    EXPECT_GT(timeout.jobs[j].timeouts, atp.jobs[j].timeouts);
    EXPECT_GT(timeout.jobs[j].seconds, atp.jobs[j].seconds);
  }
}

TEST(ScenarioYaml, LossRecoveryKey) {
  const std::string base =
      "seed: 1\ntopology:\n  switches: [{name: t}]\n  hosts: [{name: a, switch: t}, {name: p, switch: t}]\n"
      "jobs:\n  - {workers: [a], ps: [p], elements: 10";
  EXPECT_EQ(parse_scenario_yaml(base + "}\n").jobs[0].spec.loss_recovery, LossRecovery::kAtp);
  EXPECT_EQ(parse_scenario_yaml(base + ", loss_recovery: timeout}\n").jobs[0].spec.loss_recovery,
            LossRecovery::kTimeoutOnly);
  try {
    parse_scenario_yaml(base + ", loss_recovery: magic}\n");
    ADD_FAILURE() << "accepted loss_recovery: magic";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("jobs[0].loss_recovery: must be 'atp' or 'timeout', got magic"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

TEST(ScenarioRun, WarmupRoundsAreCheckedButNotTimed) {
  Scenario s = load_scenario_file(example("fig9.yaml"));
  s.jobs[0].rounds = 3;
  s.jobs[0].warmup_rounds = 1;
  s.jobs[0].compute_time = std::chrono::microseconds(10);
  const JobResult j = run_inproc(s).jobs.at(0);
  ASSERT_TRUE(j.correct) << j.error;
  ASSERT_EQ(j.round_end_seconds.size(), 3u);
  EXPECT_LT(j.round_end_seconds[0], j.round_end_seconds[1]);
  EXPECT_DOUBLE_EQ(j.seconds, j.round_end_seconds[2] - j.round_end_seconds[0]);
  EXPECT_EQ(j.warmup_rounds, 1u);
  EXPECT_DOUBLE_EQ(j.algbw_gbps, j.tensor_bytes * 8.0 * 2 / j.seconds / 1e9);
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

TEST(ScenarioRun, OnlySwitchPortsMarkEcnByTheLinkDefault) {
  const Scenario s = parse_scenario_yaml(R"(
seed: 2
link: {rate_gbps: 10, ecn_threshold_packets: 2}
topology:
  switches: [{name: tor}]
  hosts: [{name: a, switch: tor}, {name: b, switch: tor}, {name: c, switch: tor}, {name: p, switch: tor}]
jobs:
  - {algorithm: ps, workers: [a, b, c], ps: [p], elements: 50000}
)");
  const ScenarioResult r = run_inproc(s);
  ASSERT_TRUE(r.jobs[0].correct) << r.jobs[0].error;
  std::uint64_t at_hosts = 0, at_switch = 0;
  for (const LinkResult& l : r.links) (l.from == "tor" ? at_switch : at_hosts) += l.ecn_marked;
  EXPECT_EQ(at_hosts, 0u);   // the workers' windows queue at their NICs, unmarked
  EXPECT_GT(at_switch, 0u);  // the PS's port is the incast queue
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

// The authors' slot hashing: a job's in-flight fragments never share a slot, and remaps stick
// per slot, so one job on a table twice its window collides far less than with per-sequence
// hashing (whose every new sequence number is a new draw), and both stay exact.
// Two ATP jobs whose rack-0 sums cross one 10 Gbit/s link (experiments/netns/two-jobs-one-link at
// simulated scale), every queue setting at its default: the link's port marks (from 63 packets,
// sized for 10 Gbit/s), and once b has started the two split the link evenly (issue 19: within
// 0.8-1.25 of each other) and together still fill most of it. b runs 40 rounds: from 63 packets
// the windows take longer to meet than from 20 (over b's first 15 rounds a / b was 1.29; 1.02
// from 40 on; at 20 packets 1.02 either way). (This simulator's even split holds without marks too; on the
// netns testbed, where the hosts' timing is not identical, it was 1.32 without them.)
TEST(ScenarioRun, TwoAtpJobsOnOneLinkShareItEvenly) {
  const ScenarioResult r = run_inproc(parse_scenario_yaml(R"(
seed: 5
link: {rate_gbps: 10}
topology:
  switches: [{name: tor0}, {name: tor1}]
  hosts: [{name: a0, switch: tor0}, {name: a1, switch: tor0}, {name: b0, switch: tor0}, {name: b1, switch: tor0},
          {name: a2, switch: tor1}, {name: b2, switch: tor1}, {name: ps_a, switch: tor1}, {name: ps_b, switch: tor1}]
  links: [[tor0, tor1]]
jobs:
  - {name: a, workers: [a0, a1, a2], ps: [ps_a], elements: 262144, rounds: 120}
  - {name: b, workers: [b0, b1, b2], ps: [ps_b], elements: 262144, rounds: 40, start_us: 20000}
)"));
  ASSERT_TRUE(all_correct(r));
  // Each job's median rate (Gbit/s of tensor per round) over the rounds that end while both run,
  // from 2 ms after b starts.
  const double b_start = 0.020;
  const double b_end = r.jobs[1].round_end_seconds.back();
  const auto median_rate = [&](const JobResult& j, double start) {
    std::vector<double> rates;
    double from = start;
    for (double end : j.round_end_seconds) {
      if (end > b_start + 0.002 && end <= b_end)
        rates.push_back(static_cast<double>(j.tensor_bytes) * 8 / (end - from) / 1e9);
      from = end;
    }
    std::sort(rates.begin(), rates.end());
    return rates.empty() ? 0.0 : rates[rates.size() / 2];
  };
  const double a = median_rate(r.jobs[0], 0), b = median_rate(r.jobs[1], b_start);
  EXPECT_GT(a / b, 0.8) << a << " " << b;
  EXPECT_LT(a / b, 1.25) << a << " " << b;
  EXPECT_GT(a + b, 0.85 * 10) << a << " " << b;
  const auto link = std::find_if(r.links.begin(), r.links.end(),
                                 [](const LinkResult& l) { return l.from == "tor0" && l.to == "tor1"; });
  ASSERT_NE(link, r.links.end());
  EXPECT_GT(link->ecn_marked, 0u);
}

TEST(ScenarioRun, HashedSlotsSettleWherePerSequenceHashingKeepsColliding) {
  const std::string yaml = R"(
seed: 4
link: {rate_gbps: 100, delay_us: 1}
topology:
  switches: [{name: tor, aggregators: 512}]
  hosts: [{name: a, switch: tor}, {name: b, switch: tor}, {name: p, switch: tor}]
jobs:
  - {workers: [a, b], ps: [p], elements: 200000, rounds: 4, values_per_packet: 62, window: 256, max_window: 256,
     congestion_control: false, index: )";
  const JobResult hashed = run_inproc(parse_scenario_yaml(yaml + "hashed}\n")).jobs.at(0);
  const JobResult slots = run_inproc(parse_scenario_yaml(yaml + "hashed_slots}\n")).jobs.at(0);
  EXPECT_TRUE(hashed.correct) << hashed.error;
  EXPECT_TRUE(slots.correct) << slots.error;
  EXPECT_GT(hashed.collisions, 5000u);
  EXPECT_LT(slots.collisions * 10, hashed.collisions) << slots.collisions << " vs " << hashed.collisions;
  EXPECT_GT(slots.in_network_share, 0.95);
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

// --- limits: a scenario that needs more memory than the machine has is refused by its key
// before anything is allocated; a scenario "file" that is a device is refused before it is read.

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(no ScenarioError)";
}

// `workers` workers of one job with `elements` values each, on one ToR of `aggregators` x `width`.
std::string sized_scenario(int workers, const std::string& elements, const std::string& table) {
  std::string hosts, list;
  for (int w = 0; w < workers; ++w) {
    hosts += "{name: w" + std::to_string(w) + ", switch: tor}, ";
    list += (w ? ", w" : "w") + std::to_string(w);
  }
  return "topology:\n  switches: [{name: tor" + table + "}]\n  hosts: [" + hosts +
         "{name: p, switch: tor}]\njobs:\n  - {name: a, workers: [" + list + "], ps: [p], elements: " + elements +
         "}\n";
}

TEST(ScenarioLimits, ElementsBeyondTheMachinesMemoryAreRefusedByTheParser) {
  // 2^30 values (the documented maximum) x 32 workers: about 1.5 TB for inputs, results and
  // reference sums. Before, the parser took it and the run was killed for memory.
  const std::string m = refusal([] { parse_scenario_yaml(sized_scenario(32, "1073741824", "")); });
  EXPECT_EQ(m.rfind("jobs[0].elements: the scenario needs at least ", 0), 0u) << m;
  EXPECT_NE(m.find(" bytes of memory"), std::string::npos) << m;
  EXPECT_NE(m.find("bytes this machine has"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(ScenarioLimits, AnAggregatorTableBeyondTheMachinesMemoryIsRefusedByTheParser) {
  // 2^24 aggregators x 4096 values x 4 B: 256 GiB. Before: "internal error: std::bad_alloc".
  const std::string m =
      refusal([] { parse_scenario_yaml(sized_scenario(2, "10", ", aggregators: 16777216, width: 4096")); });
  EXPECT_EQ(m.rfind("topology.switches[0].aggregators: the scenario needs at least ", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  // A plain switch allocates no table: the same numbers on atp: false are fine.
  EXPECT_NO_THROW(parse_scenario_yaml(sized_scenario(2, "10", ", atp: false, aggregators: 16777216, width: 4096")));
}

TEST(ScenarioLimits, TheNeedIsCheckedAgainstTheGivenMemoryAndNamesTheLargestPart) {
  // The documented maximum on two workers: about 95 GB, more than a 64 GiB machine has.
  const Scenario s = parse_scenario_yaml(sized_scenario(2, "1000", ""));
  Scenario big = s;
  big.jobs[0].elements = std::uint64_t{1} << 30;
  const std::uint64_t need = scenario_memory_bytes(big);
  EXPECT_GT(need, 2 * 44 * (std::uint64_t{1} << 30));  // 44 B per value per worker, and more
  Scenario no_jobs = big;
  no_jobs.jobs.clear();
  const std::uint64_t tables = scenario_memory_bytes(no_jobs);  // the ToR's table alone
  EXPECT_GT(tables, 4096u * 1024u * 4u);
  const std::uint64_t machine = std::uint64_t{64} << 30;
  const std::string m = refusal([&] { check_scenario_memory(big, machine); });
  EXPECT_EQ(m, "jobs[0].elements: the scenario needs at least " + std::to_string(need) +
                   " bytes of memory (inputs, results and reference sums of every worker, and every ATP switch's "
                   "aggregator table; " +
                   std::to_string(need - tables) + " of them here), more than the " + std::to_string(machine) +
                   " bytes this machine has")
      << m;
  EXPECT_NO_THROW(check_scenario_memory(big, need));  // exactly enough is enough
  EXPECT_NO_THROW(check_scenario_memory(big, 0));     // unknown memory: no check
  EXPECT_GT(physical_memory_bytes(), 0u);
}

TEST(ScenarioLimits, RunInprocRefusesAScenarioBuiltInCodeBeforeAllocating) {
  Scenario s = parse_scenario_yaml(kValid);
  s.topology.switches[0].config.num_aggregators = 1u << 24;
  s.topology.switches[0].config.aggregator_width = 4096;
  const std::string m = refusal([&] { run_inproc(s); });
  EXPECT_EQ(m.rfind("topology.switches[0].aggregators: the scenario needs at least ", 0), 0u) << m;
}

TEST(ScenarioLimits, ADeviceIsNotReadAsAScenario) {
  // Before, /dev/zero was read until memory ran out.
  EXPECT_EQ(refusal([] { load_scenario_file("/dev/zero"); }),
            "/dev/zero: not a regular file (a config must be a file, not a device, pipe or directory)");
  const std::string dir = source_dir().string();
  EXPECT_EQ(refusal([&] { load_scenario_file(dir); }),
            dir + ": not a regular file (a config must be a file, not a device, pipe or directory)");
  // A FIFO with no writer: refused at once, not waited on.
  const std::string fifo =
      (std::filesystem::temp_directory_path() / ("atp-scenario-fifo-" + std::to_string(::getpid()))).string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string m = refusal([&] { load_scenario_file(fifo); });
  std::filesystem::remove(fifo);
  EXPECT_EQ(m, fifo + ": not a regular file (a config must be a file, not a device, pipe or directory)");
}

// The background flow's receiver reports its first byte's time on the clock the run reads
// (CLOCK_MONOTONIC, EventLoop::now), the origin of its samples: run_processes turns it into
// flows[].start_seconds, which is what the samples are read against.
TEST(TcpFlowReceiver, ReportsItsBytesAndTheFirstBytesTime) {
  // A free loopback port: bound to 0, read back, closed.
  std::uint16_t port = 0;
  {
    const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in any = to_sockaddr(SocketAddress::loopback(0));
    ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
    socklen_t len = sizeof any;
    ::getsockname(probe, reinterpret_cast<sockaddr*>(&any), &len);
    port = ntohs(any.sin_port);
    ::close(probe);
  }
  std::ostringstream out;
  std::streambuf* const saved = std::cout.rdbuf(out.rdbuf());
  int rc = -1;
  std::thread receiver(
      [&] { rc = tcp_flow::run_receiver(SocketAddress::loopback(port), std::chrono::milliseconds(100)); });
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in to = to_sockaddr(SocketAddress::loopback(port));
  for (int tries = 0; ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && tries < 200; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // until the receiver listens
  }
  const Time before = EventLoop::now();
  const std::vector<char> bytes(1 << 20, 'x');
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    sent += static_cast<std::size_t>(n);
  }
  ::close(fd);
  receiver.join();
  const Time after = EventLoop::now();
  std::cout.rdbuf(saved);
  ASSERT_EQ(rc, 0) << out.str();

  tcp_flow::FlowReport report;
  std::istringstream lines(out.str());
  bool got = false;
  for (std::string line; std::getline(lines, line);) got = got || tcp_flow::parse_report(line, report);
  ASSERT_TRUE(got) << out.str();
  EXPECT_EQ(report.bytes, bytes.size());
  EXPECT_GE(report.first_ns, to_ns(before));
  EXPECT_LE(report.first_ns, to_ns(after));
  EXPECT_DOUBLE_EQ(report.interval_s, 0.1);
  EXPECT_FALSE(report.mbps.empty());
  EXPECT_FALSE(
      tcp_flow::parse_report(R"({"event": "flow", "bytes": 1, "seconds": 1, "interval_s": 0.1, "mbps": []})", report))
      << "a report without its origin is refused";
}

TEST(ScenarioLimits, AWorkerSpecThatIsADeviceIsRefused) {
  // `atp worker --spec /dev/zero`: exit 2 at once instead of reading until memory runs out.
  EXPECT_EQ(run_worker_process("/dev/zero"), 2);
  EXPECT_EQ(run_worker_process("/nonexistent/spec.json"), 2);
}

}  // namespace
}  // namespace atp

namespace atp {
namespace {

// Regression (found by the sweep): float_fragments counted a round as soon as its first worker
// completed it, so a job whose other worker crashed before completing that round reported more
// float fragments than fragments (which counts only rounds every worker completed). Every value
// overflows int32 here, so every fragment takes the float path; w1, one hop further from the PS
// than w0, crashes at times around the end of the round, some of them after w0 got its last
// result and before w1 did.
TEST(ScenarioRun, FloatFragmentsCountOnlyRoundsEveryWorkerCompleted) {
  const Scenario base = parse_scenario_yaml(R"(
link: {delay_us: 2}
topology:
  switches: [{name: tor0}, {name: tor1}]
  hosts: [{name: w0, switch: tor0}, {name: p, switch: tor0}, {name: w1, switch: tor1}]
  links: [[tor0, tor1]]
jobs:
  - {name: a, workers: [w0, w1], ps: [p], elements: 248, magnitude: 100, progress_timeout_us: 1000}
)");
  const JobResult clean = run_inproc(base).jobs.at(0);
  ASSERT_TRUE(clean.correct) << clean.error;
  ASSERT_EQ(clean.float_fragments, clean.fragments);
  const auto end = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(clean.round_end_seconds.at(0)));
  int failed = 0;
  for (Duration back{0}; back <= std::chrono::microseconds(8); back += std::chrono::nanoseconds(250)) {
    Scenario s = base;
    s.crashes.push_back(CrashFault{"w1", std::nullopt, end - back});
    const JobResult j = run_inproc(s).jobs.at(0);
    SCOPED_TRACE("w1 crashes at " + std::to_string((end - back).count()) + " ns: " + j.error);
    EXPECT_LE(j.float_fragments, j.fragments);
    if (!j.correct) {
      ++failed;
      EXPECT_EQ(j.completed_rounds, 0u);
      EXPECT_EQ(j.float_fragments, 0u);
    }
  }
  EXPECT_GT(failed, 0);  // the scan reached crashes before w1's end
}

}  // namespace
}  // namespace atp
