// Reads scenario files (YAML) into a Scenario and checks everything the file alone can tell:
// types, ranges, names, unknown keys. Every error is one sentence that starts with the key path.
// The sections have readers of their own (scenario_sections.h), the values one set of strict
// readers (yaml_fields.h); here are the file's top level and the check of its memory need.
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "atp/io/config_file.h"
#include "atp/io/machine.h"
#include "atp/scenario/scenario.h"
#include "atp/values_per_packet.h"
#include "saturating.h"
#include "scenario_sections.h"
#include "yaml_fields.h"

namespace atp {
// The file's top level and the memory estimates, beside the readers of its sections.
namespace scenario_detail {
namespace {

Scenario parse_root(const YAML::Node& root, ScenarioUse use) {
  if (!root.IsMap()) {
    throw ScenarioError(
        "scenario: the file must be a YAML map with keys seed, topology, jobs (and optionally "
        "link, faults, time_limit_s), got " +
        describe(root));
  }
  expect_map(root, "",
             {"description", "seed", "time_limit_s", "link", "topology", "jobs", "aggregator_sharing", "faults",
              "background"});
  require(root, "", "topology");  // jobs may be left out: atp discover needs only the network
  Scenario scenario;
  if (root["description"]) as_string(root["description"], "description");
  if (root["seed"]) scenario.seed = as_integer(root["seed"], "seed", 0, std::numeric_limits<std::uint64_t>::max());
  if (root["time_limit_s"]) {
    double s = as_number(root["time_limit_s"], "time_limit_s", 0, 1e6, "a positive number of seconds (at most 1e6)");
    if (s == 0) fail("time_limit_s", "must be a positive number of seconds (at most 1e6), got 0");
    scenario.time_limit = Duration(static_cast<std::int64_t>(std::llround(s * 1e9)));
  }
  if (root["link"]) parse_default_link(root["link"], "link", scenario);

  Names names;
  scenario.topology = parse_topology(root["topology"], "topology", names);

  const YAML::Node jobs = root["jobs"] ? expect_list(root["jobs"], "jobs", true) : YAML::Node(YAML::NodeType::Sequence);
  if (jobs.size() > std::numeric_limits<JobId>::max()) fail("jobs", "too many jobs (job ids are 16 bits)");
  std::set<std::string> job_names;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    ScenarioJob job = parse_job(jobs[i], item("jobs", i), i, names, use);
    if (!jobs[i]["rto_us"]) {
      job.spec.retransmit_timeout =
          first_retransmit_timeout(scenario.link.rate_gbps.value_or(0), job.spec.workers.size(), job.spec.congestion);
    }
    if (!job_names.insert(job.spec.name).second) {
      fail(child(item("jobs", i), "name"), "the job name '" + job.spec.name + "' is already used");
    }
    scenario.jobs.push_back(std::move(job));
  }
  const YAML::Node sharing = root["aggregator_sharing"];
  share_aggregators(sharing ? &sharing : nullptr, "aggregator_sharing", scenario);

