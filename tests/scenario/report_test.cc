// Tests of a scenario's JSON report (report.cc, to_json): every key in its fixed order with its
// value for a small hand-built result, and the keys that appear only when they say something.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "atp/scenario/scenario.h"

namespace atp {
namespace {

using nlohmann::ordered_json;

std::vector<std::string> keys(const ordered_json& object) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items()) out.push_back(key);
  return out;
}

// One job of two workers that aggregated in switch s0, one link direction, one background flow.
ScenarioResult small_result() {
  ScenarioResult r;
  r.backend = "inproc";
  r.leaked_aggregators = 1;
  r.simulated_seconds = 0.5;
  r.events = 1234;
  r.noise_packets = 7;
  r.noise_packets_received = 6;
  r.rejected_packets = 6;
  JobResult job;
  job.name = "job1";
  job.algorithm = "atp";
  job.correct = true;
  job.rounds = 3;
  job.completed_rounds = 3;
  job.workers = 2;
  job.tensor_bytes = 4096;
  job.values_per_packet = 64;
  job.fragments = 48;
  job.switch_aggregations = {{"s1", 10}, {"s0", 38}};
  job.ps_packets_received = 50;
  job.retransmissions = 2;
  job.seconds = 0.25;
  job.algbw_gbps = 0.375;
  job.round_end_seconds = {0.1, 0.2, 0.25};
  r.jobs.push_back(job);
  r.links.push_back(LinkResult{.from = "h0",
                               .to = "s0",
                               .packets = 96,
                               .bytes = 30000,
                               .lost = 1,
                               .queue_drops = 2,
                               .ecn_marked = 3,
                               .duplicated = 4});
  FlowResult flow;
  flow.from = "h2";
  flow.to = "h3";
  flow.bytes = 1000000;
  flow.seconds = 0.5;
  flow.goodput_gbps = 0.016;
  flow.interval_s = 0.25;
  flow.goodput_mbps = {20, 12};
  r.flows.push_back(flow);
  return r;
}

TEST(ReportJson, TheTopLevelKeysComeInTheirFixedOrderWithTheResultsValues) {
  const ordered_json j = ordered_json::parse(to_json(small_result()));
  EXPECT_EQ(keys(j), (std::vector<std::string>{"backend", "correct", "leaked_aggregators", "time_limit_reached",
                                               "simulated_seconds", "events", "host_dropped_packets", "noise_packets",
                                               "noise_packets_received", "rejected_packets", "restart_rejected_packets",
                                               "jobs", "links", "flows"}));
  EXPECT_EQ(j["backend"], "inproc");
  EXPECT_EQ(j["correct"], true);
  EXPECT_EQ(j["leaked_aggregators"], 1);
  EXPECT_EQ(j["time_limit_reached"], false);
  EXPECT_EQ(j["simulated_seconds"], 0.5);
  EXPECT_EQ(j["events"], 1234);
  EXPECT_EQ(j["noise_packets"], 7);
  EXPECT_EQ(j["noise_packets_received"], 6);
  EXPECT_EQ(j["rejected_packets"], 6);
}

TEST(ReportJson, AJobHasEveryCountAndItsSwitchesByName) {
  const ordered_json j = ordered_json::parse(to_json(small_result()));
  ASSERT_EQ(j["jobs"].size(), 1u);
  const ordered_json& job = j["jobs"][0];
  EXPECT_EQ(keys(job), (std::vector<std::string>{"name",
                                                 "algorithm",
                                                 "correct",
                                                 "rounds",
                                                 "completed_rounds",
                                                 "workers",
                                                 "tensor_bytes",
                                                 "warmup_rounds",
                                                 "values_per_packet",
                                                 "fragments",
                                                 "float_fragments",
                                                 "wrong_values",
                                                 "switch_aggregations",
                                                 "ps_packets_received",
                                                 "in_network_share",
                                                 "retransmissions",
                                                 "fast_retransmits",
                                                 "requested_resends",
                                                 "timeouts",
                                                 "final_requests",
                                                 "collisions",
                                                 "table_marks",
                                                 "reclaimed_aggregators",
                                                 "seconds",
                                                 "algbw_gbps",
                                                 "round_end_seconds",
                                                 "error"}));
  EXPECT_EQ(job["name"], "job1");
  EXPECT_EQ(job["tensor_bytes"], 4096);
  EXPECT_EQ(job["values_per_packet"], 64);
  EXPECT_EQ(job["fragments"], 48);
  EXPECT_EQ(job["retransmissions"], 2);
  EXPECT_EQ(job["algbw_gbps"], 0.375);
  EXPECT_EQ(job["round_end_seconds"], ordered_json::parse("[0.1, 0.2, 0.25]"));
  EXPECT_EQ(job["error"], "");
  // A std::map's order: by switch name.
  EXPECT_EQ(job["switch_aggregations"].dump(), R"({"s0":38,"s1":10})");
}

