// Tests of a rank's side of PLink's probes (atp/plink/probe_exchange.h): each rank runs the calls
// of every round in order, and all ranks' times of a network of racks give the racks as groups.
#include "atp/plink/probe_exchange.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "atp/plink/aggregation.h"
#include "atp/plink/probing.h"

namespace atp::plink {
namespace {

// Every round's calls, in order, each once, and the times as the runner returned them.
TEST(ProbeExchange, TimesEveryCallOfEveryRoundInOrder) {
  const int n = 4, rank = 2;
  const std::size_t count = 16;
  std::vector<Schedule> ran;
  const auto seconds = time_probe_calls(rank, n, count, [&](const Schedule& call) {
    ran.push_back(call);
    return static_cast<double>(ran.size());
  });
  ASSERT_EQ(seconds.size(), probe_rounds(n));
  std::size_t at = 0;
  for (std::uint32_t round = 0; round < probe_rounds(n); ++round) {
    const std::vector<Schedule> calls = probe_calls(rank, n, count, round);
    ASSERT_EQ(seconds[round].size(), calls.size());
    for (std::size_t c = 0; c < calls.size(); ++c, ++at) {
      EXPECT_EQ(seconds[round][c], static_cast<double>(at + 1));
      EXPECT_EQ(ran[at].steps.size(), calls[c].steps.size());
    }
  }
  EXPECT_EQ(at, ran.size());
}

// The time of one call of `rank` on a network of racks: a round trip of 10 us inside a rack and
// 1 ms across; a transfer at 1 GB/s inside and 100 MB/s across; the unmeasured meeting call 1 s.
double modelled_time(int rank, const std::vector<int>& rack, std::size_t count, const Schedule& call) {
  if (call.steps.empty() || call.steps[0].kind != StepKind::kSend) return 1;
  const int peer = call.steps[0].peer;
  const bool near = rack[static_cast<std::size_t>(rank)] == rack[static_cast<std::size_t>(peer)];
  if (call.steps[0].range.size() == 1) return near ? 1e-5 : 1e-3;
  return static_cast<double>(count) * 4 / (near ? 1e9 : 1e8);
}

// Nine ranks in three racks of three, interleaved: every rank computes the racks as the groups.
TEST(ProbeExchange, TimesOfRacksGiveTheRacksAsGroups) {
  const int n = 9;
  const std::size_t count = kProbeTransferElements;
  const std::vector<int> rack = {0, 1, 2, 1, 0, 2, 1, 2, 0};
  std::vector<std::vector<std::vector<double>>> seconds;
  for (int r = 0; r < n; ++r) {
    seconds.push_back(
        time_probe_calls(r, n, count, [&](const Schedule& call) { return modelled_time(r, rack, count, call); }));
  }
  RankGroups groups = groups_from_probe_times(n, count, seconds);
  std::sort(groups.begin(), groups.end());
  const RankGroups racks = {{0, 4, 8}, {1, 3, 6}, {2, 5, 7}};
  EXPECT_EQ(groups, racks);

  seconds.pop_back();  // a rank's times missing
  EXPECT_THROW(groups_from_probe_times(n, count, seconds), std::invalid_argument);
}

// One rank probes nothing and is its own group.
TEST(ProbeExchange, OneRankIsOneGroup) {
  EXPECT_TRUE(time_probe_calls(0, 1, 8, [](const Schedule&) { return 1.0; }).empty());
  EXPECT_EQ(groups_from_probe_times(1, 8, {}), one_group(1));
}

}  // namespace
}  // namespace atp::plink
