// Tests of PLink's ProbeEmbed parts (include/atp/plink/): the embedding recovers known
// configurations from their exact distances, constrained k-means honours its sizes and finds
// separable groups, PAIA counts hand-counted triplets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "atp/plink/aggregation.h"
#include "atp/plink/autotune.h"
#include "atp/plink/embed.h"
#include "atp/plink/grouping.h"
#include "atp/plink/paia.h"
#include "atp/plink/positions.h"
#include "atp/plink/probing.h"
#include "atp/schedule/in_memory.h"

namespace atp::plink {
namespace {

// n random points in the plane, seeded.
Eigen::MatrixXd random_points(int n, std::uint64_t seed, int dimensions = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  Eigen::MatrixXd x(n, dimensions);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
  return x;
}

Eigen::MatrixXd distances_of(const Eigen::MatrixXd& x, double power = 1.0) {
  const Eigen::Index n = x.rows();
  Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) d(i, j) = std::pow((x.row(i) - x.row(j)).norm(), power);
  }
  return d;
}

double largest_relative_misfit(const Eigen::MatrixXd& fitted, const Eigen::MatrixXd& wanted) {
  double worst = 0.0;
  for (Eigen::Index i = 0; i < wanted.rows(); ++i) {
    for (Eigen::Index j = 0; j < i; ++j) worst = std::max(worst, std::abs(fitted(i, j) - wanted(i, j)) / wanted(i, j));
  }
  return worst;
}

// Equation (1) with exact distances of a planar configuration has a zero: the fit finds it (up to
// rotation and translation, which distances do not see), for alpha 1 (p = d) and 2 (p = d^2).
TEST(Embed, ExactDistancesOfAKnownConfigurationAreRecovered) {
  for (const double alpha : {1.0, 2.0}) {
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      const Eigen::MatrixXd p = distances_of(random_points(12, seed), alpha);
      EmbedOptions o;
      o.alpha = alpha;
      const Embedding e = embed(p, o);
      EXPECT_LT(largest_relative_misfit(e.distances(), p), 0.02) << "alpha " << alpha << ", seed " << seed;
      EXPECT_EQ(e.coordinates.rows(), 12);
      EXPECT_EQ(e.coordinates.cols(), 2);
    }
  }
}

// The per-node costs h_i (a host's own stack latency) are fitted too: p = d + h_i + h_j.
TEST(Embed, PerNodeCostsAreFittedAndNeverNegative) {
  const Eigen::MatrixXd x = random_points(10, 7);
  Eigen::MatrixXd p = distances_of(x);
  const std::vector<double> h = {0.5, 0, 1, 0.2, 0, 0, 2, 0.1, 0.3, 0};
  for (Eigen::Index i = 0; i < 10; ++i) {
    for (Eigen::Index j = 0; j < 10; ++j) {
      if (i != j) p(i, j) += h[static_cast<std::size_t>(i)] + h[static_cast<std::size_t>(j)];
    }
  }
  EmbedOptions o;
  o.alpha = 1.0;
  o.node_costs = true;
  o.iterations = 6000;
  const Embedding e = embed(p, o);
  EXPECT_LT(largest_relative_misfit(e.distances(), p), 0.03);
  EXPECT_GE(e.node_costs.minCoeff(), 0.0);
  EmbedOptions without = o;
  without.node_costs = false;
  EXPECT_GT(embed(p, without).mean_squared_error, 10 * e.mean_squared_error) << "the costs are what fits";
}

// The unit does not matter: microseconds or seconds, the same fit.
TEST(Embed, TheUnitOfTheDistancesDoesNotChangeTheFit) {
  const Eigen::MatrixXd p = distances_of(random_points(8, 5));
  const Embedding a = embed(p), b = embed(p * 1e-6);
  EXPECT_LT(largest_relative_misfit(b.distances() * 1e6, a.distances()), 1e-6);
}

TEST(Embed, InputsThatCannotBeEmbeddedAreRefusedInOneSentence) {
  auto message = [](const Eigen::MatrixXd& p, EmbedOptions o = {}) {
    try {
      embed(p, o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(Eigen::MatrixXd::Zero(2, 3)).find("square"), std::string::npos);
  Eigen::MatrixXd p = Eigen::MatrixXd::Ones(3, 3);
  p(0, 1) = std::nan("");
  EXPECT_NE(message(p).find("between nodes 0 and 1 must be finite"), std::string::npos);
  p(0, 1) = 2;
  EXPECT_NE(message(p).find("symmetric"), std::string::npos);
  EmbedOptions o;
  o.alpha = 3;
  EXPECT_NE(message(Eigen::MatrixXd::Ones(3, 3), o).find("alpha must be between 1 and 2"), std::string::npos);
  o = {};
  o.dimensions = 0;
  EXPECT_NE(message(Eigen::MatrixXd::Ones(3, 3), o).find("dimension"), std::string::npos);
  EXPECT_EQ(message(Eigen::MatrixXd::Zero(1, 1)), "accepted");
}

TEST(Grouping, GroupCountAndMinimumSizeAreThePapers) {
  EXPECT_EQ(group_count(1), 1);
  EXPECT_EQ(group_count(16), 4);
  EXPECT_EQ(group_count(64), 8);
  EXPECT_EQ(group_count(20), 4);  // sqrt(20) = 4.47
  EXPECT_EQ(min_group_size(16, 4, 1.0), 4);
  EXPECT_EQ(min_group_size(16, 4, 2.0), 2);  // elasticity 2: at least sqrt(n) / 2
  EXPECT_EQ(min_group_size(17, 4, 1.0), 4);
}

// Four well separated blobs of four: every k-means start recovers them, and no two blobs share
// a group.
TEST(Grouping, SeparableGroupsAreRecovered) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.1);
  const double centres[4][2] = {{0, 0}, {10, 0}, {0, 10}, {10, 10}};
  Eigen::MatrixXd x(16, 2);
  for (int i = 0; i < 16; ++i) {
    x(i, 0) = centres[i % 4][0] + noise(rng);
    x(i, 1) = centres[i % 4][1] + noise(rng);
  }
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    const Grouping g = constrained_kmeans(x, 4, 4, seed);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(g.group[static_cast<std::size_t>(i)], g.group[static_cast<std::size_t>(i % 4)]) << "seed " << seed;
    }
    EXPECT_EQ(std::set<int>(g.group.begin(), g.group.end()).size(), 4u);
    EXPECT_DOUBLE_EQ(g.size_deviation, 0.0);
  }
}

