// Reads a scenario file's `jobs:` entries (hosts, sizes, rounds, transport and PLink's keys, each
// checked against the job's algorithm) and `aggregator_sharing:`, which shares the switches'
// aggregator tables among the jobs that aggregate in the network.
#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "atp/plink/aggregation.h"
#include "atp/plink/probing.h"
#include "atp/values_per_packet.h"
#include "scenario_sections.h"
#include "yaml_fields.h"

namespace atp::scenario_detail {
namespace {

std::vector<std::string> parse_host_list(const YAML::Node& node, const std::string& path, const Names& names) {
  const YAML::Node list = expect_list(node, path, true);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string p = item(path, i);
    std::string h = as_string(list[i], p);
    if (names.is_switch(h)) fail(p, "'" + h + "' is a switch, not a host");
    if (!names.is_host(h)) fail(p, "unknown host '" + h + "'");
    if (!seen.insert(h).second) fail(p, "host '" + h + "' is listed twice");
    out.push_back(std::move(h));
  }
  return out;
}

// The job's `algorithm:`, or the default.
const Algorithm& job_algorithm(const YAML::Node& node, const std::string& path) {
  if (!node["algorithm"]) return default_algorithm();
  const std::string p = child(path, "algorithm");
  const std::string name = as_string(node["algorithm"], p);
  const Algorithm* algorithm = find_algorithm(name);
  if (algorithm == nullptr) fail(p, "must be " + algorithm_names() + ", got '" + name + "'");
  return *algorithm;
}

// `workers:` and, where the algorithm has parameter servers, `ps:`.
void parse_job_hosts(const YAML::Node& node, const std::string& path, const Names& names, ScenarioJob& job) {
  JobSpec& spec = job.spec;
  spec.workers = parse_host_list(node["workers"], child(path, "workers"), names);
  if (job.algorithm->parameter_servers) {
    require(node, path, "ps");
    spec.ps = parse_host_list(node["ps"], child(path, "ps"), names);
  } else if (node["ps"]) {
    fail(child(path, "ps"), "algorithm " + std::string(job.algorithm->name) + " has no parameter server; remove ps");
  }
  for (std::size_t i = 0; i < spec.ps.size(); ++i) {
    for (const auto& w : spec.workers) {
      if (w == spec.ps[i] && spec.in_network_aggregation) {
        fail(item(child(path, "ps"), i), "host '" + w +
                                             "' is also a worker of this job; only algorithm ps (no in-network "
                                             "aggregation) may put a PS shard on a worker's host");
      }
    }
  }
}

// `rounds:` and `warmup_rounds:`; a probe sets its rounds from its workers instead.
void parse_job_rounds(const YAML::Node& node, const std::string& path, ScenarioJob& job) {
  if (job.algorithm->timed_calls != nullptr) {
    // The probe's rounds are its pairing rounds: every pair once.
    for (const char* key : {"rounds", "warmup_rounds"}) {
      if (node[key]) {
        fail(child(path, key), "algorithm " + std::string(job.algorithm->name) +
                                   " runs one round per pairing of its workers (every pair once); remove " + key);
      }
    }
    if (job.spec.workers.size() < 2) fail(child(path, "workers"), "a probe needs at least two workers");
    job.rounds = plink::probe_rounds(static_cast<int>(job.spec.workers.size()));
  }
  if (node["rounds"]) {
    job.rounds = static_cast<std::uint32_t>(as_integer(node["rounds"], child(path, "rounds"), 1, 1u << 20));
  }
  if (node["warmup_rounds"]) {
    job.warmup_rounds =
        static_cast<std::uint32_t>(as_integer(node["warmup_rounds"], child(path, "warmup_rounds"), 0, 1u << 20));
    if (job.warmup_rounds >= job.rounds) {
      fail(child(path, "warmup_rounds"), "must be fewer than rounds (" + std::to_string(job.rounds) + ")");
    }
  }
}

// What the job's packets carry and how it finds aggregators: `values_per_packet:`, `scale:`,
// `magnitude:` and `index:`.
void parse_job_values(const YAML::Node& node, const std::string& path, ScenarioJob& job) {
  JobSpec& spec = job.spec;
  if (node["values_per_packet"]) {
    const std::string p = child(path, "values_per_packet");
    const std::uint64_t values = as_integer(node["values_per_packet"], p, 0, std::numeric_limits<std::uint64_t>::max());
    if (const std::optional<std::string> bad = values_per_packet_error(values)) fail(p, *bad);  // the one check
    spec.values_per_packet = static_cast<std::uint16_t>(values);
  }
  if (node["scale"]) spec.scale = as_positive(node["scale"], child(path, "scale"));
  if (node["magnitude"]) {
    job.magnitude = as_number(node["magnitude"], child(path, "magnitude"), 0, 3.0e38,
                              "a non-negative number below the float32 maximum");
  }
  if (node["index"]) {
    const std::string p = child(path, "index");
    const std::string policy = as_string(node["index"], p);
    const std::optional<IndexPolicy> parsed = parse_index_policy(policy);
    if (!parsed) fail(p, "must be 'allocated', 'hashed', 'linear' or 'hashed_slots', got " + policy);
    spec.index_policy = *parsed;
  }
}

// How the job recovers losses and paces its sending: `loss_recovery:`, `congestion_control:`,
// `window:` and `max_window:`.
void parse_job_transport(const YAML::Node& node, const std::string& path, JobSpec& spec) {
  if (node["loss_recovery"]) {
    const std::string p = child(path, "loss_recovery");
    const std::string recovery = as_string(node["loss_recovery"], p);
    if (recovery == "atp") {
      spec.loss_recovery = LossRecovery::kAtp;
    } else if (recovery == "timeout") {
      spec.loss_recovery = LossRecovery::kTimeoutOnly;
    } else {
      fail(p, "must be 'atp' or 'timeout', got " + recovery);
    }
  }
  if (node["congestion_control"]) {
    spec.congestion.enabled = as_bool(node["congestion_control"], child(path, "congestion_control"));
  }
  if (node["window"]) {
    spec.congestion.initial_window =
        static_cast<std::uint32_t>(as_integer(node["window"], child(path, "window"), 1, 1u << 20));
  }
  if (node["max_window"]) {
    spec.congestion.max_window =
        static_cast<std::uint32_t>(as_integer(node["max_window"], child(path, "max_window"), 1, 1u << 20));
  }
  if (const std::optional<std::string> bad = window_error(spec.congestion)) {
    fail(child(path, node["max_window"] ? "max_window" : "window"), *bad);
  }
}

// The job's times and first sequence number: `compute_us:`, `start_us:`, `rto_us:`,
// `progress_timeout_us:` and `initial_seq:`.
void parse_job_times(const YAML::Node& node, const std::string& path, ScenarioJob& job) {
  JobSpec& spec = job.spec;
  if (node["compute_us"]) job.compute_time = as_microseconds(node["compute_us"], child(path, "compute_us"), true);
  if (node["start_us"]) job.start_time = as_microseconds(node["start_us"], child(path, "start_us"), true);
  if (node["rto_us"]) spec.retransmit_timeout = as_microseconds(node["rto_us"], child(path, "rto_us"), false);
  if (node["progress_timeout_us"]) {
    spec.progress_timeout = as_microseconds(node["progress_timeout_us"], child(path, "progress_timeout_us"), false);
  }
  if (node["initial_seq"]) {
    spec.initial_seq = static_cast<Seq>(as_integer(node["initial_seq"], child(path, "initial_seq"), 0, kU32Max));
  }
}

// PLink's keys, each refused for an algorithm it does not apply to (Algorithm's takes_grouping,
// tunes_masters, takes_connections): `grouping:` (plink), `autotune:` and `connections:` (plink,
// plink_fa).
void parse_plink_keys(const YAML::Node& node, const std::string& path, ScenarioJob& job) {
  const std::string algorithm(job.algorithm->name);
  if (node["grouping"]) {
    const std::string p = child(path, "grouping");
    if (!job.algorithm->takes_grouping) {
      fail(p, "is PLink's key (algorithm plink); algorithm " + algorithm + " does not group its workers that way");
    }
    const std::string grouping = as_string(node["grouping"], p);
    if (grouping == "topology") {
      job.grouping = JobGrouping::kTopology;
    } else if (grouping == "random") {
      job.grouping = JobGrouping::kRandom;
    } else if (grouping == "probe") {
      job.grouping = JobGrouping::kProbe;
    } else {
      fail(p, "must be 'topology' (the racks), 'random' (Balanced Random) or 'probe' (ProbeEmbed's groups), got " +
                  grouping);
    }
  }
  if (node["autotune"]) {
    const std::string p = child(path, "autotune");
    if (!job.algorithm->tunes_masters) {
      fail(p, "is PLink's key (algorithm plink or plink_fa); algorithm " + algorithm + " has no masters to move");
    }
    job.autotune = as_bool(node["autotune"], p);
  }
  if (node["connections"]) {
    const std::string p = child(path, "connections");
    if (!job.algorithm->takes_connections) {
      fail(p,
           "is PLink's key (algorithm plink or plink_fa); algorithm " + algorithm + " keeps one connection per pair");
    }
    job.connections = static_cast<int>(as_integer(node["connections"], p, 1, kMaxLanes));
  }
}

}  // namespace