  if (root["faults"]) {
    const YAML::Node faults = expect_list(root["faults"], "faults", false);
    for (std::size_t i = 0; i < faults.size(); ++i) parse_fault(faults[i], item("faults", i), names, scenario);
  }
  if (root["background"]) {
    const YAML::Node flows = expect_list(root["background"], "background", false);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      scenario.background.push_back(parse_background(flows[i], item("background", i), names));
    }
  }
  check_scenario_memory(scenario, physical_memory_bytes());
  return scenario;
}

// --- memory

// Per value of a worker's tensor: the round driver's input (4 B), the endpoint's copy (4 B) and
// result (4 B), and the round's reference (int64 sum, double float sum and |x| sum: 24 B) with
// the inputs and quantized values make_reference regenerates (8 B). A process backend's worker
// holds a reference of its own, so it is counted per worker.
constexpr std::uint64_t kBytesPerWorkerValue = 44;
constexpr std::uint64_t kBytesPerWorkerFragment = 32;  // the endpoint's per-fragment state, about
// An aggregator's state besides its values: the Aggregator and its place on the age list.
constexpr std::uint64_t kBytesPerAggregator = sizeof(Aggregator) + 2 * sizeof(std::uint32_t);

std::uint64_t job_memory_bytes(const ScenarioJob& job) {
  // Unset (0), planning chooses the width; the paper's 62 is narrower than what it chooses on
  // any backend but one with switches narrower than that, and the fragments' share is small.
  const std::uint64_t vpp = job.spec.values_per_packet != 0 ? job.spec.values_per_packet : kDefaultValuesPerPacket;
  const std::uint64_t fragments = job.elements / vpp + 1;
  const std::uint64_t per_worker = saturating_add(saturating_mul(job.elements, kBytesPerWorkerValue),
                                                  saturating_mul(fragments, kBytesPerWorkerFragment));
  return saturating_mul(per_worker, job.spec.workers.size());
}

std::uint64_t switch_memory_bytes(const SwitchSpec& sw) {
  if (!sw.config.atp_capable) return 0;  // a plain switch allocates no table
  const std::uint64_t per = std::uint64_t{sw.config.aggregator_width} * sizeof(std::int32_t) + kBytesPerAggregator;
  return saturating_mul(sw.config.num_aggregators, per);
}

}  // namespace
}  // namespace scenario_detail

std::uint64_t scenario_memory_bytes(const Scenario& scenario) {
  using scenario_detail::saturating_add;
  std::uint64_t total = 0;
  for (const ScenarioJob& job : scenario.jobs) total = saturating_add(total, scenario_detail::job_memory_bytes(job));
  for (const SwitchSpec& sw : scenario.topology.switches) {
    total = saturating_add(total, scenario_detail::switch_memory_bytes(sw));
  }
  return total;
}

void check_scenario_memory(const Scenario& scenario, std::uint64_t available) {
  const std::uint64_t needed = scenario_memory_bytes(scenario);
  if (available == 0 || needed <= available) return;
  std::string key;
  std::uint64_t largest = 0;
  for (std::size_t i = 0; i < scenario.jobs.size(); ++i) {
    const std::uint64_t b = scenario_detail::job_memory_bytes(scenario.jobs[i]);
    if (b > largest) {
      largest = b;
      key = scenario_detail::item("jobs", i) + ".elements";
    }
  }
  for (std::size_t i = 0; i < scenario.topology.switches.size(); ++i) {
    const std::uint64_t b = scenario_detail::switch_memory_bytes(scenario.topology.switches[i]);
    if (b > largest) {
      largest = b;
      key = scenario_detail::item("topology.switches", i) + ".aggregators";
    }
  }
  scenario_detail::fail(
      key, "the scenario needs at least " + std::to_string(needed) +
               " bytes of memory (inputs, results and reference sums of every worker, and every ATP switch's "
               "aggregator table; " +
               std::to_string(largest) + " of them here), more than the " + std::to_string(available) +
               " bytes this machine has");
}

Scenario parse_scenario_yaml(const std::string& text, const std::string& source, ScenarioUse use) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // e.mark is 0-based; editors count from 1.
    std::ostringstream msg;
    msg << source << ": line " << e.mark.line + 1 << ", column " << e.mark.column + 1 << ": not valid YAML (" << e.msg
        << ")";
    throw ScenarioError(msg.str());
  }
  try {
    return scenario_detail::parse_root(root, use);
  } catch (const YAML::Exception& e) {
    // Anything yaml-cpp itself rejects while walking the tree (should not happen: types are checked first).
    throw ScenarioError(source + ": " + e.msg);
  }
}

Scenario load_scenario_file(const std::string& path, ScenarioUse use) {
  std::string text;
  try {
    text = read_config_file(path);
  } catch (const ConfigFileError& e) {
    throw ScenarioError(e.what());  // one sentence naming the path
  }
  return parse_scenario_yaml(text, path, use);
}

}  // namespace atp