// Unbalanced natural clusters (a blob of 7 and three of 3): the minimum size is honoured, and with
// perfect balance the big blob gives members away; elasticity 2 lets it keep them (the paper's
// reason for the elasticity: a cohesive group beats a balanced one with a distant member).
TEST(Grouping, MinimumSizesAreHonouredAndElasticityKeepsCohesiveGroups) {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> noise(0.0, 0.1);
  const double centres[4][2] = {{0, 0}, {20, 0}, {0, 20}, {20, 20}};
  const int blob[16] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  Eigen::MatrixXd x(16, 2);
  for (int i = 0; i < 16; ++i) {
    x(i, 0) = centres[blob[i]][0] + noise(rng);
    x(i, 1) = centres[blob[i]][1] + noise(rng);
  }
  GroupingOptions balanced;  // k = 4, at least 4 each
  balanced.balance_elasticity = 1.0;
  const Grouping b = probe_groups(x, balanced);
  std::vector<int> sizes(4, 0);
  for (const int k : b.group) ++sizes[static_cast<std::size_t>(k)];
  for (const int s : sizes) EXPECT_EQ(s, 4);
  const GroupingOptions elastic;  // the default elasticity, 2: at least 2 each
  const Grouping e = probe_groups(x, elastic);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < i; ++j) {
      EXPECT_EQ(e.group[static_cast<std::size_t>(i)] == e.group[static_cast<std::size_t>(j)], blob[i] == blob[j])
          << i << ", " << j;
    }
  }
  EXPECT_LT(e.inertia, b.inertia);
}

TEST(Grouping, BalancedRandomDealsSizesThatDifferByAtMostOne) {
  const Grouping g = balanced_random_groups(10, 3, 4);
  std::vector<int> sizes(3, 0);
  for (const int k : g.group) ++sizes[static_cast<std::size_t>(k)];
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()) - *std::min_element(sizes.begin(), sizes.end()), 1);
  EXPECT_NE(balanced_random_groups(10, 3, 5).group, g.group) << "another seed, another deal";
  EXPECT_THROW(balanced_random_groups(3, 4, 1), std::invalid_argument);
  EXPECT_THROW(constrained_kmeans(Eigen::MatrixXd::Zero(5, 2), 2, 3, 1), std::invalid_argument);
}

// Four hosts in two racks of one row: r0 = {a, b}, r1 = {c, d}. Observer a: b (same rack) against
// c and d (the other rack): 2 comparable pairs, {c, d} not (same prefix). Every observer likewise:
// 4 x 2 = 8 triplets.
TEST(Paia, CountsTheComparableTripletsThatMeasurementsOrderRight) {
  const std::vector<std::vector<std::string>> positions = {
      {"row", "r0", "a"}, {"row", "r0", "b"}, {"row", "r1", "c"}, {"row", "r1", "d"}};
  Eigen::MatrixXd m(4, 4);
  m << 0, 1, 5, 5,  //
      1, 0, 5, 5,   //
      5, 5, 0, 1,   //
      5, 5, 1, 0;
  Paia p = paia(positions, m);
  EXPECT_EQ(p.triplets, 8u);
  EXPECT_EQ(p.agreeing, 8u);
  EXPECT_DOUBLE_EQ(p.score(), 1.0);
  // a measures c and d as close as b: observer a's two triplets, (b, c) and (b, d), are ties now,
  // which do not agree; the other observers' rows are unchanged.
  m(0, 2) = 1;
  m(0, 3) = 1;
  p = paia(positions, m);
  EXPECT_EQ(p.triplets, 8u);
  EXPECT_EQ(p.agreeing, 6u);
  EXPECT_THROW(paia(positions, Eigen::MatrixXd::Zero(3, 3)), std::invalid_argument);
}

