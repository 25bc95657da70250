// PLink's Autotune as the process runner runs it for a job (tuning.h): the "go" lines after each
// round, from the round's time and what the workers' connections measured.
#include "../../src/backends/processes/tuning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../src/backends/processes/worker_process.h"

namespace atp::processes {
namespace {

using Sample = TcpScheduleAllreduce::LinkSample;
using Links = std::vector<std::vector<Sample>>;

constexpr int kWorkers = 4;

ScenarioJob job() {
  ScenarioJob j = scenario_job(*find_algorithm("plink"), 0, "tuned");
  for (int w = 0; w < kWorkers; ++w) j.spec.workers.push_back("w" + std::to_string(w));
  j.elements = 1 << 20;
  return j;
}

// Every worker's connections to every other, `slow` (-1: none) at a tenth of the others' rate.
Links measured(int slow) {
  Links links(kWorkers);
  for (int i = 0; i < kWorkers; ++i) {
    for (int peer = 0; peer < kWorkers; ++peer) {
      if (peer == i) continue;
      const double seconds = i == slow || peer == slow ? 1.0 : 0.1;
      links[static_cast<std::size_t>(i)].push_back(Sample{peer, 0, 1'000'000, seconds, 1e-4});
    }
  }
  return links;
}

TEST(JobTuning, KeepsThePlanWhileTheRoundsTakeTheSameTime) {
  JobTuning tuning(job(), {{0, 1}, {2, 3}});
  for (int round = 0; round < 5; ++round) EXPECT_EQ(tuning.after_round(1.0, measured(-1)), "go\n") << round;
  EXPECT_EQ(tuning.replans(), 0u);
}

TEST(JobTuning, MovesMastersAwayFromASlowWorkerWhenTheRoundsSlowDown) {
  JobTuning tuning(job(), {{0, 1}, {2, 3}});
  EXPECT_EQ(tuning.after_round(1.0, measured(-1)), "go\n");
  EXPECT_EQ(tuning.after_round(1.0, measured(-1)), "go\n");
  const std::string line = tuning.after_round(3.0, measured(3));
  ASSERT_TRUE(line.starts_with("go ") && line.ends_with("\n")) << line;
  EXPECT_EQ(tuning.replans(), 1u);
  const plink::MasterShares shares = worker_process::shares_from_json(line.substr(3, line.size() - 4));
  // Weights: the slow worker's part of the global masters is below an equal quarter.
  double all = 0;
  for (const double w : shares.gm) all += w;
  EXPECT_LT(shares.gm[3] / all, 0.25) << line;
}

TEST(JobTuning, IgnoresSamplesOfPeersOutsideTheJob) {
  JobTuning tuning(job(), {{0, 1}, {2, 3}});
  Links links = measured(-1);
  links[0].push_back(Sample{kWorkers, 0, 1'000'000, 0.01, 1e-4});
  links[1].push_back(Sample{-1, 0, 1'000'000, 0.01, 1e-4});
  EXPECT_EQ(tuning.after_round(1.0, links), "go\n");
  EXPECT_EQ(tuning.after_round(1.0, links), "go\n");
}

}  // namespace
}  // namespace atp::processes
