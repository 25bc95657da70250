// Tests of the daemons' counters as messages (control/stats.h): both JSON codecs round trip, a
// missing, mistyped or unknown key is one sentence naming it, += sums counters and keeps gauges,
// and /metrics lists every number of the document. The daemons' own documents are checked word
// for word in switch_daemon_test and ps_daemon_test.
#include "atp/control/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "atp/control/control.h"
#include "support/exposition_format.h"

namespace atp::control {
namespace {

using nlohmann::json;

// Every number distinct, so that a field written under another's key shows.
SwitchStats sample_switch(bool udp) {
  SwitchStats s;
  s.name = "s0";
  if (udp) {
    s.data = SocketAddress::parse("127.0.0.1:9000");
  } else {
    s.interfaces = {"veth0", "veth1"};
  }
  s.threads = {{1, 2, 3}, {4, 5, 6}};
  s.pipeline = {10, 11, 12, 13, 14, 15, 16};
  s.unknown_source = 17;
  s.no_port = 18;
  s.truncated = 19;
  s.send_failed = 20;
  s.handoff_drops = 9;
  s.aggregators = 4096;
  s.aggregators_in_use = 21;
  s.ethernet = {22, 23, 24, 25, 26, 27, 28, 29};
  s.mac_addresses = 30;
  s.neighbors = 31;
  s.jobs = {{1, "a", true, {40, 41, 42, 43, 44, 45, 46, 47, 48, 49}},
            {7, "", false, {50, 51, 52, 53, 54, 55, 56, 57, 58, 59}}};
  for (PortId p = 0; p < 2; ++p) {
    SwitchPortStats row;
    row.port = p;
    if (udp) {
      if (p == 0) row.peer = SocketAddress::parse("127.0.0.1:40001");  // port 1 is detached
    } else {
      row.interface = s.interfaces[p];
    }
    const std::uint64_t b = 100 * (p + 1);
    row.rx_packets = b + 1;
    row.rx_bytes = b + 2;
    row.egress = {b + 3, b + 4, b + 5, b + 6, b + 7, b + 8, b + 9, b + 10};
    row.ingress = {0, 0, b + 11, b + 12, b + 13, b + 14, b + 15, b + 16};  // no packets or bytes: not in the document
    row.rx_kernel_drops = b + 17;
    s.ports.push_back(row);
  }
  return s;
}

PsStats sample_ps() {
  PsStats s;
  s.data = SocketAddress::parse("10.0.0.3:9000");
  s.uplink = SocketAddress::parse("10.0.0.4:9001");
  s.daemon = {1, 2, 3, 4, 5, 6, 7};
  s.jobs[1] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  s.jobs[300] = {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41};
  return s;
}

// The message `text` read with `read` fails with `message`.
template <class Read>
void expect_error(Read read, const std::string& text, const std::string& message) {
  try {
    read(text);
    ADD_FAILURE() << "accepted " << text;
  } catch (const ControlError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

// `doc` with `edit` applied, as text.
std::string edited(const std::string& text, const std::function<void(json&)>& edit) {
  json doc = json::parse(text);
  edit(doc);
  return doc.dump();
}

TEST(SwitchStats, RoundTripsOnBothKindsOfPorts) {
  for (const bool udp : {true, false}) {
    const std::string text = to_json(sample_switch(udp));
    const SwitchStats back = switch_stats_from_json(text);
    EXPECT_EQ(to_json(back), text);
    EXPECT_EQ(back.data.has_value(), udp);
    EXPECT_EQ(back.ports[1].egress.depth, 210u);
    EXPECT_EQ(back.ports[1].ingress.depth, 216u);
    EXPECT_EQ(back.jobs[1].counters.round_shape_mismatches, 59u);
    EXPECT_FALSE(back.jobs[1].installed);
  }
  const json doc = json::parse(to_json(sample_switch(true)));
  EXPECT_EQ(doc["ports"][0]["peer"], "127.0.0.1:40001");
  EXPECT_EQ(doc["ports"][1]["peer"], "");  // detached
  EXPECT_EQ(doc["ports"][1]["drops"], 205 + 206);
  EXPECT_EQ(doc["jobs"][0]["installed"], 1);
  EXPECT_EQ(doc["switch"]["send_failed"], 20);
  EXPECT_EQ(json::parse(to_json(sample_switch(false)))["ports"][1]["interface"], "veth1");
}

TEST(SwitchStats, AMissingMistypedOrUnknownKeyIsOneSentenceNamingIt) {
  const std::string text = to_json(sample_switch(true));
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["ports"][1].erase("tx_packets"); }),
               "ports[1].tx_packets: missing");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["switch"]["packets"] = "many"; }),
               "switch.packets: expected an integer, got \"many\"");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["jobs"][0]["aggregations"] = -1; }),
               "jobs[0].aggregations: must be between 0 and 18446744073709551615, got -1");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["threads"][0]["spare"] = 0; }),
               "threads[0].spare: unknown key (expected one of packets, handed_off, handoff_drops)");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["jobs"][0]["installed"] = 2; }),
               "jobs[0].installed: must be 0 or 1, got 2");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["ports"][0]["drops"] = 1; }),
               "ports[0].drops: must be queue_drops + lost (211), got 1");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["ports"][0]["peer"] = "nowhere"; }),
               "ports[0].peer: 'nowhere' is not an IPv4 address and port like 127.0.0.1:9000");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["ports"][0]["interface"] = "eth0"; }),
               "ports[0].interface: unknown key (expected one of rx_packets, rx_bytes, tx_packets, tx_bytes, "
               "queue_drops, lost, duplicated, reordered, ecn_marked, queue_depth, ingress_lost, "
               "ingress_queue_drops, ingress_duplicated, ingress_reordered, ingress_ecn_marked, "
               "ingress_queue_depth, rx_kernel_drops, port, drops, peer)");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d.erase("data"); }),
               "data: missing (or interfaces, on a switch of interface ports)");
  expect_error(switch_stats_from_json, "[]", "switch stats: expected a JSON object, got []");
}