// The paper's point of the embedding (§4.1.2, §5.5): noisy probes of a hierarchy order nodes
// wrongly more often than the embedding of the same probes does. 2 rows x 4 racks x 4 hosts; a
// probe is the hops' latency (1 in a rack, 3 in a row, 5 across rows) times a lognormal noise.
TEST(Embed, EmbeddingNoisyProbesOfAHierarchyOrdersMoreTripletsRight) {
  std::vector<std::vector<std::string>> positions;
  for (int host = 0; host < 32; ++host) {
    positions.push_back({"row" + std::to_string(host / 16), "rack" + std::to_string(host / 4), std::to_string(host)});
  }
  std::uint64_t raw = 0, embedded = 0, triplets = 0;
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> noise(0.0, 0.35);
    Eigen::MatrixXd p = Eigen::MatrixXd::Zero(32, 32);
    for (int i = 0; i < 32; ++i) {
      for (int j = 0; j < i; ++j) {
        const double hops = i / 4 == j / 4 ? 1 : i / 16 == j / 16 ? 3 : 5;
        p(i, j) = p(j, i) = hops * noise(rng);
      }
    }
    EmbedOptions o;
    o.seed = seed;
    const Paia before = paia(positions, p);
    const Paia after = paia(positions, embed(p, o).distances());
    raw += before.agreeing;
    embedded += after.agreeing;
    triplets += before.triplets;
  }
  const double raw_score = static_cast<double>(raw) / static_cast<double>(triplets);
  const double embedded_score = static_cast<double>(embedded) / static_cast<double>(triplets);
  EXPECT_GT(embedded_score, raw_score + 0.02) << "raw " << raw_score << ", embedded " << embedded_score;
}

// Rank r's input: small integers, so that every sum is exact in float32 in any order and a chunk
// added twice, or in the wrong place, shows.
float value(int rank, std::size_t i) { return static_cast<float>(static_cast<int>((i * 5 + rank * 11) % 13) - 6); }

// Runs every rank's schedule in memory; returns the elements that differ from the exact sum and
// fills `sent` with each rank's bytes.
std::size_t run_and_count_wrong(const std::vector<Schedule>& schedules, std::size_t count,
                                std::vector<std::size_t>& sent) {
  const auto n = static_cast<int>(schedules.size());
  std::vector<std::vector<float>> buffers(schedules.size(), std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    validate_schedule(schedules[static_cast<std::size_t>(r)]);
    for (std::size_t i = 0; i < count; ++i) buffers[static_cast<std::size_t>(r)][i] = value(r, i);
  }
  sent = run_schedules_in_memory(schedules, buffers);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += value(r, i);
    for (const auto& b : buffers) wrong += b[i] != sum;
  }
  return wrong;
}

// 2LHA over group shapes (equal, unequal, interleaved ranks, one group, singletons) x chunk
// sizes x element counts (a chunk and a half, none at all, chunks that do not divide) x lanes (one
// connection per pair, the default, more lanes than chunks): every rank
// ends with the exact sum; the dependencies only point back (validate_schedule), and the in-memory
// runner finds no mismatched stream or deadlock.
TEST(TwoLevelSchedule, EveryRankEndsWithTheExactSum) {
  const std::vector<RankGroups> shapes = {{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}},
                                          {{0, 1, 2, 3, 4}, {5, 6}},
                                          {{0, 3, 6}, {1, 4}, {2, 5, 7}},
                                          {{0, 1, 2, 3}},
                                          {{0}, {1}, {2}},
                                          {{2, 0}, {1}}};
  for (const RankGroups& groups : shapes) {
    int n = 0;
    for (const auto& g : groups) n += static_cast<int>(g.size());
    for (const std::size_t chunk : {1u, 7u, 64u}) {
      for (const std::size_t count : {0u, 1u, 96u, 1001u}) {
        for (const int lanes : {1, kDefaultLanes, 7}) {
          std::vector<Schedule> schedules;
          for (int r = 0; r < n; ++r) schedules.push_back(two_level_schedule(r, n, count, groups, chunk, lanes));
          std::vector<std::size_t> sent;
          EXPECT_EQ(run_and_count_wrong(schedules, count, sent), 0u)
              << groups.size() << " groups of " << n << ", chunk " << chunk << ", count " << count << ", lanes "
              << lanes;
        }
      }
    }
  }
}

