// The ATP_* environment variables of the "atp" backend (options.h), each read and checked here, so
// that a wrong one is said in one sentence before the rank talks to anyone.
#include "options.h"

#include <torch/python.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "atp/io/socket_address.h"
#include "atp/io/udp_socket.h"
#include "atp/scenario/scenario.h"
#include "atp/schedule/schedule.h"
#include "atp/wire.h"

namespace atp::torch_backend {
namespace {

SocketAddress env_endpoint(const char* name, const std::string& value) {
  try {
    return SocketAddress::parse(value);
  } catch (const std::invalid_argument&) {
    TORCH_CHECK(false, "atp: ", name, "='", value, "' is not HOST:PORT like 127.0.0.1:9100");
  }
}

double env_number(const char* name, double min, double max) {
  const std::string value = env(name);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  TORCH_CHECK(!value.empty() && end == value.c_str() + value.size() && v >= min && v <= max, "atp: ", name, "='", value,
              "' must be a number from ", min, " to ", max);
  return v;
}

// ATP_TOPOLOGY: a scenario file (`atp run`'s format). Its topology is the network rank 0 starts,
// its first job's workers are the ranks' hosts in rank order, and its PS the job's.
ClusterJobOptions::LocalNetwork network_from_scenario_file(const std::string& path) {
  Scenario scenario;
  try {
    scenario = load_scenario_file(path);
  } catch (const ScenarioError& e) {
    TORCH_CHECK(false, "atp: ATP_TOPOLOGY: ", e.what());
  }
  TORCH_CHECK(!scenario.jobs.empty(), "atp: ATP_TOPOLOGY=", path,
              " has no jobs; the first job's workers are the ranks' hosts and its ps their PS");
  const JobSpec& job = scenario.jobs.front().spec;
  TORCH_CHECK(job.ps.size() == 1, "atp: ATP_TOPOLOGY=", path, ": jobs[0] names ", job.ps.size(),
              " PS hosts; the ranks' job has one (ps: [HOST])");
  return {scenario.topology, job.workers, job.ps.front()};
}

// What a group runs of the scenario's algorithms (atp/scenario/algorithm.h): an in-network
// protocol's endpoints, through ClusterJob, or an allreduce schedule over TCP between the ranks.
bool group_runs(const Algorithm& a) {
  return a.runtime == AlgorithmRuntime::kProtocol ||
         (a.runtime == AlgorithmRuntime::kSchedule && a.timed_calls == nullptr);
}

// Where the job's switches and PS are: ATP_TESTBED (`atp testbed`'s), ATP_SWITCH, ATP_PS and
// ATP_SWITCHES (running ones), or none of them with ATP_LOCAL=1 (rank 0 starts its own).
void cluster_from_environment(ClusterJobOptions& o) {
  const std::string switch_control = env("ATP_SWITCH"), ps_control = env("ATP_PS");
  if (const std::string testbed = env("ATP_TESTBED"); !testbed.empty()) {
    // `atp testbed` set these: its runner installs the job over the testbed's switches and PS.
    TORCH_CHECK(!o.local && switch_control.empty() && ps_control.empty() && env("ATP_SWITCHES").empty(),
                "atp: ATP_TESTBED (set by `atp testbed`) names the cluster already: unset ATP_LOCAL, ATP_SWITCH, ",
                "ATP_PS and ATP_SWITCHES");
    const std::string host = env("ATP_HOST");
    TORCH_CHECK(!host.empty(), "atp: ATP_TESTBED is set but ATP_HOST is not: run the command through `atp testbed`, ",
                "which sets both");
    o.testbed = ClusterJobOptions::Testbed{testbed, host};
  } else if (!o.local) {
    TORCH_CHECK(!switch_control.empty() && !ps_control.empty(),
                "atp: set ATP_SWITCH and ATP_PS to the control addresses (HOST:PORT) of a running `atp switch` and "
                "`atp ps`, or ATP_LOCAL=1 to have rank 0 start a switch and a PS itself");
    o.switch_control = env_endpoint("ATP_SWITCH", switch_control);
    o.ps_control = env_endpoint("ATP_PS", ps_control);
    // HOST:PORT,HOST:PORT,...: the switches between the ranks' racks and the PS's (a core).
    const std::string more = env("ATP_SWITCHES");
    for (std::size_t at = 0; !more.empty() && at <= more.size();) {
      const std::size_t comma = std::min(more.find(',', at), more.size());
      o.switches.push_back(env_endpoint("ATP_SWITCHES", more.substr(at, comma - at)));
      at = comma + 1;
    }
  } else {
    TORCH_CHECK(env("ATP_SWITCHES").empty(), "atp: ATP_SWITCHES names running switches; ATP_LOCAL=1 starts its own");
  }
}

}  // namespace

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::uint32_t bind_ip_from_environment() {
  if (const std::string bind = env("ATP_BIND"); !bind.empty()) return env_endpoint("ATP_BIND", bind + ":0").ip;
  if (const std::string master = env("MASTER_ADDR"); !env("ATP_SWITCH").empty() && !master.empty()) {
    try {
      return source_address_towards(SocketAddress::parse(master + ":" + std::to_string(kUdpPort)));
    } catch (const std::exception&) {  // a host name, or no route: torch says so when it connects
    }
  }
  return ClusterJobOptions{}.bind_ip;
}

const Algorithm& algorithm_from_environment() {
  const std::string name = env("ATP_ALGORITHM");
  const Algorithm* algorithm = name.empty() ? &default_algorithm() : find_algorithm(name);
  if (algorithm == nullptr || !group_runs(*algorithm)) {
    std::string names;
    for (const Algorithm& a : algorithms())
      names += group_runs(a) ? (names.empty() ? "" : ", ") + std::string(a.name) : "";
    TORCH_CHECK(false, "atp: ATP_ALGORITHM='", name, "' must be one of ", names,
                " (atp, the default: in-network aggregation towards the PS; docs/pytorch.md)");
  }
  return *algorithm;
}

ClusterJobOptions options_from_environment(Duration timeout) {
  ClusterJobOptions o;
  o.timeout = timeout;
  const std::string local = env("ATP_LOCAL");
  TORCH_CHECK(local.empty() || local == "0" || local == "1", "atp: ATP_LOCAL='", local, "' must be 1 or 0");
  o.local = local == "1";
  if (const std::string topology = env("ATP_TOPOLOGY"); !topology.empty()) {
    TORCH_CHECK(o.local, "atp: ATP_TOPOLOGY is the network that ATP_LOCAL=1 starts on rank 0: set ATP_LOCAL=1 too ",
                "(a job on running switches finds their links from the switches' configs)");
    o.local_network = network_from_scenario_file(topology);
  }
  cluster_from_environment(o);
  o.bind_ip = bind_ip_from_environment();
  const Algorithm& algorithm = algorithm_from_environment();
  o.protocol = algorithm.protocol;
  o.in_network_aggregation = algorithm.in_network_aggregation;
  if (!env("ATP_VALUES_PER_PACKET").empty()) {
    o.values_per_packet = static_cast<std::uint16_t>(env_number("ATP_VALUES_PER_PACKET", 1, kMaxValuesPerPacket));
  }
  if (!env("ATP_SCALE").empty()) o.scale = env_number("ATP_SCALE", 1, 1e9);
  if (!env("ATP_RTO_MS").empty()) {
    o.retransmit_timeout =
        std::chrono::microseconds(static_cast<std::int64_t>(env_number("ATP_RTO_MS", 0.01, 10000) * 1000));
  }
  return o;
}

// ATP_ALGORITHM=ring, halving_doubling, hierarchical, plink or plink_fa: a host collective over TCP
// between the ranks, no switch adding: the flat ring and halving-doubling, the baseline Rina is
// measured against (docs/baselines.md), Horovod's and NCCL's hierarchical allreduce (a
// reduce-scatter inside each rack, an allreduce across the racks, an allgather inside); PLink's
// two-level aggregation over the racks, or its flat aggregation (docs/plink.md). Each rank of one
// that follows racks names its rack in ATP_RACK (ranks with the same name share one); the ranks
// meet in the group's store, each listening on ATP_BIND (default 127.0.0.1) at a port the kernel
// picks. ATP_GROUPING=probe (plink) groups the ranks by PLink's probes instead (host_collective.h).
// All checked before any rank talks to the store: a rank that fails later leaves the others waiting
// on keys it never sets (rank 0, which serves the store, gone).
HostCollectiveOptions host_collective_options_from_environment(const Algorithm& algorithm) {
  const std::string name(algorithm.name);
  HostCollectiveOptions o;
  o.bind_ip = bind_ip_from_environment();
  const std::string grouping = env("ATP_GROUPING");
  TORCH_CHECK(grouping.empty() || grouping == "racks" || grouping == "probe", "atp: ATP_GROUPING must be racks or ",
              "probe, got '", grouping, "'");
  TORCH_CHECK(grouping != "probe" || algorithm.takes_grouping,
              "atp: ATP_GROUPING=probe groups the ranks of ATP_ALGORITHM=plink; ", "ATP_ALGORITHM is ", name);
  o.probe_groups = grouping == "probe";
  if (const std::string text = env("ATP_CONNECTIONS"); !text.empty()) {
    TORCH_CHECK(algorithm.takes_connections, "atp: ATP_CONNECTIONS is PLink's (ATP_ALGORITHM=plink or ",
                "plink_fa); ATP_ALGORITHM is ", name);
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), o.connections);
    TORCH_CHECK(
        error == std::errc() && end == text.data() + text.size() && o.connections >= 1 && o.connections <= kMaxLanes,
        "atp: ATP_CONNECTIONS='", text, "' must be a whole number of connections per pair from 1 to ", kMaxLanes);
  }
  if (!o.probe_groups) {
    // Unset, a rank's switch (ATP_SWITCH, the same address on the ranks of one rack) names its rack.
    o.rack = env("ATP_RACK").empty() ? env("ATP_SWITCH") : env("ATP_RACK");
    if (!algorithm.follows_racks) o.rack = "all";
    TORCH_CHECK(!o.rack.empty(), "atp: ATP_ALGORITHM=", name, " needs ATP_RACK on every rank: the name of its rack ",
                "(ranks with the same name are one rack), or ATP_SWITCH, its rack's switch",
                algorithm.takes_grouping ? ", or ATP_GROUPING=probe" : "");
  }
  return o;
}

}  // namespace atp::torch_backend
