// The readers of a scenario file's sections (scenario_yaml.cc calls them in file order): the
// network (scenario_network.cc), the jobs (scenario_jobs.cc), faults and background traffic
// (scenario_faults.cc). Each throws ScenarioError naming the key path (yaml_fields.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <set>
#include <string>

#include "atp/scenario/scenario.h"

namespace atp::scenario_detail {

// The names the topology gave its switches and hosts, which later sections refer to.
struct Names {
  std::set<std::string> switches, hosts;
  bool is_switch(const std::string& n) const { return switches.count(n) != 0; }
  bool is_host(const std::string& n) const { return hosts.count(n) != 0; }
};

// `topology:`: its switches, hosts and switch-to-switch links, whose names it adds to `names`.
Topology parse_topology(const YAML::Node& node, const std::string& path, Names& names);
// `link:`: the settings of every link, and their MTU.
void parse_default_link(const YAML::Node& node, const std::string& path, Scenario& scenario);
// The settings of a link that `node` has (of `link:` or of a link fault: `faults_allowed`, loss,
// duplicate and reorder), into `o`.
void parse_link_settings(const YAML::Node& node, const std::string& path, LinkOverrides& o, bool faults_allowed);

// `jobs[index]`; `use` says which keys it needs.
ScenarioJob parse_job(const YAML::Node& node, const std::string& path, std::size_t index, const Names& names,
                      ScenarioUse use);
// `aggregator_sharing:` (nullptr where the file has none) applied to the jobs read.
void share_aggregators(const YAML::Node* node, const std::string& path, Scenario& scenario);

// One entry of `faults:`, added to the scenario's link faults, crashes, restarts or noise.
void parse_fault(const YAML::Node& node, const std::string& path, const Names& names, Scenario& scenario);
// One entry of `background:`.
BackgroundFlow parse_background(const YAML::Node& node, const std::string& path, const Names& names);

}  // namespace atp::scenario_detail