// What 2LHA costs: with k equal groups of m (n = k m) and chunks that the masters divide evenly,
// every rank sends 2 (m - 1) / m of the buffer inside its group and 2 (k - 1) / n across groups
// (the paper's b = O(n/k + k) for a GM, spread by the turns). FA (one group) is 2 (n - 1) / n.
TEST(TwoLevelSchedule, EachRankSendsWhatTheTwoLevelsCost) {
  constexpr std::size_t kChunk = 10, kChunks = 36;  // 36 chunks: every count of masters below divides it
  constexpr std::size_t kCount = kChunk * kChunks;
  for (const auto& [k, m] : {std::pair{3, 3}, std::pair{2, 3}, std::pair{1, 6}, std::pair{6, 1}, std::pair{2, 2}}) {
    const int n = k * m;
    RankGroups groups(static_cast<std::size_t>(k));
    for (int r = 0; r < n; ++r) groups[static_cast<std::size_t>(r / m)].push_back(r);
    std::vector<Schedule> schedules;
    for (int r = 0; r < n; ++r) schedules.push_back(two_level_schedule(r, n, kCount, groups, kChunk));
    std::vector<std::size_t> sent;
    ASSERT_EQ(run_and_count_wrong(schedules, kCount, sent), 0u);
    const std::size_t floats = 2 * (m - 1) * kCount / m + 2 * (k - 1) * kCount / n;
    // plan_bytes (Autotune's D(i, j)) says the same of each rank as the run.
    const Eigen::MatrixXd d = plan_bytes(groups, equal_shares(n), kCount, kChunk);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(sent[static_cast<std::size_t>(r)], floats * sizeof(float)) << k << " groups of " << m << ", rank " << r;
      EXPECT_EQ(d.row(r).sum(), static_cast<double>(floats * sizeof(float)))
          << k << " groups of " << m << ", rank " << r;
    }
  }
  std::vector<Schedule> flat;
  for (int r = 0; r < 6; ++r) flat.push_back(flat_aggregation_schedule(r, 6, kCount, kChunk));
  std::vector<std::size_t> sent;
  ASSERT_EQ(run_and_count_wrong(flat, kCount, sent), 0u);
  for (const std::size_t bytes : sent) EXPECT_EQ(bytes, 2 * 5 * kCount / 6 * sizeof(float));
}

// A transport connects before it knows the element count (schedule.h): the schedule without
// elements names every channel any count will need, here every lane to every other rank. And a
// rank has a step each way on every channel (a transport may frame each direction that has a step,
// empty or not: one way only, the TCP transport's size header stayed unread and broke the next
// call).
TEST(TwoLevelSchedule, TheChannelsDoNotDependOnTheElementCountAndEveryChannelHasStepsBothWays) {
  const RankGroups groups = {{0, 1, 2}, {3, 4}};
  for (const int lanes : {1, 3}) {
    for (int r = 0; r < 5; ++r) {
      const std::vector<int> without = schedule_channels(two_level_schedule(r, 5, 0, groups, 64, lanes));
      EXPECT_EQ(without.size(), 4u * static_cast<std::size_t>(lanes)) << "rank " << r;
      for (const std::size_t count : {0u, 1u, 100u, 100000u}) {
        const Schedule s = two_level_schedule(r, 5, count, groups, 64, lanes);
        EXPECT_EQ(s.lanes, lanes);
        EXPECT_EQ(schedule_channels(s), without) << "rank " << r << ", " << count;
        for (const int c : without) {
          const auto has = [&](bool send) {
            return std::any_of(s.steps.begin(), s.steps.end(), [&](const ScheduleStep& step) {
              return channel(s, step.peer, step.lane) == c && (step.kind == StepKind::kSend) == send;
            });
          };
          EXPECT_TRUE(has(true) && has(false)) << "rank " << r << " and channel " << c << ", " << count;
        }
      }
    }
  }
}

// The paper's load-balanced map from chunks to connections: chunk c on lane c mod lanes, every
// step of it (each phase, each peer) on that lane.
TEST(TwoLevelSchedule, ChunkCTravelsOnLaneCModLanes) {
  constexpr std::size_t kChunk = 10;
  const Schedule s = two_level_schedule(1, 6, 25 * kChunk, {{0, 1, 2}, {3, 4, 5}}, kChunk, 4);
  for (const ScheduleStep& step : s.steps) {
    if (step.range.empty()) continue;
    EXPECT_EQ(step.lane, static_cast<int>(step.range.begin / kChunk % 4)) << "elements " << step.range.begin;
  }
}

TEST(TwoLevelSchedule, ImpossibleInputIsRefusedInOneSentence) {
  EXPECT_THROW(two_level_schedule(3, 3, 10, {{0, 1, 2}}), std::invalid_argument);
  EXPECT_THROW(two_level_schedule(0, 3, 10, {{0, 1}}), std::invalid_argument);          // rank 2 in no group
  EXPECT_THROW(two_level_schedule(0, 3, 10, {{0, 1}, {1, 2}}), std::invalid_argument);  // rank 1 twice
  EXPECT_THROW(two_level_schedule(0, 2, 10, {{0, 1}}, 0), std::invalid_argument);
  EXPECT_THROW(two_level_schedule(0, 2, 10, {{0, 1}}, 4, 0), std::invalid_argument);              // no lane
  EXPECT_THROW(two_level_schedule(0, 2, 10, {{0, 1}}, 4, kMaxLanes + 1), std::invalid_argument);  // too many
  try {
    two_level_schedule(0, 3, 10, {{0, 1}});
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "PLink two-level schedule: rank 2 is in no group; the groups must partition the ranks");
  }
}