TEST(SwitchStats, AddingSumsCountersAndKeepsGauges) {
  SwitchStats live = sample_switch(true);
  live.jobs.erase(live.jobs.begin() + 1);  // job 7 ran before the restart only
  live.ports.pop_back();                   // port 1 was attached before the restart only
  SwitchStats earlier = sample_switch(true);
  earlier.aggregators_in_use = 1000;
  earlier.threads = {{7, 7, 7}};
  const SwitchStats before = live;
  live += earlier;
  EXPECT_EQ(live.pipeline.packets, 2 * before.pipeline.packets);
  EXPECT_EQ(live.send_failed, 2 * before.send_failed);
  EXPECT_EQ(live.ethernet.neighbor_refused, 2 * before.ethernet.neighbor_refused);
  EXPECT_EQ(live.aggregators_in_use, before.aggregators_in_use);  // gauges: the live ones
  EXPECT_EQ(live.mac_addresses, before.mac_addresses);
  EXPECT_EQ(live.threads.size(), before.threads.size());
  ASSERT_EQ(live.jobs.size(), 2u);
  EXPECT_EQ(live.jobs[0].counters.aggregations, 80u);
  EXPECT_TRUE(live.jobs[0].installed);
  EXPECT_EQ(live.jobs[1].job, 7);
  EXPECT_FALSE(live.jobs[1].installed);
  EXPECT_EQ(live.jobs[1].counters.aggregations, 50u);
  ASSERT_EQ(live.ports.size(), 2u);
  EXPECT_EQ(live.ports[0].egress.packets, 2 * 103u);
  EXPECT_EQ(live.ports[0].ingress.lost, 2 * 111u);
  EXPECT_EQ(live.ports[0].egress.depth, 110u);  // a gauge
  EXPECT_EQ(live.ports[0].rx_kernel_drops, 2 * 117u);
  EXPECT_EQ(live.ports[1].rx_packets, 201u);
  // Nothing from before a restart on a switch that is down now: its retired counters alone.
  SwitchStats none;
  none += earlier;
  EXPECT_EQ(none.pipeline.packets, earlier.pipeline.packets);
  EXPECT_EQ(none.ports.size(), 2u);
  EXPECT_FALSE(none.jobs[0].installed);
}

// Rows only the earlier snapshot has go in their place: "jobs" and "ports" stay sorted by id.
TEST(SwitchStats, AddingKeepsJobsAndPortsSortedById) {
  SwitchStats live = sample_switch(true);
  live.jobs.erase(live.jobs.begin());  // job 1 and port 0 were there before the restart only
  live.ports.erase(live.ports.begin());
  live += sample_switch(true);
  ASSERT_EQ(live.jobs.size(), 2u);
  EXPECT_EQ(live.jobs[0].job, 1);
  EXPECT_FALSE(live.jobs[0].installed);
  EXPECT_EQ(live.jobs[1].job, 7);
  EXPECT_EQ(live.jobs[1].counters.aggregations, 2 * 50u);
  ASSERT_EQ(live.ports.size(), 2u);
  EXPECT_EQ(live.ports[0].port, 0);
  EXPECT_EQ(live.ports[0].rx_packets, 101u);
  EXPECT_EQ(live.ports[1].port, 1);
  EXPECT_EQ(live.ports[1].rx_packets, 2 * 201u);
}