TEST(ReportJson, LinksAndFlowsHaveTheirCounters) {
  const ordered_json j = ordered_json::parse(to_json(small_result()));
  EXPECT_EQ(j["links"].dump(),
            R"([{"from":"h0","to":"s0","packets":96,"bytes":30000,"lost":1,"queue_drops":2,"ecn_marked":3,)"
            R"("duplicated":4}])");
  EXPECT_EQ(j["flows"].dump(),
            R"([{"from":"h2","to":"h3","start_seconds":0.0,"bytes":1000000,"seconds":0.5,"goodput_gbps":0.016,)"
            R"("interval_s":0.25,"goodput_mbps":[20.0,12.0]}])");
}

TEST(ReportJson, OneWrongJobMakesTheRunWrong) {
  ScenarioResult r = small_result();
  r.jobs.push_back(r.jobs.front());
  r.jobs.back().name = "job2";
  r.jobs.back().correct = false;
  r.jobs.back().error = "worker 1: round 2 differs";
  const ordered_json j = ordered_json::parse(to_json(r));
  EXPECT_EQ(j["correct"], false);
  EXPECT_EQ(j["jobs"][0]["correct"], true);
  EXPECT_EQ(j["jobs"][1]["error"], "worker 1: round 2 differs");
}

TEST(ReportJson, ReplansAndExcludedWorkersAppearOnlyWhenThereAreAny) {
  ScenarioResult r = small_result();
  r.jobs.front().replans = 2;
  r.jobs.front().excluded_workers = {{"h1", 4}};
  const ordered_json job = ordered_json::parse(to_json(r))["jobs"][0];
  const std::vector<std::string> k = keys(job);
  ASSERT_GE(k.size(), 4u);
  // replans just before error; excluded_workers after it.
  EXPECT_EQ((std::vector<std::string>(k.end() - 4, k.end())),
            (std::vector<std::string>{"round_end_seconds", "replans", "error", "excluded_workers"}));
  EXPECT_EQ(job["replans"], 2);
  EXPECT_EQ(job["excluded_workers"].dump(), R"([{"host":"h1","from_round":4}])");
  EXPECT_FALSE(job.contains("probe"));  // no probe's call times
}

TEST(ReportJson, OnlyNs3ReportsTheSimulatorsSpeed) {
  ScenarioResult r = small_result();
  r.wall_seconds = 2;
  r.link_packets = 1000;
  EXPECT_FALSE(ordered_json::parse(to_json(r)).contains("simulator"));  // wall-clock: differs between equal runs
  r.backend = "ns3";
  const ordered_json j = ordered_json::parse(to_json(r));
  EXPECT_EQ(keys(j).back(), "simulator");
  EXPECT_EQ(j["simulator"].dump(), R"({"wall_seconds":2.0,"link_packets":1000,"packets_per_wall_second":500.0})");
  r.wall_seconds = 0;  // no division by zero
  EXPECT_EQ(ordered_json::parse(to_json(r))["simulator"]["packets_per_wall_second"], 0.0);
}

TEST(ReportJson, ASeriesIsReportedWhenOneWasRecorded) {
  ScenarioResult r = small_result();
  EXPECT_FALSE(ordered_json::parse(to_json(r)).contains("series"));
  r.series_interval_s = 0.001;
  JobSeries s;
  s.name = "job1";
  s.goodput_gbps = {1.5};
  s.window_packets = {8};
  s.switch_aggregations = {100};
  s.ps_packets = {3};
  r.series.push_back(s);
  const ordered_json j = ordered_json::parse(to_json(r));
  EXPECT_EQ(keys(j).back(), "series");
  EXPECT_EQ(j["series"].dump(),
            R"({"interval_s":0.001,"jobs":[{"name":"job1","goodput_gbps":[1.5],"window_packets":[8.0],)"
            R"("switch_aggregations":[100],"ps_packets":[3]}]})");
}

TEST(ReportJson, AnEmptyResultIsIndentedByTwoAndEndsInANewline) {
  ScenarioResult r;
  r.backend = "loopback";
  EXPECT_EQ(to_json(r),
            "{\n"
            "  \"backend\": \"loopback\",\n"
            "  \"correct\": true,\n"
            "  \"leaked_aggregators\": 0,\n"
            "  \"time_limit_reached\": false,\n"
            "  \"simulated_seconds\": 0.0,\n"
            "  \"events\": 0,\n"
            "  \"host_dropped_packets\": 0,\n"
            "  \"noise_packets\": 0,\n"
            "  \"noise_packets_received\": 0,\n"
            "  \"rejected_packets\": 0,\n"
            "  \"restart_rejected_packets\": 0,\n"
            "  \"jobs\": [],\n"
            "  \"links\": [],\n"
            "  \"flows\": []\n"
            "}\n");
}

}  // namespace
}  // namespace atp