// A three-level tree listed bottom up (the centre is not the first switch): core - agg0 - {tor0,
// tor1}, core - agg1 - tor2; two hosts under each ToR. Positions hang from the centre, core.
TEST(Positions, AHostsChainRunsFromTheCentreDownToIt) {
  Topology t;
  for (const char* name : {"tor0", "tor1", "tor2", "agg0", "agg1", "core"}) {
    t.switches.emplace_back();
    t.switches.back().name = name;
  }
  t.switch_links = {{"tor0", "agg0"}, {"tor1", "agg0"}, {"tor2", "agg1"}, {"agg0", "core"}, {"agg1", "core"}};
  for (const char* tor : {"tor0", "tor1", "tor2"}) {
    for (int i = 0; i < 2; ++i) t.hosts.push_back(HostSpec{std::string(tor) + "h" + std::to_string(i), tor});
  }
  const auto p = host_positions(t);
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0], (std::vector<std::string>{"core", "agg0", "tor0", "tor0h0"}));
  EXPECT_EQ(p[3], (std::vector<std::string>{"core", "agg0", "tor1", "tor1h1"}));
  EXPECT_EQ(p[5], (std::vector<std::string>{"core", "agg1", "tor2", "tor2h1"}));
  // Distances by hops through the tree order every comparable triplet right.
  Eigen::MatrixXd hops(6, 6);
  for (int a = 0; a < 6; ++a) {
    for (int b = 0; b < 6; ++b) {
      std::size_t shared = 0;
      while (shared < 3 && p[static_cast<std::size_t>(a)][shared] == p[static_cast<std::size_t>(b)][shared]) ++shared;
      hops(a, b) = a == b ? 0 : 2.0 * (4 - static_cast<double>(shared));
    }
  }
  const Paia perfect = paia(p, hops);
  EXPECT_GT(perfect.triplets, 0u);
  EXPECT_EQ(perfect.agreeing, perfect.triplets);
  t.switch_links.pop_back();
  EXPECT_THROW(host_positions(t), std::invalid_argument);  // agg1 and tor2 cut off
}

// O(n) rounds: every pair once, no node twice in a round, n - 1 rounds for even n and n for odd.
TEST(Probing, PairingRoundsHoldEveryPairOnceAndNoNodeTwiceARound) {
  for (int n = 0; n <= 9; ++n) {
    const auto rounds = pairing_rounds(n);
    EXPECT_EQ(rounds.size(), n < 2 ? 0u : static_cast<std::size_t>(n % 2 == 0 ? n - 1 : n)) << n;
    std::set<std::pair<int, int>> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "a node twice in a round of " << n;
        EXPECT_TRUE(seen.insert({a, b}).second) << "a pair twice for " << n;
      }
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(n * (n - 1) / 2)) << n;
  }
}