// A job or port listed twice would be summed twice by += or shown twice: refused, naming it.
TEST(SwitchStats, AJobOrPortListedTwiceIsRefused) {
  const std::string text = to_json(sample_switch(true));
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["jobs"][1]["job"] = 1; }),
               "jobs[1].job: job 1 is in an earlier row too");
  expect_error(switch_stats_from_json, edited(text, [](json& d) { d["ports"].push_back(d["ports"][0]); }),
               "ports[2].port: port 0 is in an earlier row too");
}

// The samples of `metrics` (lines that are not comments), each with its labels as written.
std::vector<std::string> samples_of(const std::string& metrics) {
  std::vector<std::string> samples;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("#")) samples.push_back(line);
  }
  return samples;
}

// The checker the metrics tests lean on finds what a scraper refuses.
TEST(ExpositionFormat, TheCheckerFindsEachBrokenRule) {
  const std::string head = "# HELP a_total A.\n# TYPE a_total counter\n";
  EXPECT_EQ(test::exposition_errors(head + "a_total{x=\"1\"} 2\na_total{x=\"2\"} 3\n"), std::vector<std::string>{});
  for (const std::string& bad :
       {std::string("# HELP a A.\n# TYPE a counter\na 1\n"),                         // a counter without _total
        std::string("a_total 1\n") + head,                                           // a sample before its TYPE
        head + "a_total{x=\"1\"} 2\na_total{x=\"1\"} 3\n",                           // a series twice
        head + "a_total{x=\"\\q\"} 2\n",                                             // an escape the format lacks
        head + "a_total{__x=\"1\"} 2\n",                                             // a reserved label name
        head + "a_total one\n",                                                      // no number
        head + "# HELP b B.\n# TYPE b gauge\na_total 1\nb 1\na_total{x=\"2\"} 1\n",  // not contiguous
        std::string("# TYPE a_total counter\na_total 1\n"),                          // no HELP
        head + "a total\n"}) {
    EXPECT_FALSE(test::exposition_errors(bad).empty()) << bad;
  }
}

// A name with a double quote, a backslash and a line feed is escaped as the text format says.
TEST(SwitchStats, MetricsEscapeLabelValues) {
  SwitchStats s = sample_switch(true);
  s.name = "a\"b\\c\nd";
  const std::string metrics = to_prometheus(s);
  EXPECT_NE(metrics.find("atp_switch_packets_total{switch=\"a\\\"b\\\\c\\nd\"} 10\n"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("a\"b"), std::string::npos) << "a quote unescaped";
  EXPECT_EQ(test::exposition_errors(metrics), std::vector<std::string>{});
  const std::string plain = to_prometheus(sample_switch(true));  // named s0
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), std::count(plain.begin(), plain.end(), '\n'))
      << "a line feed unescaped";
}

// What a scraper requires, Prometheus' names (units, _total, a drop's reason as a label), and
// every number of the document once, but a removed job's: its series go with it.
TEST(SwitchStats, MetricsFollowPrometheusRulesAndListEveryNumber) {
  const SwitchStats s = sample_switch(true);
  const std::string metrics = to_prometheus(s);
  EXPECT_EQ(test::exposition_errors(metrics), std::vector<std::string>{}) << metrics;
  const std::vector<std::string> samples = samples_of(metrics);
  auto has = [&](const std::string& sample) {
    return std::find(samples.begin(), samples.end(), sample) != samples.end();
  };
  EXPECT_TRUE(has("atp_build_info{version=\"" ATP_VERSION "\"} 1")) << metrics;
  EXPECT_TRUE(has("atp_switch_dropped_packets_total{switch=\"s0\",reason=\"malformed\"} 11")) << metrics;
  EXPECT_TRUE(has("atp_switch_aggregators_in_use{switch=\"s0\"} 21"));
  EXPECT_TRUE(has("atp_switch_job_aggregations_total{switch=\"s0\",atp_job=\"a\",atp_job_id=\"1\"} 40")) << metrics;
  EXPECT_TRUE(has("atp_switch_jobs{switch=\"s0\"} 1"));
  EXPECT_TRUE(has("atp_switch_port_transmitted_bytes_total{switch=\"s0\",port=\"1\"} 204")) << metrics;
  EXPECT_TRUE(has("atp_switch_port_dropped_packets_total{switch=\"s0\",port=\"1\",reason=\"egress_queue_full\"} 206"))
      << metrics;
  EXPECT_TRUE(has("atp_switch_port_queue_depth_packets{switch=\"s0\",port=\"0\",direction=\"ingress\"} 116"))
      << metrics;
  EXPECT_EQ(metrics.find("atp_job_id=\"7\""), std::string::npos) << "job 7 is not installed: no series";
  // Every number of the document is one sample: the switch's, job 1's and each port's, but the
  // ports' "drops" (their drops by reason, summed) and the jobs' "installed" (atp_switch_jobs).
  const json doc = json::parse(to_json(s));
  std::size_t numbers = doc["switch"].size();
  for (const auto& [key, value] : doc["jobs"][0].items())
    numbers += value.is_number() && key != "job" && key != "installed";
  for (const json& port : doc["ports"]) {
    for (const auto& [key, value] : port.items()) numbers += value.is_number() && key != "port" && key != "drops";
  }
  EXPECT_EQ(samples.size(), numbers + 2) << "and atp_build_info and atp_switch_jobs";
}