ScenarioJob parse_job(const YAML::Node& node, const std::string& path, std::size_t index, const Names& names,
                      ScenarioUse use) {
  expect_map(node, path,
             {"name",
              "workers",
              "ps",
              "elements",
              "rounds",
              "values_per_packet",
              "scale",
              "magnitude",
              "index",
              "congestion_control",
              "loss_recovery",
              "window",
              "max_window",
              "compute_us",
              "start_us",
              "rto_us",
              "progress_timeout_us",
              "initial_seq",
              "algorithm",
              "warmup_rounds",
              "grouping",
              "autotune",
              "connections"});
  require(node, path, "workers");
  // A testbed's jobs are the ranks of the user's command: it decides what it sums.
  if (use == ScenarioUse::kRun) require(node, path, "elements");
  const Algorithm& algorithm = job_algorithm(node, path);
  ScenarioJob job =
      scenario_job(algorithm, index, node["name"] ? as_string(node["name"], child(path, "name")) : std::string());
  parse_job_hosts(node, path, names, job);
  // A few GiB of float32 per worker is far beyond what an in-process run can hold.
  if (node["elements"]) job.elements = as_integer(node["elements"], child(path, "elements"), 1, std::uint64_t(1) << 30);
  parse_job_rounds(node, path, job);
  parse_job_values(node, path, job);
  parse_job_transport(node, path, job.spec);
  parse_job_times(node, path, job);
  parse_plink_keys(node, path, job);
  return job;
}