TEST(Probing, DistancesAreMediansAndBandwidthsInverted) {
  EXPECT_DOUBLE_EQ(latency_distance({5, 1, 100, 2, 3}), 3);  // the outlier does not move it
  EXPECT_DOUBLE_EQ(latency_distance({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(bandwidth_distance({2, 4, 4}), 0.25);
  EXPECT_THROW(latency_distance({}), std::invalid_argument);
  EXPECT_THROW(bandwidth_distance({1, 0}), std::invalid_argument);
  Eigen::MatrixXd m(3, 3);
  m << 0, 2, -1,  //
      4, 0, 1,    //
      5, -1, 0;
  const Eigen::MatrixXd d = symmetric_distances(m);
  EXPECT_DOUBLE_EQ(d(0, 1), 3);  // both directions: their mean
  EXPECT_DOUBLE_EQ(d(0, 2), 5);  // one direction: it
  EXPECT_DOUBLE_EQ(d(2, 1), 1);
  EXPECT_EQ(d, d.transpose());
  m(1, 2) = -1;
  EXPECT_THROW(symmetric_distances(m), std::invalid_argument);
}

}  // namespace
// Every round's calls run to the end with every rank (matched steps, no deadlock, odd and even
// counts): the latency rounds carry one value each way per call, the bandwidth rounds a transfer
// that leaves the sender's values at the receiver; all_pairs names every other rank.
TEST(Probing, ProbeCallsRunBetweenTheRoundsPairs) {
  const ProbeOptions o{.echoes = 2, .transfers = 1};
  for (const int n : {2, 5, 6}) {
    const std::size_t count = 100;
    const auto pairings = pairing_rounds(n);
    ASSERT_EQ(probe_rounds(n), 2 * pairings.size());
    for (std::uint32_t r = 0; r < probe_rounds(n); ++r) {
      const bool transfers = r >= pairings.size();
      std::vector<std::vector<Schedule>> calls;
      for (int rank = 0; rank < n; ++rank) calls.push_back(probe_calls(rank, n, count, r, o));
      ASSERT_EQ(calls[0].size(), transfers ? 3u : 5u);
      for (std::size_t c = 0; c < calls[0].size(); ++c) {
        std::vector<Schedule> schedules;
        std::vector<std::vector<float>> buffers;
        for (int rank = 0; rank < n; ++rank) {
          schedules.push_back(calls[static_cast<std::size_t>(rank)][c]);
          buffers.emplace_back(count, static_cast<float>(rank));
        }
        const std::vector<std::size_t> sent = run_schedules_in_memory(schedules, buffers);
        for (const auto& [a, b] : pairings[transfers ? r - pairings.size() : r]) {
          const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
          if (c == 0 || !transfers) {  // meet, echoes: one value each way
            EXPECT_EQ(sent[ua], 4u);
            EXPECT_EQ(sent[ub], 4u);
            continue;
          }
          const bool lower_sends = c % 2 == 1;
          const std::size_t from = lower_sends ? ua : ub, to = lower_sends ? ub : ua;
          EXPECT_EQ(sent[from], count * 4) << "n " << n << " round " << r << " call " << c;
          EXPECT_EQ(sent[to], 4u);
          EXPECT_EQ(buffers[to], std::vector<float>(count, static_cast<float>(from)));
        }
      }
    }
  }
  std::vector<Schedule> pairs;
  std::vector<std::vector<float>> empty(4);
  for (int rank = 0; rank < 4; ++rank) pairs.push_back(all_pairs(rank, 4));
  EXPECT_EQ(schedule_peers(pairs[2]), (std::vector<int>{0, 1, 3}));
  EXPECT_NO_THROW(run_schedules_in_memory(pairs, empty));
  EXPECT_THROW(probe_calls(0, 4, 100, 6, o), std::invalid_argument);  // 4 nodes: rounds 0..5
  EXPECT_THROW(probe_calls(0, 4, 0, 0, o), std::invalid_argument);
  EXPECT_THROW(probe_calls(0, 4, 100, 0, {.echoes = 0, .transfers = 1}), std::invalid_argument);
}

// Times from a known network come back as its round trips and inverse bandwidths: each rank's
// measured calls (a ping it sends, a transfer it sends) timed from the model, the others at 1 s
// (not read).
TEST(Probing, SamplesFromTimedCallsGiveEachPairsRoundTripAndBandwidth) {
  const int n = 5;
  const std::size_t count = 1000;
  const ProbeOptions o{.echoes = 3, .transfers = 2};
  const auto rtt = [](int a, int b) { return 1e-4 * (1 + std::abs(a - b)); };
  const auto bw = [](int a, int b) { return 1e8 / (1 + (a + b) % 3); };
  std::vector<std::vector<std::vector<double>>> seconds(n);
  for (int rank = 0; rank < n; ++rank) {
    for (std::uint32_t r = 0; r < probe_rounds(n); ++r) {
      auto& times = seconds[static_cast<std::size_t>(rank)].emplace_back();
      const auto calls = probe_calls(rank, n, count, r, o);
      for (std::size_t c = 0; c < calls.size(); ++c) {
        const auto& steps = calls[c].steps;
        double t = 1;
        if (c > 0 && !steps.empty() && steps[0].kind == StepKind::kSend) {
          const int peer = steps[0].peer;
          t = steps[0].range.size() == 1 ? rtt(rank, peer) : static_cast<double>(count) * 4 / bw(rank, peer);
        }
        times.push_back(t);
      }
    }
  }
  const ProbeSamples samples = probe_samples(n, count, seconds, o);
  EXPECT_EQ(samples.round_trip_s[1][3].size(), 3u);
  EXPECT_EQ(samples.bytes_per_second[3][1].size(), 2u);
  const Eigen::MatrixXd latency = samples.latency_distances(), bandwidth = samples.bandwidth_distances();
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      EXPECT_NEAR(latency(a, b), rtt(a, b), 1e-12);
      EXPECT_NEAR(bandwidth(a, b), 1 / bw(a, b), 1e-15);
    }
  }
  for (auto& rank : seconds) rank[1][4] = 0;  // a measured call (whoever measured it) timed as nothing
  EXPECT_THROW(probe_samples(n, count, seconds, o), std::invalid_argument);
  seconds.pop_back();
  EXPECT_THROW(probe_samples(n, count, seconds, o), std::invalid_argument);
}

// --- Autotune

// Equal weights give the masters by turns (the plan without shares); other weights give each rank
// its part of the chunks give or take one, spread through them (a rank with at most half the
// weight never masters two chunks in a row), a zero weight none; shares that do not fit are refused.
TEST(Autotune, MastersFollowTheSharesSpreadThroughTheChunks) {
  const RankGroups groups = {{0, 1, 2}, {3, 4, 5}};
  const MasterAssignment equal = assign_masters(groups, equal_shares(6), 12);
  for (std::size_t c = 0; c < 12; ++c) {
    EXPECT_EQ(equal.gm[c], static_cast<int>(c % 6));
    const int gm_group = equal.gm[c] / 3;
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(equal.lm[c][static_cast<std::size_t>(h)],
                h == gm_group ? equal.gm[c] : 3 * h + static_cast<int>(c % 3));
    }
  }
  MasterShares shares = equal_shares(6);
  shares.gm = {4, 2, 1, 1, 0, 0};
  shares.lm = {1, 1, 2, 1, 1, 0};
  const std::size_t chunks = 80;
  const MasterAssignment a = assign_masters(groups, shares, chunks);
  std::vector<int> gms(6, 0), lms(6, 0);
  for (std::size_t c = 0; c < chunks; ++c) {
    ++gms[static_cast<std::size_t>(a.gm[c])];
    if (c > 0 && a.gm[c] == a.gm[c - 1]) {
      EXPECT_EQ(a.gm[c], 0) << "chunk " << c;  // only rank 0 has half
    }
    for (int h = 0; h < 2; ++h) {
      const int lm = a.lm[c][static_cast<std::size_t>(h)];
      if (lm != a.gm[c]) ++lms[static_cast<std::size_t>(lm)];
    }
  }
  EXPECT_EQ(gms, (std::vector<int>{40, 20, 10, 10, 0, 0}));
  EXPECT_EQ(lms[5], 0);
  EXPECT_GT(lms[2], lms[0]);  // twice the weight of its group-mates
  shares.gm = {0, 0, 0, 0, 0, 0};
  EXPECT_THROW(assign_masters(groups, shares, 4), std::invalid_argument);
  shares.gm = {1, 1, 1, 1, 1, -1};
  EXPECT_THROW(assign_masters(groups, shares, 4), std::invalid_argument);
  shares.gm = {1, 1, 1};
  EXPECT_THROW(assign_masters(groups, shares, 4), std::invalid_argument);
  shares = equal_shares(6);
  shares.lm = {0, 0, 0, 1, 1, 1};  // group 0 has no LM
  EXPECT_THROW(assign_masters(groups, shares, 4), std::invalid_argument);
}