TEST(PsStats, RoundTripsAndRefusesBadKeys) {
  const std::string text = to_json(sample_ps());
  const PsStats back = ps_stats_from_json(text);
  EXPECT_EQ(to_json(back), text);
  EXPECT_EQ(back.jobs.at(300).dropped, 41u);
  EXPECT_EQ(back.daemon.relayed_to_local_worker, 7u);
  EXPECT_EQ(back.uplink, SocketAddress::parse("10.0.0.4:9001"));
  EXPECT_EQ(ps_stats_from_json(edited(text, [](json& d) { d["uplink"] = ""; })).uplink, std::nullopt);
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["jobs"]["x"] = d["jobs"]["1"]; }),
               "jobs.x: not a job id (0..65535)");
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["jobs"]["70000"] = d["jobs"]["1"]; }),
               "jobs.70000: not a job id (0..65535)");
  // One spelling per job id: "01" was read as job 1 and merged with it.
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["jobs"]["01"] = d["jobs"]["1"]; }),
               "jobs.01: job 1 is written 1, without leading zeros");
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["jobs"]["00"] = d["jobs"]["1"]; }),
               "jobs.00: job 0 is written 0, without leading zeros");
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["jobs"]["1"].erase("stale"); }),
               "jobs.1.stale: missing");
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["daemon"]["extra"] = 1; }),
               "daemon.extra: unknown key (expected one of datagrams_received, malformed, unknown_job, "
               "foreign_source, datagrams_sent, send_failures, relayed_to_local_worker)");
  expect_error(ps_stats_from_json, edited(text, [](json& d) { d["data"] = 5; }), "data: expected a string, got 5");
}

TEST(PsStats, MetricsFollowPrometheusRulesAndListEveryNumber) {
  PsStats s = sample_ps();
  s.job_names[1] = "resnet";
  const std::string metrics = to_prometheus(s);
  EXPECT_EQ(test::exposition_errors(metrics), std::vector<std::string>{}) << metrics;
  const std::vector<std::string> samples = samples_of(metrics);
  auto has = [&](const std::string& sample) {
    return std::find(samples.begin(), samples.end(), sample) != samples.end();
  };
  EXPECT_TRUE(has("atp_ps_dropped_datagrams_total{reason=\"malformed\"} 2")) << metrics;
  EXPECT_TRUE(has("atp_ps_received_datagrams_total 1"));
  EXPECT_TRUE(has("atp_ps_jobs 2"));
  EXPECT_TRUE(has("atp_ps_job_dropped_packets_total{atp_job=\"resnet\",atp_job_id=\"1\",reason=\"stale\"} 19"))
      << metrics;
  EXPECT_TRUE(has("atp_ps_job_completions_total{atp_job=\"300\",atp_job_id=\"300\"} 33")) << "unnamed: the id";
  EXPECT_NE(metrics.find("# HELP atp_ps_relayed_datagrams_total "), std::string::npos);
  const json doc = json::parse(to_json(s));
  std::size_t numbers = doc["daemon"].size();
  for (const auto& [id, job] : doc["jobs"].items()) numbers += job.size() - 1;  // but its name
  EXPECT_EQ(samples.size(), numbers + 2) << "and atp_build_info and atp_ps_jobs";
}

}  // namespace
}  // namespace atp::control