// The K jobs with in-network aggregation (algorithm atp) share the aggregator tables:
// `aggregator_sharing: static` gives them, in file order, shares 0..K-1 of K (plan.h,
// AggregatorShare); `dynamic`, the default, lets every job use the whole table, each keeping to
// its part of it and starting on a K-th of the table of its own (JobSpec::sharing_jobs = K,
// sharing_index). Other algorithms use no aggregators.
void share_aggregators(const YAML::Node* node, const std::string& path, Scenario& scenario) {
  const std::string sharing = node ? as_string(*node, path) : "dynamic";
  if (sharing != "dynamic" && sharing != "static") fail(path, "must be 'dynamic' or 'static', got " + sharing);
  auto aggregates = [](const ScenarioJob& job) {
    return job.algorithm->parameter_servers && job.algorithm->in_network_aggregation;
  };
  const auto shares = static_cast<std::uint32_t>(std::count_if(scenario.jobs.begin(), scenario.jobs.end(), aggregates));
  std::uint32_t next = 0;
  for (ScenarioJob& job : scenario.jobs) {
    if (!aggregates(job)) continue;
    if (sharing == "static") {
      job.spec.aggregator_share = AggregatorShare{next++, shares};
    } else {
      job.spec.sharing_jobs = shares;
      job.spec.sharing_index = next++;
    }
  }
}

}  // namespace atp::scenario_detail
