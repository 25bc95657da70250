// Tests of the algorithm registry (include/atp/scenario/algorithm.h): every algorithm is listed
// once under its own name, the parser takes exactly those, and every backend refuses the ones it
// cannot run with the sentence the registry words from its AlgorithmSupport.
#include "atp/scenario/algorithm.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "atp/backends/backend.h"
#include "atp/plan/plan.h"
#include "atp/scenario/scenario.h"

namespace atp {
namespace {

// Two workers, a PS and a spare host under one switch, and one job of `algorithm`.
Scenario scenario_with(const Algorithm& algorithm) {
  return parse_scenario_yaml(std::string(R"(
topology:
  switches: [{name: s}]
  hosts: [{name: a, switch: s}, {name: b, switch: s}, {name: p, switch: s}]
jobs:
  - {algorithm: )") + std::string(algorithm.name) +
                             ", workers: [a, b], " + (algorithm.parameter_servers ? "ps: [p], " : "") +
                             "elements: 1000}\n");
}

TEST(Algorithms, EveryOneIsRegisteredOnceUnderItsOwnName) {
  std::set<std::string_view> names;
  for (const Algorithm& a : algorithms()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name << " is registered twice";
    EXPECT_EQ(find_algorithm(a.name), &a) << a.name;
    EXPECT_FALSE(a.summary.empty()) << a.name;
    // Only ATP's protocol and Rina aggregate in the switches, and only they are checked exactly.
    const bool integer_sums = a.runtime == AlgorithmRuntime::kProtocol;
    if (a.in_network_aggregation) {
      EXPECT_TRUE(integer_sums) << a.name;
    }
    EXPECT_EQ(a.check == ResultCheck::kExact, integer_sums) << a.name;
  }
  EXPECT_EQ(&default_algorithm(), &algorithms()[0]);
  EXPECT_EQ(default_algorithm().name, "atp");
  EXPECT_EQ(ScenarioJob().algorithm, &default_algorithm());
  EXPECT_EQ(find_algorithm("bcube"), nullptr);
  EXPECT_EQ(find_algorithm(""), nullptr);
  // Gloo's are known in every build, with or without Gloo.
  EXPECT_EQ(algorithm_names(),
            "atp, ps, ring, gloo, gloo_hd, halving_doubling, rina, hierarchical, plink, plink_fa or probe");
  // The probe measures, and only it: its calls are timed, its schedule names whom to connect to.
  for (const Algorithm& a : algorithms()) {
    EXPECT_EQ(a.timed_calls != nullptr, a.name == "probe") << a.name;
    EXPECT_EQ(a.schedule != nullptr, a.runtime == AlgorithmRuntime::kSchedule) << a.name;
  }
}

TEST(Algorithms, TheParserTakesEveryRegisteredNameAndReportsIt) {
  for (const Algorithm& a : algorithms()) {
    const Scenario s = scenario_with(a);
    EXPECT_EQ(s.jobs.at(0).algorithm, &a) << a.name;
    EXPECT_EQ(s.jobs[0].spec.in_network_aggregation, a.in_network_aggregation) << a.name;
    EXPECT_EQ(job_result_for(s.jobs[0]).algorithm, a.name);
  }
}

TEST(Algorithms, TheParserRejectsAnUnknownNameWithTheList) {
  try {
    parse_scenario_yaml(R"(
topology: {switches: [{name: s}], hosts: [{name: a, switch: s}]}
jobs: [{algorithm: bcube, workers: [a], elements: 10}]
)");
    ADD_FAILURE() << "an unknown algorithm was taken";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "jobs[0].algorithm: must be atp, ps, ring, gloo, gloo_hd, halving_doubling, rina, hierarchical, plink, "
              "plink_fa or probe, got 'bcube'");
  }
}

TEST(Algorithms, EveryBackendRunsAtpsProtocol) {
  for (const Backend* b : backends()) {
    for (const Algorithm& a : algorithms()) {
      if (a.parameter_servers) {
        EXPECT_EQ(cannot_run(a, b->algorithm_support()), "") << b->name() << " " << a.name;
      }
    }
  }
}

// A backend's cannot_run names the job's key and says the registry's sentence for what its
// AlgorithmSupport lacks; what it does offer gets no algorithm refusal.
TEST(Algorithms, EachBackendRefusesWhatItCannotRunWithTheRegistrysSentence) {
  for (const Backend* b : backends()) {
    for (const Algorithm& a : algorithms()) {
      const std::string why = cannot_run(a, b->algorithm_support());
      const std::string refusal = b->cannot_run(scenario_with(a), {});
      if (why.empty()) {
        EXPECT_EQ(refusal.find("jobs[0].algorithm"), std::string::npos)
            << b->name() << " " << a.name << ": " << refusal;
      } else {
        EXPECT_EQ(why.rfind(std::string(a.name), 0), 0u) << why;  // the sentence starts with the name
        EXPECT_EQ(refusal, "jobs[0].algorithm: " + why) << b->name();
      }
    }
  }
}

// PLink's Autotune runs on every backend that runs PLink (those with TCP); the in-process network
// refuses the job for its algorithm, before the key matters.
TEST(Algorithms, AutotuneRunsWhereverPlinkRuns) {
  Scenario s = scenario_with(*find_algorithm("plink"));
  s.jobs[0].autotune = true;
  for (const Backend* b : backends()) {
    const std::string refusal = b->cannot_run(s, {});
    EXPECT_EQ(refusal.find("autotune"), std::string::npos) << b->name() << ": " << refusal;
    EXPECT_EQ(refusal.empty(), b->algorithm_support().tcp) << b->name() << ": " << refusal;
  }
}

TEST(Algorithms, TheRefusalsSayWhatIsMissingAndWhatToUse) {
  const AlgorithmSupport inproc{.where = "the in-process network"};
  const AlgorithmSupport ns3{.where = "ns3", .tcp = true};
  const AlgorithmSupport without_gloo{.where = "netns", .tcp = true, .real_sockets = true, .gloo_built = false};
  const AlgorithmSupport with_gloo{.where = "netns", .tcp = true, .real_sockets = true, .gloo_built = true};
  const Algorithm& ring = *find_algorithm("ring");
  const Algorithm& gloo = *find_algorithm("gloo");
  const Algorithm& gloo_hd = *find_algorithm("gloo_hd");
  EXPECT_EQ(cannot_run(ring, inproc),
            "ring runs over TCP, which the in-process network does not carry; use --backend ns3, loopback or netns");
  EXPECT_EQ(cannot_run(ring, ns3), "");
  EXPECT_EQ(cannot_run(gloo, inproc),
            "gloo is Gloo's code on real sockets, which the in-process network does not have; use algorithm ring (the "
            "same algorithm), or --backend loopback or netns");
  EXPECT_EQ(cannot_run(gloo_hd, ns3),
            "gloo_hd is Gloo's code on real sockets, which ns3 does not have; use algorithm ring, or --backend "
            "loopback or netns");
  EXPECT_EQ(cannot_run(gloo, without_gloo),
            "gloo: this atp was built without Gloo (configured with -DATP_WITH_GLOO=OFF); use algorithm ring (the "
            "same algorithm)");
  const Algorithm& hd = *find_algorithm("halving_doubling");
  EXPECT_EQ(cannot_run(hd, inproc),
            "halving_doubling runs over TCP, which the in-process network does not carry; use --backend ns3, loopback "
            "or netns");
  EXPECT_EQ(cannot_run(hd, ns3), "");
  EXPECT_EQ(cannot_run(hd, without_gloo), "");
  // ATP's and Rina's endpoints run on every backend.
  const Algorithm& rina = *find_algorithm("rina");
  EXPECT_EQ(cannot_run(rina, inproc), "");
  EXPECT_EQ(cannot_run(rina, ns3), "");
  for (const Algorithm& a : algorithms()) {
    EXPECT_EQ(cannot_run(a, with_gloo), "") << a.name;
  }
}

// Host collectives built as schedules name their builder: the registry is the one place that
// says which schedule an algorithm runs.
TEST(Algorithms, ScheduleAlgorithmsNameTheirBuilder) {
  for (const Algorithm& a : algorithms()) {
    const bool built = a.runtime == AlgorithmRuntime::kSchedule;
    EXPECT_EQ(a.schedule != nullptr, built) << a.name;
    if (!built) continue;
    for (int size : {1, 3, 4}) {
      RankGroups racks(1);  // one rack, then two: {0, 2, ..}, {1, 3, ..}
      for (int r = 0; r < size; ++r) racks[0].push_back(r);
      for (int rank = 0; rank < size; ++rank)
        EXPECT_NO_THROW(validate_schedule(a.schedule(rank, size, 10, racks, 1))) << a.name;
      if (size < 2) continue;
      racks = RankGroups(2);
      for (int r = 0; r < size; ++r) racks[static_cast<std::size_t>(r % 2)].push_back(r);
      for (int rank = 0; rank < size; ++rank)
        EXPECT_NO_THROW(validate_schedule(a.schedule(rank, size, 10, racks, 2))) << a.name;
    }
  }
}

// A job's racks come from its workers' switches, in rank order, racks in the order of their first rank.
TEST(Algorithms, JobRacksGroupWorkersBySwitch) {
  Topology t;
  t.switches = {{"tor0", {}}, {"tor1", {}}, {"tor2", {}}};
  t.hosts = {{"a", "tor1"}, {"b", "tor0"}, {"c", "tor1"}, {"d", "tor2"}, {"e", "tor0"}};
  EXPECT_EQ(job_racks(t, {"a", "b", "c", "d", "e"}), (RankGroups{{0, 2}, {1, 4}, {3}}));
  EXPECT_EQ(job_racks(t, {"e", "d"}), (RankGroups{{0}, {1}}));
  try {
    job_racks(t, {"a", "z"});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "worker 1 (z) is no host of the topology");
  }
}

}  // namespace
}  // namespace atp