// Whatever the shares, every rank ends with the exact sum (integer inputs), over group shapes and
// chunk sizes, seeded.
TEST(Autotune, SchedulesFromAnySharesAreExact) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> weight(0.0, 3.0);
  const std::vector<RankGroups> shapes = {{{0, 1, 2}, {3, 4, 5}, {6, 7}}, {{0, 1, 2, 3, 4}}, {{0, 3}, {1, 4}, {2}}};
  for (const RankGroups& groups : shapes) {
    int n = 0;
    for (const auto& g : groups) n += static_cast<int>(g.size());
    for (int trial = 0; trial < 5; ++trial) {
      MasterShares shares = equal_shares(n);
      for (auto& w : shares.gm) w = weight(rng);
      for (auto& w : shares.lm) w = 0.1 + weight(rng);
      for (const std::size_t chunk : {3u, 64u}) {
        const std::size_t count = 1001;
        std::vector<Schedule> schedules;
        for (int r = 0; r < n; ++r) schedules.push_back(two_level_schedule(r, n, count, groups, shares, chunk));
        std::vector<std::size_t> sent;
        EXPECT_EQ(run_and_count_wrong(schedules, count, sent), 0u) << n << " ranks, trial " << trial;
      }
    }
  }
}

// The plan's bytes, and a send-bound model of an iteration: rank i sends D(i, j) at its own rate
// rate[i] (its link), and the iteration takes as long as the slowest rank. The measurements are
// what a transport would report of it.
struct Model {
  RankGroups groups;
  std::size_t count = 0, chunk = 0;
  std::vector<double> rate;  // bytes per second, per rank

  LinkMeasurements measure(const MasterShares& shares) const {
    const auto n = static_cast<Eigen::Index>(rate.size());
    LinkMeasurements m{plan_bytes(groups, shares, count, chunk), Eigen::MatrixXd::Zero(n, n),
                       Eigen::MatrixXd::Zero(n, n)};
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < n; ++j) {
        if (i == j) continue;
        m.bytes_per_second(i, j) = rate[static_cast<std::size_t>(i)];
        m.round_trip_s(i, j) = 1e-5;
      }
    }
    return m;
  }
  double seconds(const MasterShares& shares) const {
    const LinkMeasurements m = measure(shares);
    double slowest = 0;
    for (Eigen::Index i = 0; i < m.bytes.rows(); ++i) {
      slowest = std::max(slowest, m.bytes.row(i).sum() / rate[static_cast<std::size_t>(i)]);
    }
    return slowest;
  }
};

// Quicktune gives each rank GMs and LMs in proportion to its measured bandwidth, and each group GMs
// in proportion to its members' bandwidth to the other groups.
TEST(Autotune, QuicktuneSharesFollowTheMeasuredBandwidth) {
  const Model model{{{0, 1}, {2, 3}}, 4096, 64, {1e9, 4e9, 4e9, 4e9}};
  const MasterShares q = quicktune(model.groups, model.measure(equal_shares(4)));
  EXPECT_NEAR(q.lm[1] / q.lm[0], 4, 1e-9);
  EXPECT_NEAR(q.lm[2], q.lm[3], 1e-9);
  EXPECT_NEAR(q.gm[1] / q.gm[0], 4, 1e-9);
  // Group 0 measured 1 + 4 to group 1 (of each member's rate: to every peer alike), group 1 4 + 4.
  EXPECT_NEAR((q.gm[0] + q.gm[1]) / (q.gm[2] + q.gm[3]), 5.0 / 8.0, 1e-9);
}

// Blame by hand: the imbalance part is 0 for the rank that sends least and 1 for the most, the time
// part each rank's time over the mean.
TEST(Autotune, BlameIsImbalanceAndTimeAsThePaperWeighsThem) {
  LinkMeasurements m{Eigen::MatrixXd::Zero(3, 3), Eigen::MatrixXd::Zero(3, 3), Eigen::MatrixXd::Zero(3, 3)};
  m.bytes << 0, 100, 100,  //
      50, 0, 50,           //
      100, 200, 0;
  m.bytes_per_second.setConstant(100);
  m.round_trip_s.setConstant(0);
  // l = 200, 100, 300: l_hat = 0.5, 0, 1; t = 2, 1, 3: t_hat = 1, 0.5, 1.5.
  FinetuneOptions even;
  even.beta = even.gamma = 1;
  const Eigen::VectorXd b = blame(m, even);
  EXPECT_NEAR(b(0), 1.5, 1e-12);
  EXPECT_NEAR(b(1), 0.5, 1e-12);
  EXPECT_NEAR(b(2), 2.5, 1e-12);
  EXPECT_NEAR(blame(m)(2), 0.1 * 1 + 1.5, 1e-12);  // the default: beta 0.1
}

