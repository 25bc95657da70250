// Scenario files (topology + jobs + faults, YAML) and their results. One format for every
// backend; this header has the format and the in-process backend.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/plan.h"
#include "atp/runtime/inproc_network.h"

namespace atp {

// A bad scenario file: what() is one sentence naming the key and what is wrong with it.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ScenarioJob {
  JobSpec spec;
  std::uint64_t elements = 0;   // float32 values per allreduce
  std::uint32_t rounds = 1;     // allreduce rounds
  double magnitude = 1.0;       // inputs are uniform in [-magnitude, magnitude]
  Duration compute_time{0};     // the "off" phase between rounds
  Duration start_time{0};
};

struct LinkFault {
  std::string a, b;             // applies in both directions
  inproc::ChannelConfig config; // only the fault fields are taken from here
};

struct CrashFault {
  std::string host;
  std::optional<std::uint32_t> at_round;  // stops before starting this round (0-based)
  std::optional<Duration> at_time;
};

struct Scenario {
  std::uint64_t seed = 1;
  Topology topology;
  inproc::ChannelConfig default_link;   // delay/rate/buffer/ECN of every link
  std::vector<ScenarioJob> jobs;
  std::vector<LinkFault> link_faults;
  std::vector<CrashFault> crashes;
  Duration time_limit = std::chrono::seconds(60);  // simulated
};

// Throws ScenarioError.
Scenario parse_scenario_yaml(const std::string& text);
Scenario load_scenario_file(const std::string& path);

struct JobResult {
  std::string name;
  bool correct = false;
  std::uint32_t completed_rounds = 0;
  std::map<std::string, std::uint64_t> switch_aggregations;  // switch -> packets aggregated there
  std::uint64_t ps_packets_received = 0;
  std::uint64_t retransmissions = 0;
  std::uint64_t collisions = 0;
  std::uint64_t float_fragments = 0;  // fragments that took the float32 overflow path
  std::uint64_t fragments = 0;        // fragments per round x completed rounds
  double seconds = 0;                 // simulated time from first start to last completion
  std::string error;                  // why the job did not complete, if it did not
};

struct LinkResult {
  std::string from, to;
  std::uint64_t packets = 0, bytes = 0, lost = 0, ecn_marked = 0;
};

struct ScenarioResult {
  std::string backend;
  std::vector<JobResult> jobs;
  std::vector<LinkResult> links;
  std::uint64_t leaked_aggregators = 0;
  double simulated_seconds = 0;
  std::uint64_t events = 0;
};

ScenarioResult run_inproc(const Scenario& scenario);

std::string to_json(const ScenarioResult& result);     // pretty, stable key order
std::string to_summary(const ScenarioResult& result);  // a short human table

}  // namespace atp
