// Tests of the backend registry (include/atp/backends/backend.h): which backends this build
// has, and that each refuses what it cannot run with one sentence naming the key, before
// anything starts, both from cannot_run() and from run().
#include "atp/backends/backend.h"

#include <gtest/gtest.h>

#include <string>

#include "atp/scenario/scenario.h"

namespace atp {
namespace {

// Two workers and a PS under one switch, and a spare host; `jobs` and `extra` are appended.
Scenario scenario(const std::string& jobs, const std::string& extra = "") {
  return parse_scenario_yaml(R"(
topology:
  switches: [{name: s}]
  hosts: [{name: a, switch: s}, {name: b, switch: s}, {name: p, switch: s}, {name: q, switch: s}]
jobs:
)" + jobs + "\n" + extra);
}

const Backend& backend(const std::string& name) {
  const Backend* b = find_backend(name);
  EXPECT_NE(b, nullptr) << name;
  return *b;
}

// cannot_run's sentence, which run() throws too.
std::string refusal(const std::string& name, const Scenario& s, const RunOptions& options = {}) {
  const std::string why = backend(name).cannot_run(s, options);
  if (!why.empty()) {
    try {
      backend(name).run(s, options);
      ADD_FAILURE() << name << " ran what it said it cannot run: " << why;
    } catch (const ScenarioError& e) {
      EXPECT_EQ(e.what(), why);
    }
  }
  return why;
}

const std::string kAtp = "  - {workers: [a, b], ps: [p], elements: 1000}";
const std::string kRing = "  - {algorithm: ring, workers: [a, b], elements: 1000}";
const std::string kGloo = "  - {algorithm: gloo, workers: [a, b], elements: 1000}";
const std::string kFlow = "background: [{from: p, to: q}]";

TEST(Backends, TheRegistryListsEveryBackendOfThisBuildInOrder) {
  std::string names;
  for (const Backend* b : backends()) names += std::string(b->name()) + (b->simulated() ? "(sim) " : " ");
#if ATP_WITH_NS3
  EXPECT_EQ(names, "inproc(sim) ns3(sim) loopback netns ");
  EXPECT_EQ(backend_names(), "inproc, ns3, loopback or netns");
#else
  EXPECT_EQ(names, "inproc(sim) loopback netns ");
  EXPECT_EQ(backend_names(), "inproc, loopback or netns");
#endif
  EXPECT_EQ(find_backend("ns2"), nullptr);
  EXPECT_EQ(find_backend("udp"), find_backend("loopback"));  // its name before
  EXPECT_EQ(no_backend_reason("ns2"), "unknown backend 'ns2'; use --backend " + backend_names());
#if !ATP_WITH_NS3
  EXPECT_EQ(no_backend_reason("ns3").rfind("this atp was built without ns-3", 0), 0u);
#endif
  for (const Backend* b : backends()) EXPECT_FALSE(b->summary().empty()) << b->name();
}

TEST(Backends, EveryBackendTakesAPlainAtpJob) {
  for (const Backend* b : backends()) {
    if (b->name() == "netns" && !b->cannot_run(scenario(kAtp), {}).empty()) continue;  // not root here
    EXPECT_EQ(b->cannot_run(scenario(kAtp), {}), "") << b->name();
  }
}

TEST(Backends, InprocRefusesTcpJobsAndFlows) {
  EXPECT_EQ(refusal("inproc", scenario(kRing)),
            "jobs[0].algorithm: ring runs over TCP, which the in-process network does not carry; use --backend "
            "ns3, loopback or netns");
  EXPECT_EQ(refusal("inproc", scenario(kAtp, kFlow)),
            "background: background TCP flows need a TCP stack; use --backend ns3 or netns");
}

#if ATP_WITH_NS3
TEST(Backends, Ns3RefusesGlooAndDelaysThatChange) {
  EXPECT_EQ(refusal("ns3", scenario(kRing)), "");
  EXPECT_NE(refusal("ns3", scenario(kGloo)).find("jobs[0].algorithm: gloo is Gloo's code on real sockets"),
            std::string::npos);
  const std::string late_delay = "faults: [{link: [a, s], delay_us: 50, from_us: 100}]";
  EXPECT_NE(refusal("ns3", scenario(kAtp, late_delay)).find("faults[0]: on ns3 a link has one delay"),
            std::string::npos);
}
#endif

TEST(Backends, SimulatedBackendsRefusePsShardsOnWorkersHosts) {
  const Scenario s = scenario("  - {algorithm: ps, workers: [a, b], ps: [a, b], elements: 1000}");
  for (const Backend* b : backends()) {
    if (!b->simulated()) continue;
    const std::string name(b->name());
    EXPECT_NE(refusal(name, s).find("jobs[0].ps: host 'a' is also a worker"), std::string::npos) << name;
  }
  EXPECT_NE(refusal("loopback", s).find("host 'a' is both a worker of job 'job1' and a PS"), std::string::npos);
}

#if !ATP_WITH_GLOO
TEST(Backends, ABuildWithoutGlooRefusesGlooJobs) {
  for (const char* name : {"loopback", "netns"}) {
    EXPECT_NE(refusal(name, scenario(kGloo)).find("jobs[0].algorithm: gloo: this atp was built without Gloo"),
              std::string::npos)
        << name;
  }
}
#endif

TEST(Backends, ProcessBackendsRefuseSeriesAndLoopbackRefusesFlows) {
  RunOptions series;
  series.series_interval = std::chrono::milliseconds(1);
  EXPECT_EQ(refusal("loopback", scenario(kAtp), series),
            "series: real processes record no series; use a simulated backend (inproc or ns3)");
  EXPECT_EQ(refusal("loopback", scenario(kAtp, kFlow)),
            "background: background flows need real links; use --backend netns");
  EXPECT_EQ(refusal("loopback", scenario(kAtp + "\n  - {workers: [a, q], ps: [p], elements: 1000}")),
            "jobs[1]: host 'a' is a worker of job 'job1' and of job 'job2'; a host runs one worker (use separate "
            "hosts)");
}

}  // namespace
}  // namespace atp