// Finetune moves one chunk's GM from the most to the least blamed rank, twice as many when the same
// rank stays the bottleneck, LM duties inside its group once it has no GM, and nothing once the
// blame is balanced.
TEST(Autotune, FinetuneMovesMastersAwayFromTheBottleneckFasterEachTime) {
  const RankGroups groups = {{0, 1}, {2, 3}};
  // Every rank sends alike; rank 0 at a quarter of the others' rate, rank 3 a little faster.
  LinkMeasurements m{Eigen::MatrixXd::Constant(4, 4, 1e6), Eigen::MatrixXd::Constant(4, 4, 4e9),
                     Eigen::MatrixXd::Constant(4, 4, 1e-5)};
  m.bytes_per_second.row(0).setConstant(1e9);
  m.bytes_per_second.row(3).setConstant(5e9);
  const std::size_t chunks = 64;
  const double unit = 4.0 / 64;  // one chunk's worth of 4 equal gm weights
  MasterShares shares = equal_shares(4);
  FinetuneState state;
  std::optional<MasterShares> next = finetune(groups, shares, chunks, m, state);
  ASSERT_TRUE(next);
  EXPECT_NEAR(next->gm[0], 1 - unit, 1e-12);
  EXPECT_NEAR(next->gm[3], 1 + unit, 1e-12);  // the least blamed
  EXPECT_EQ(state.last_bottleneck, 0);
  next = finetune(groups, *next, chunks, m, state);
  ASSERT_TRUE(next);
  EXPECT_NEAR(next->gm[0], 1 - 3 * unit, 1e-12);  // the same bottleneck: two more
  shares.gm[0] = 0;                               // no GM left: its LM duties go to its group-mate
  state = {};
  next = finetune(groups, shares, chunks, m, state);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->gm, shares.gm);
  EXPECT_LT(next->lm[0], 1);
  EXPECT_GT(next->lm[1], 1);
  EXPECT_FALSE(finetune({{0, 1, 2, 3}}, shares, chunks, m, state));  // one group: no LM to move
  m.bytes_per_second.setConstant(4e9);                               // balanced: nothing to do
  EXPECT_FALSE(finetune(groups, equal_shares(4), chunks, m, state));
}

// The loop on the send-bound model, 8 ranks of FA as in the paper's Fig. 10: node 0's link drops to
// 2/5, and within 5 iterations the plan runs at 90% or more of the best one for the throttled
// network (node 0 mastering nothing: it still sends its whole buffer once, at 2/5 of the others'
// rate, so the unthrottled time cannot come back); when the link is restored the plan returns to
// within 90% of the unthrottled one. Unchanged conditions change nothing.
TEST(Autotune, RecoversFromAThrottleWithinFiveIterations) {
  Model model{{{0, 1, 2, 3, 4, 5, 6, 7}}, 256 * 1024, 1024, std::vector<double>(8, 5e9 / 8)};
  const std::size_t chunks = 256;
  Autotune tune(model.groups, chunks);
  MasterShares shares = equal_shares(8);
  const double unthrottled = model.seconds(shares);
  const auto iterate = [&](int times) {
    for (int i = 0; i < times; ++i) {
      if (auto next = tune.after_iteration(model.seconds(shares), shares, model.measure(shares))) shares = *next;
    }
  };
  iterate(5);
  EXPECT_EQ(shares, equal_shares(8));
  model.rate[0] = 2e9 / 8;
  MasterShares best = equal_shares(8);
  best.gm[0] = 0;
  const double throttled_best = model.seconds(best);
  const double throttled_equal = model.seconds(equal_shares(8));
  ASSERT_GT(throttled_equal, 1.5 * throttled_best);  // the plan matters here
  iterate(5);
  EXPECT_LE(model.seconds(shares), throttled_best / 0.9) << "equal shares: " << throttled_equal;
  model.rate[0] = 5e9 / 8;
  iterate(5);
  EXPECT_LE(model.seconds(shares), unthrottled / 0.9);
}

// The call times ranks exchange as text (probe_times_text): rounds by ';', calls by ',', read back
// to the microsecond; text that is not a time list is refused.
TEST(ProbeTimes, TheTextReadsBackToTheMicrosecondAndNothingElseReads) {
  const std::vector<std::vector<double>> rounds = {{0.000125, 1.5}, {2e-6}, {0.25, 0.5, 0.75}};
  const std::string text = probe_times_text(rounds);
  EXPECT_EQ(text, "0.000125,1.500000;0.000002;0.250000,0.500000,0.750000");
  const std::vector<std::vector<double>> back = probe_times_from_text(text);
  ASSERT_EQ(back.size(), rounds.size());
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    ASSERT_EQ(back[r].size(), rounds[r].size());
    for (std::size_t c = 0; c < rounds[r].size(); ++c) EXPECT_NEAR(back[r][c], rounds[r][c], 1e-6);
  }
  EXPECT_THROW(probe_times_from_text("0.1,x"), std::invalid_argument);
  EXPECT_THROW(probe_times_from_text(""), std::invalid_argument);
}

}  // namespace atp::plink
