// Tests of the protocol table (atp/cluster/protocols.h): each entry plans a job, makes its
// workers' endpoints from the plan's configs, and says whether it re-forms; an unknown name and a
// bad config are refused in one sentence.
#include "atp/cluster/protocols.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/control/control.h"
#include "atp/plan/plan.h"

namespace atp {
namespace {

// Two racks of two workers under aggregating ToRs, a core, and a PS under the core.
struct TwoRacks {
  Topology topology;
  NetworkPlan network;
  JobSpec job;
  TwoRacks() {
    SwitchConfig core;
    core.atp_capable = false;
    topology.switches = {{"core", core}, {"tor0", SwitchConfig{}}, {"tor1", SwitchConfig{}}};
    topology.switch_links = {{"tor0", "core"}, {"tor1", "core"}};
    topology.hosts = {{"a0", "tor0"}, {"b0", "tor1"}, {"a1", "tor0"}, {"b1", "tor1"}, {"ps", "core"}};
    network = plan_network(topology);
    job.id = 7;
    job.name = "j";
    job.workers = {"a0", "b0", "a1", "b1"};
    job.ps = {"ps"};
  }
};

TEST(Protocols, TheTableListsAtpThenRinaAndRefusesAnUnknownNameInOneSentence) {
  ASSERT_EQ(protocols().size(), 2u);
  EXPECT_EQ(protocols()[0].name, "atp");
  EXPECT_EQ(protocols()[1].name, "rina");
  EXPECT_EQ(find_protocol("gloo"), nullptr);
  try {
    protocol("gloo");
    FAIL() << "found a protocol 'gloo'";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "no protocol 'gloo' (atp or rina)");
  }
}

// Each protocol's plan gives every worker a config its endpoint takes: the endpoint speaks the
// protocol, belongs to the job and sits at its worker's address.
TEST(Protocols, EachPlansAJobWhoseConfigsMakeItsEndpoints) {
  const TwoRacks net;
  for (const Protocol& p : protocols()) {
    SCOPED_TRACE(std::string(p.name));
    const EndpointJobPlan plan = p.plan(net.network, net.job);
    EXPECT_EQ(plan.job, 7);
    ASSERT_EQ(plan.workers.size(), 4u);
    EXPECT_GT(plan.values_per_packet, 0);
    EXPECT_TRUE(plan.switches.contains("tor0"));
    for (std::size_t w = 0; w < plan.workers.size(); ++w) {
      const std::unique_ptr<Endpoint> e = p.endpoint(plan.workers[w]);
      EXPECT_EQ(e->protocol(), p.name);
      EXPECT_EQ(e->job(), 7);
      EXPECT_EQ(e->self(), net.network.host_address.at(net.job.workers[w]));
      EXPECT_EQ(e->values_per_packet(), plan.values_per_packet);
      EXPECT_EQ(e->state(), WorkerState::kIdle);
    }
  }
  const EndpointJobPlan atp = protocol("atp").plan(net.network, net.job);
  EXPECT_EQ(atp.ps.size(), 1u);
  EXPECT_EQ(atp.ring_members, 0u);
  const EndpointJobPlan rina = protocol("rina").plan(net.network, net.job);
  EXPECT_TRUE(rina.ps.empty()) << "Rina has no PS";
  EXPECT_EQ(rina.ring_members, 2u) << "each rack is one member";
}

TEST(Protocols, OnlyRinaReFormsAndItsJobStartsPastTheOldSeqs) {
  EXPECT_EQ(protocol("atp").reformed, nullptr);
  ASSERT_NE(protocol("rina").reformed, nullptr);
  const TwoRacks net;
  // Serial-number order (RFC 1982): 2147483700 comes after 100, and 7 after 2147483700.
  const std::vector<Seq> seqs = {100, 2147483700u, 7};
  const JobSpec spec = protocol("rina").reformed(net.job, {"a0", "b1"}, 64, seqs);
  EXPECT_EQ(spec.workers, (std::vector<std::string>{"a0", "b1"}));
  EXPECT_EQ(spec.values_per_packet, 64);
  EXPECT_EQ(spec.initial_seq, 7u) << "the last of the old seqs";
}

TEST(Protocols, AConfigThatDoesNotReadIsRefusedNamingTheField) {
  const TwoRacks net;
  for (const Protocol& p : protocols()) {
    SCOPED_TRACE(std::string(p.name));
    nlohmann::json config = p.plan(net.network, net.job).workers[0];
    config.erase("job");
    try {
      p.endpoint(config);
      FAIL() << "made an endpoint of a config without its job";
    } catch (const control::ControlError& e) {
      EXPECT_STREQ(e.what(), "job: missing");
    }
    EXPECT_THROW(p.endpoint(nlohmann::json::array()), control::ControlError);
  }
}

}  // namespace
}  // namespace atp
