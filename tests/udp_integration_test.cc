// Integration tests of the real runtime: scenarios run as real processes on loopback (`atp
// switch`, `atp ps`, `atp worker` started by run_udp from the built `atp` binary). Each worker
// process checks its results exactly; these tests check what the issue asks of the runtime:
// contention, loss, a killed worker, a restarted switch and bad packets at a live switch.
// Ports are kernel-chosen, every process is reaped by run_udp, and nothing depends on timing
// luck: where an event must hit mid-job, the test checks from the rounds' progress that it did.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "atp/scenario.h"

namespace atp {
namespace {

// Ten hosts on one ATP switch: jobs a (a0..a3, ps_a) and b (b0..b3, ps_b), a spare host x.
constexpr const char* kOneSwitch = R"(
topology:
  switches: [{name: tor, atp: true, aggregators: %AGGREGATORS%}]
  hosts:
    - {name: a0, switch: tor}
    - {name: a1, switch: tor}
    - {name: a2, switch: tor}
    - {name: a3, switch: tor}
    - {name: b0, switch: tor}
    - {name: b1, switch: tor}
    - {name: b2, switch: tor}
    - {name: b3, switch: tor}
    - {name: ps_a, switch: tor}
    - {name: ps_b, switch: tor}
    - {name: x, switch: tor}
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

Scenario one_switch(std::uint32_t aggregators, const std::string& rest) {
  return parse_scenario_yaml(replace(kOneSwitch, "%AGGREGATORS%", std::to_string(aggregators)) + rest, "test");
}

struct Outcome {
  ScenarioResult result;
  std::vector<RoundDone> rounds;  // in the order they completed
};

Outcome run(const Scenario& s) {
  Outcome r;
  r.result = run_udp(s, ATP_BINARY, [&r](const RoundDone& d) { r.rounds.push_back(d); });
  return r;
}

std::string describe(const ScenarioResult& r) { return to_summary(r); }

void expect_all_correct(const ScenarioResult& r) {
  for (const JobResult& j : r.jobs) {
    EXPECT_TRUE(j.correct) << j.name << ": " << j.error << "\n" << describe(r);
    EXPECT_EQ(j.completed_rounds, j.rounds) << j.name;
  }
  EXPECT_EQ(r.leaked_aggregators, 0u) << describe(r);
  EXPECT_FALSE(r.time_limit_reached);
}

std::uint64_t total(const std::map<std::string, std::uint64_t>& m) {
  std::uint64_t sum = 0;
  for (const auto& [name, n] : m) sum += n;
  return sum;
}

TEST(UdpIntegration, OneJobAggregatesInTheSwitch) {
  const Outcome r = run(one_switch(4096, R"(
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: 200000, rounds: 3}
)"));
  expect_all_correct(r.result);
  const JobResult& a = r.result.jobs[0];
  EXPECT_GT(a.in_network_share, 0.5) << describe(r.result);
  EXPECT_GT(a.seconds, 0);
  EXPECT_GT(a.algbw_gbps, 0);
  EXPECT_EQ(r.rounds.size(), 4u * 3u);  // every worker reported every round
}

TEST(UdpIntegration, TwoJobsOnATableTooSmallForBoth) {
  // 32 aggregators against two windows of up to 200 fragments: most packets collide and reach
  // the PS unaggregated; both results stay exact.
  const Outcome r = run(one_switch(32, R"(
seed: 5
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: 100000, rounds: 2}
  - {name: b, workers: [b0, b1, b2, b3], ps: [ps_b], elements: 100000, rounds: 2}
)"));
  expect_all_correct(r.result);
  for (const JobResult& j : r.result.jobs) {
    EXPECT_GT(j.collisions, 0u) << j.name;
    EXPECT_GT(total(j.switch_aggregations), 0u) << j.name << ": the switch still aggregates some";
    EXPECT_GT(j.ps_packets_received, j.fragments) << j.name << ": collided packets reach the PS";
  }
}

TEST(UdpIntegration, OnePercentLossOnEveryLink) {
  const Outcome r = run(one_switch(4096, R"(
seed: 9
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: 100000, rounds: 2}
  - {name: b, workers: [b0, b1, b2, b3], ps: [ps_b], elements: 100000, rounds: 2}
faults:
  - {link: [a0, tor], loss: 0.01}
  - {link: [a1, tor], loss: 0.01}
  - {link: [a2, tor], loss: 0.01}
  - {link: [a3, tor], loss: 0.01}
  - {link: [b0, tor], loss: 0.01}
  - {link: [b1, tor], loss: 0.01}
  - {link: [b2, tor], loss: 0.01}
  - {link: [b3, tor], loss: 0.01}
  - {link: [ps_a, tor], loss: 0.01}
  - {link: [ps_b, tor], loss: 0.01}
)"));
  expect_all_correct(r.result);
  std::uint64_t lost = 0;
  for (const LinkResult& l : r.result.links) lost += l.lost;
  EXPECT_GT(lost, 0u) << "the switch ports dropped nothing: the fault was not applied";
  for (const JobResult& j : r.result.jobs) EXPECT_GT(j.retransmissions, 0u) << j.name;
}

TEST(UdpIntegration, KilledWorkerFailsItsJobOnlyAndItsAggregatorsAreReclaimed) {
  // Job a runs until a1 is killed (SIGKILL) 150 ms in; job b runs 4 rounds meanwhile.
  const Outcome r = run(one_switch(4096, R"(
seed: 11
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: 100000, rounds: 100000,
     progress_timeout_us: 500000}
  - {name: b, workers: [b0, b1, b2, b3], ps: [ps_b], elements: 100000, rounds: 4}
faults:
  - {crash: a1, at_us: 150000}
)"));
  const JobResult& a = r.result.jobs[0];
  const JobResult& b = r.result.jobs[1];
  EXPECT_TRUE(b.correct) << b.error << "\n" << describe(r.result);
  EXPECT_EQ(b.completed_rounds, 4u);
  EXPECT_FALSE(a.correct);
  EXPECT_NE(a.error.find("crashed"), std::string::npos) << a.error;
  EXPECT_LT(a.completed_rounds, a.rounds);
  // The survivors' fragments waited in aggregators for a1; only the reclaim timeout frees them.
  EXPECT_GT(a.reclaimed_aggregators, 0u) << describe(r.result);
  EXPECT_EQ(b.reclaimed_aggregators, 0u);
  EXPECT_EQ(r.result.leaked_aggregators, 0u);
}

TEST(UdpIntegration, SwitchRestartedMidJobJobsStillComplete) {
  // The switch process is killed 50 ms in and comes back empty 30 ms later; the control plane
  // installs the jobs again and the workers recover what was lost (PS fallback for fragments
  // whose aggregators vanished). Workers start together at 0, so the restart hits mid-job
  // whenever a round completes after it.
  const Outcome r = run(one_switch(4096, R"(
seed: 13
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: 50000, rounds: 20}
  - {name: b, workers: [b0, b1, b2, b3], ps: [ps_b], elements: 50000, rounds: 20}
faults:
  - {restart: tor, at_us: 50000, down_us: 30000}
)"));
  expect_all_correct(r.result);
  const auto after =
      std::count_if(r.rounds.begin(), r.rounds.end(), [](const RoundDone& d) { return d.seconds > 0.08; });
  EXPECT_GT(after, 0) << "every round completed before the restart: it did not hit mid-job";
  for (const JobResult& j : r.result.jobs) EXPECT_GT(j.timeouts, 0u) << j.name << ": the down time cost nothing?";
}

TEST(UdpIntegration, MalformedAndSpoofedPacketsAtALiveSwitchAreCountedAndHarmless) {
  // Host x sends 20k bad packets/s at the switch: garbage, spoofed gradients and parameter
  // packets of both jobs, packets of an unknown job, corrupted headers.
  const Outcome r = run(one_switch(4096, R"(
seed: 17
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: 100000, rounds: 5}
  - {name: b, workers: [b0, b1, b2, b3], ps: [ps_b], elements: 100000, rounds: 5}
faults:
  - {noise: x, rate_pps: 20000}
)"));
  expect_all_correct(r.result);
  EXPECT_GT(r.result.noise_packets, 100u) << describe(r.result);
  EXPECT_EQ(r.result.rejected_packets, r.result.noise_packets) << "every noise packet must be counted as rejected";
}

}  // namespace
}  // namespace atp
