// Property tests over seeds x workers (1..64) x racks (1..4) x jobs (1..8) x loss (0..5%, with
// duplication and reordering) x aggregator tables (down to one): results exact, rounds done, no leaks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "atp/backends/simulated.h"
#include "atp/plan/plan.h"
#include "atp/scenario/scenario.h"
#include "atp/scenario/topologies.h"

namespace atp {
namespace {

struct Case {
  std::uint64_t seed;
  std::uint32_t workers;  // per job
  std::uint32_t racks;    // worker racks; every rack's ToR is ATP-capable
  std::uint32_t jobs;
  double loss;                // on every link, both directions
  std::uint32_t aggregators;  // per switch
  bool atp_core;              // the core switch is ATP-capable too (it adds up the racks' sums)
};

std::string name_of(const Case& c) {
  return "seed" + std::to_string(c.seed) + "_w" + std::to_string(c.workers) + "_r" + std::to_string(c.racks) + "_j" +
         std::to_string(c.jobs) + "_loss" + std::to_string(static_cast<int>(c.loss * 1000)) + "permille_agg" +
         std::to_string(c.aggregators) + (c.atp_core ? "_atpcore" : "");
}

// Racks tor0..tor{R-1} under one core switch. Job j's workers are spread round-robin over the
// racks; its PS sits in rack j % R where the bitmaps allow, and jobs share every switch's table.
Scenario make_scenario(const Case& c) {
  Scenario s;
  s.seed = c.seed;
  SwitchConfig tor;
  tor.num_aggregators = c.aggregators;
  tor.aggregator_width = 64;
  tor.reclaim_timeout = std::chrono::milliseconds(20);
  for (std::uint32_t r = 0; r < c.racks; ++r) s.topology.switches.push_back({"tor" + std::to_string(r), tor});
  SwitchConfig core = tor;
  core.atp_capable = c.atp_core;
  s.topology.switches.push_back({"core", core});
  for (std::uint32_t r = 0; r < c.racks; ++r) s.topology.switch_links.push_back({"tor" + std::to_string(r), "core"});

  for (std::uint32_t j = 0; j < c.jobs; ++j) {
    ScenarioJob job;
    job.spec.name = "job" + std::to_string(j);
    job.spec.id = static_cast<JobId>(j + 1);
    job.spec.values_per_packet = 31 + j % 3 * 16;  // different fragment sizes side by side
    for (std::uint32_t w = 0; w < c.workers; ++w) {
      const std::string host = "j" + std::to_string(j) + "w" + std::to_string(w);
      s.topology.hosts.push_back({host, "tor" + std::to_string(w % c.racks)});
      job.spec.workers.push_back(host);
    }
    // In the PS's rack, workers are children of its ToR, next to the other racks' ToRs (or the
    // core, where it aggregates); a 32-bit bitmap caps that at 32 (plan_job rejects more). Larger
    // jobs put their PS behind the core switch instead.
    const std::uint32_t rack = j % c.racks;
    const std::uint32_t in_rack = (c.workers + c.racks - 1 - rack) / c.racks;
    const bool fits = c.racks == 1 || in_rack + (c.racks - 1) <= 32;
    const std::string ps = "j" + std::to_string(j) + "ps";
    s.topology.hosts.push_back({ps, fits ? "tor" + std::to_string(rack) : std::string("core")});
    job.spec.ps.push_back(ps);
    job.elements = 40 * job.spec.values_per_packet - 5;  // a zero-padded last fragment
    job.rounds = 2;
    job.magnitude = 1.0;
    job.spec.progress_timeout = std::chrono::seconds(5);
    job.spec.sharing_jobs = c.jobs;  // as a scenario's dynamic sharing: each at its part of the table
    job.spec.sharing_index = j;
    s.jobs.push_back(job);
  }
  if (c.loss > 0) {
    for (const HostSpec& h : s.topology.hosts) {
      LinkFault f;
      f.a = h.name;
      f.b = h.switch_name;
      f.overrides.loss = c.loss;
      f.overrides.duplicate = c.loss / 2;
      f.overrides.reorder = c.loss;
      s.link_faults.push_back(f);
    }
    for (const SwitchLink& l : s.topology.switch_links) {
      LinkFault f;
      f.a = l.a;
      f.b = l.b;
      f.overrides.loss = c.loss;
      f.overrides.duplicate = c.loss / 2;
      f.overrides.reorder = c.loss;
      s.link_faults.push_back(f);
    }
  }
  return s;
}

std::vector<Case> cases() {
  // The corners first, then a seeded sample of the whole space.
  std::vector<Case> all = {
      {1, 1, 1, 1, 0.0, 4096, false},  {2, 64, 4, 1, 0.0, 4096, false}, {3, 64, 2, 1, 0.05, 4096, true},
      {4, 32, 1, 8, 0.0, 4096, false}, {5, 8, 4, 8, 0.05, 1, false},    {6, 16, 2, 4, 0.02, 2, true},
      {7, 3, 3, 8, 0.01, 8, false},    {8, 64, 4, 2, 0.01, 16, false},  {9, 1, 4, 8, 0.05, 4096, true},
      {10, 5, 1, 1, 0.05, 1, false},
  };
  std::mt19937_64 rng(2021);
  const std::uint32_t tables[] = {1, 3, 16, 64, 4096};
  const double losses[] = {0.0, 0.001, 0.01, 0.03, 0.05};
  while (all.size() < 250) {
    Case c;
    c.seed = 100 + all.size();
    c.racks = 1 + static_cast<std::uint32_t>(rng() % 4);
    c.workers = 1 + static_cast<std::uint32_t>(rng() % std::min<std::uint32_t>(64, 32 * c.racks));
    c.jobs = 1 + static_cast<std::uint32_t>(rng() % 8);
    if (c.workers * c.jobs > 160) c.jobs = std::max<std::uint32_t>(1, 160 / c.workers);  // keep each case fast
    c.loss = losses[rng() % 5];
    c.aggregators = tables[rng() % 5];
    c.atp_core = rng() % 2 == 0;
    all.push_back(c);
  }
  return all;
}

class PropertyTest : public ::testing::TestWithParam<Case> {};

TEST_P(PropertyTest, ResultsExactAllRoundsDoneNoLeaks) {
  const Case& c = GetParam();
  const ScenarioResult result = run_inproc(make_scenario(c));
  ASSERT_EQ(result.jobs.size(), c.jobs);
  EXPECT_FALSE(result.time_limit_reached);
  for (const JobResult& job : result.jobs) {
    EXPECT_TRUE(job.correct) << job.name << ": " << job.error;
    EXPECT_EQ(job.completed_rounds, 2u) << job.name;
  }
  EXPECT_EQ(result.leaked_aggregators, 0u);
}

INSTANTIATE_TEST_SUITE_P(SeedsWorkersRacksJobsLossTables, PropertyTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) { return name_of(param_info.param); });

// Loss must really have been exercised: the same case without and with loss differ in
// retransmissions, and both are exact.
TEST(PropertySanity, LossCausesRetransmissionsAndStaysExact) {
  Case c{42, 12, 3, 2, 0.0, 4096, false};
  const ScenarioResult clean = run_inproc(make_scenario(c));
  c.loss = 0.05;
  const ScenarioResult lossy = run_inproc(make_scenario(c));
  std::uint64_t clean_resends = 0, lossy_resends = 0;
  for (const auto& j : clean.jobs) {
    EXPECT_TRUE(j.correct) << j.error;
    clean_resends += j.retransmissions;
  }
  for (const auto& j : lossy.jobs) {
    EXPECT_TRUE(j.correct) << j.error;
    lossy_resends += j.retransmissions;
  }
  EXPECT_EQ(clean_resends, 0u);
  EXPECT_GT(lossy_resends, 10u);
}

// A table of one aggregator shared by many jobs forces collisions and PS fallback.
TEST(PropertySanity, TinyTableForcesCollisionsAndStaysExact) {
  const ScenarioResult r = run_inproc(make_scenario({7, 8, 2, 4, 0.0, 1, false}));
  std::uint64_t collisions = 0;
  for (const auto& j : r.jobs) {
    EXPECT_TRUE(j.correct) << j.error;
    collisions += j.collisions;
  }
  EXPECT_GT(collisions, 0u);
  EXPECT_EQ(r.leaked_aggregators, 0u);
}

// Every INA switch of a k=4 fat-tree adds up what meets there (docs/protocol.md "Aggregation
// tree"): edge, aggregation and core switches, five levels on the longest paths. Exact across
// seeds, with loss, duplication and reordering on every link, and with a table small enough for
// fragments to collide.
TEST(EveryLevel, AFatTreeOfInaSwitchesAggregatesExactlyUnderLoss) {
  Scenario base;
  base.topology = fat_tree(4, std::nullopt, GeneratedSwitches{InaSwitches::kAll, 4096});
  ScenarioJob job;
  job.spec.name = "all";
  job.spec.id = 1;
  for (std::size_t h = 0; h + 1 < base.topology.hosts.size(); ++h)
    job.spec.workers.push_back(base.topology.hosts[h].name);
  job.spec.ps.push_back(base.topology.hosts.back().name);
  job.spec.values_per_packet = 32;
  job.spec.index_policy = IndexPolicy::kLinear;  // fragments in flight meet in a row only when they outnumber the table
  job.spec.progress_timeout = std::chrono::seconds(5);
  job.elements = 60 * 32 - 7;
  job.rounds = 3;
  base.jobs.push_back(job);

  // The tree: the PS's edge switch adds its rack-mate's value and its aggregation switches' sums,
  // which add up their cores', which add up the other pods' aggregation switches'.
  const NetworkPlan network = plan_network(base.topology);
  const JobPlan plan = plan_job(network, job.spec);
  std::size_t depth = 0;
  for (std::uint16_t node = plan.workers[0].ps[0].node; node != 0; node = plan.ps[0].tree[node]) ++depth;
  EXPECT_GE(depth, 5u) << "worker 0's path to the PS: its edge, aggregation and core switches, and the PS's pod's";
  EXPECT_FALSE(plan.switches.at("core0").entry.roles.empty());

  for (const auto& [loss, table] :
       {std::pair{0.0, 4096u}, std::pair{0.0, 64u}, std::pair{0.02, 4096u}, std::pair{0.02, 64u}}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      Scenario s = base;
      s.seed = seed;
      for (SwitchSpec& sw : s.topology.switches) sw.config.num_aggregators = table;
      if (loss > 0) {
        auto faulty = [&](const std::string& a, const std::string& b) {
          LinkFault f;
          f.a = a;
          f.b = b;
          f.overrides.loss = loss;
          f.overrides.duplicate = loss / 2;
          f.overrides.reorder = loss;
          s.link_faults.push_back(f);
        };
        for (const HostSpec& h : s.topology.hosts) faulty(h.name, h.switch_name);
        for (const SwitchLink& l : s.topology.switch_links) faulty(l.a, l.b);
      }
      const ScenarioResult r = run_inproc(s);
      const JobResult& j = r.jobs.at(0);
      EXPECT_TRUE(j.correct) << "seed " << seed << ", loss " << loss << ", table " << table << ": " << j.error;
      EXPECT_EQ(j.completed_rounds, 3u);
      EXPECT_EQ(r.leaked_aggregators, 0u);
      if (loss == 0 && table == 4096) {
        EXPECT_EQ(j.in_network_share, 1.0) << "seed " << seed;  // the PS got one packet per fragment
      }
    }
  }
}

}  // namespace
}  // namespace atp
