// The bandwidth-occupation model against the cases Rina's paper computes by hand (its Fig. 4 and
// Lemma 1), and Rina's replacement order.
#include "atp/plan/bom.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "atp/scenario/topologies.h"

namespace atp {
namespace {

// Rina's Fig. 4: four workers under switch s2 (regular), which hangs under s3 with workers w1 and
// w2; s3 and worker w5 under s4, and the PS under s4.
Topology fig4() {
  Topology t;
  for (const char* s : {"s2", "s3", "s4"}) t.switches.push_back({s, {}});
  for (int i = 0; i < 4; ++i) t.hosts.push_back({"t" + std::to_string(i), "s2"});
  t.hosts.push_back({"w1", "s3"});
  t.hosts.push_back({"w2", "s3"});
  t.hosts.push_back({"w5", "s4"});
  t.hosts.push_back({"ps", "s4"});
  t.switch_links = {{"s2", "s3"}, {"s3", "s4"}};
  return t;
}

JobSpec fig4_job() {
  JobSpec job;
  job.name = "fig4";
  job.workers = {"t0", "t1", "t2", "t3", "w1", "w2", "w5"};
  job.ps = {"ps"};
  return job;
}

TEST(Bom, Fig4WithS3AggregatingIsAQuarterOfTheLink) {
  const Topology t = fig4();
  const NetworkPlan n = plan_network(t);
  const BomPrediction p = BomModel(n, fig4_job()).predict({"s3"});
  EXPECT_DOUBLE_EQ(p.throughput, 0.25);  // the paper: B0/4, T1's four workers on s2's uplink
  EXPECT_EQ(p.bottleneck.from, "s2");
  EXPECT_EQ(p.bottleneck.to, "s3");
  EXPECT_EQ(p.bottleneck.load, 4);
  ASSERT_EQ(p.links.size(), 7u + 3u);
  EXPECT_EQ(p.links.back().from, "s4");  // s3 counts as one worker, with w5: B0/2 on s4's link
  EXPECT_EQ(p.links.back().to, "ps");
  EXPECT_EQ(p.links.back().load, 2);
}

TEST(Bom, WithoutAggregationEveryWorkerGetsOneWthOfTheLink) {  // Lemma 1
  const Topology t = fig4();
  const BomPrediction p = BomModel(plan_network(t), fig4_job()).predict({});
  EXPECT_DOUBLE_EQ(p.throughput, 1.0 / 7);
  EXPECT_EQ(p.bottleneck.from, "s4");
  EXPECT_EQ(p.bottleneck.load, 7);
  const BomPrediction all = BomModel(plan_network(t), fig4_job()).predict({"s2", "s3", "s4"});
  EXPECT_DOUBLE_EQ(all.throughput, 1.0);
}

// The ring in job order on Fig. 4's network: 7 edges of 2(7-1)/7 S each, no two on one direction of
// a link (t3 -> w1 crosses s2 -> s3, w5 -> t0 crosses s4 -> s3 -> s2).
TEST(Bom, RingCarriesTwoNMinusOneOverNOnEveryEdge) {
  const Topology t = fig4();
  const NetworkPlan n = plan_network(t);
  const BomPrediction p = BomModel(n, fig4_job()).predict_ring();
  EXPECT_DOUBLE_EQ(p.bottleneck.load, 12.0 / 7);
  EXPECT_DOUBLE_EQ(p.throughput, 7.0 / 12);
  EXPECT_EQ(p.bottleneck.from, "t0");  // the first edge's first link
  EXPECT_EQ(p.bottleneck.to, "s2");
}

// Rina on Fig. 4 with s2 and s3 aggregating: racks t0..t3 (agent t0) and w1, w2 (agent w1) are one
// member each, w5 (alone under s4) is autonomous: G = 3. Edges carry 2(3-1)/3 = 4/3 S. As the
// paper has it, each agent gets its rack's multicast (S) and the reduce-scatter's partial sums
// (2/3 S): 5/3 S.
TEST(Bom, RinaAbstractsAggregatingRacksAndLoadsTheirAgents) {
  const Topology t = fig4();
  const NetworkPlan n = plan_network(t);
  const BomModel model(n, fig4_job());
  const BomPrediction p = model.predict_rina({"s2", "s3"}, true);
  EXPECT_DOUBLE_EQ(p.throughput, 0.6);
  EXPECT_EQ(p.bottleneck.from, "s2");
  EXPECT_EQ(p.bottleneck.to, "t0");
  const auto load = [&](const std::string& from, const std::string& to) {
    for (const BomLink& l : p.links)
      if (l.from == from && l.to == to) return l.load;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(load("t1", "s2"), 1);        // a member's gradient, once
  EXPECT_DOUBLE_EQ(load("s2", "t1"), 1);        // every chunk's sum, by multicast
  EXPECT_DOUBLE_EQ(load("s2", "s3"), 4.0 / 3);  // rack 0's ToR to rack 1's
  EXPECT_DOUBLE_EQ(load("s3", "s4"), 4.0 / 3);  // rack 1's ToR to w5
  EXPECT_DOUBLE_EQ(load("s4", "w5"), 4.0 / 3);
  EXPECT_DOUBLE_EQ(load("w5", "s4"), 4.0 / 3);  // w5 back to rack 0's ToR
  EXPECT_DOUBLE_EQ(load("s3", "s2"), 4.0 / 3);
  EXPECT_DOUBLE_EQ(load("s2", "w5"), -1);  // no such link
  // s4 aggregating changes nothing: w5 is alone under it. No aggregating ToR: the ring.
  EXPECT_DOUBLE_EQ(model.predict_rina({"s2", "s3", "s4"}, true).throughput, 0.6);
  EXPECT_DOUBLE_EQ(model.predict_rina({}).throughput, model.predict_ring().throughput);
  // As built, the partial sums are shared over the rack: t0..t3 get 1 + (2/3)/4 S each, w1 and w2
  // 1 + (2/3)/2 = 4/3 S, as much as the ring's edges carry.
  const BomPrediction built = model.predict_rina({"s2", "s3"});
  EXPECT_DOUBLE_EQ(built.bottleneck.load, 4.0 / 3);
  EXPECT_DOUBLE_EQ(built.throughput, 0.75);
}

// One rack whose ToR aggregates: one member, nothing goes around; each worker sends and gets S.
TEST(Bom, RinaOfOneAbstractedRackIsTheLinkRate) {
  const Topology t = fig4();
  const NetworkPlan n = plan_network(t);
  JobSpec job = fig4_job();
  job.workers = {"t0", "t1", "t2", "t3"};
  EXPECT_DOUBLE_EQ(BomModel(n, job).predict_rina({"s2"}).throughput, 1.0);
}

TEST(Bom, RefusesWhatTheModelCannotSay) {
  const Topology t = fig4();
  const NetworkPlan n = plan_network(t);
  JobSpec two_ps = fig4_job();
  two_ps.ps = {"ps", "w5"};
  two_ps.workers.pop_back();
  EXPECT_THROW(BomModel(n, two_ps), PlanError);
  JobSpec nobody = fig4_job();
  nobody.workers.clear();
  EXPECT_THROW(BomModel(n, nobody), PlanError);
  JobSpec alone = fig4_job();
  alone.workers = {"t0"};
  EXPECT_THROW(BomModel(n, alone).predict_ring(), PlanError);
  EXPECT_THROW(BomModel(n, alone).predict_rina({"s2"}), PlanError);
  JobSpec stranger = fig4_job();
  stranger.workers.push_back("w9");
  EXPECT_THROW(BomModel(n, stranger), PlanError);
}

TEST(Bom, DeploymentOrderTakesTheFullestRacksFirst) {
  const Topology t = fig4();
  EXPECT_EQ(BomModel(plan_network(t), fig4_job()).deployment_order(), (std::vector<std::string>{"s2", "s3", "s4"}));
}

// On a k = 4 fat-tree (a PS and 15 workers), each replacement in the order keeps or raises the
// throughput, the edge switches come first (the PS's, with one worker, last of them), and once
// every switch on the tree aggregates each link carries one stream.
TEST(Bom, FatTreeReplacementsNeverLowerThroughput) {
  const Topology t = fat_tree(4);
  const NetworkPlan n = plan_network(t);
  JobSpec job;
  job.name = "ft";
  job.ps = {"h0_0_0"};
  for (const HostSpec& h : t.hosts) {
    if (h.name != "h0_0_0") job.workers.push_back(h.name);
  }
  const BomModel model(n, job);
  const std::vector<std::string> order = model.deployment_order();
  ASSERT_GE(order.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(order[i].rfind("edge", 0), 0u) << order[i];
  EXPECT_EQ(order[7], "edge0_0");
  std::set<std::string> aggregating;
  double before = model.predict(aggregating).throughput;
  EXPECT_DOUBLE_EQ(before, 1.0 / 15);
  for (const std::string& s : order) {
    aggregating.insert(s);
    const double now = model.predict(aggregating).throughput;
    EXPECT_GE(now, before) << "after " << s;
    before = now;
  }
  EXPECT_DOUBLE_EQ(before, 1.0);
}

}  // namespace
}  // namespace atp
