// The allreduce algorithms a scenario job can name (`algorithm:`), as data: the one list that the
// parser, the reports, --help and every backend's refusal read. What an algorithm needs of a
// backend is said here; how a backend runs it is the backend's own (the process backends' worker
// makes an atp::Allreduce of it, ns-3 models the ring as TCP applications, inproc runs the
// protocols' endpoints only). Adding an algorithm: its code in its own folder, one entry in
// algorithm.cc (and for a new in-network protocol, one in atp/cluster/protocols.h's table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atp/schedule/builders.h"
#include "atp/schedule/schedule.h"

namespace atp {

struct Scenario;
struct ScenarioJob;
struct Topology;

// A job's workers by rack: the ranks (indices into its worker list) under each switch, in rank
// order, racks in the order of their first rank. Throws std::invalid_argument naming a worker that
// is no host of `topology`.
RankGroups job_racks(const Topology& topology, const std::vector<std::string>& workers);

// How a job's ranks are grouped for an algorithm that follows groups (`grouping:`).
enum class JobGrouping : std::uint8_t {
  kTopology,  // the racks (job_racks)
  kRandom,    // PLink's Balanced Random: sqrt(n) groups of the ranks dealt at random
  kProbe,     // PLink's ProbeEmbed: the groups of the workers' probed distances (ScenarioJob::probed_groups)
};

// The groups job `job` of `scenario` follows: its racks; for kRandom the Balanced Random groups
// drawn from the scenario's seed with the job's id (so every backend deals the same); for kProbe
// the job's probed_groups; for an algorithm of one group (Algorithm::one_group: PLink's FA) one
// group of every worker. Throws std::invalid_argument naming a worker that is no host of the
// topology, or a kProbe job whose groups were not probed.
RankGroups job_groups(const Scenario& scenario, const ScenarioJob& job);

// What an algorithm's hosts run, and so what a backend must offer to run it.
enum class AlgorithmRuntime : std::uint8_t {
  // An in-network protocol's endpoints (Algorithm::protocol: ATP's workers and PSes, Rina's
  // workers) with job entries on the switches, planned and made by the protocol table
  // (atp/cluster/protocols.h): every backend.
  kProtocol,
  // Gloo's library over TCP between the workers: real sockets, in a build with Gloo.
  kGloo,
  // A host collective built as an I/O-free schedule (src/schedule/) and run by the one executor
  // over TCP between the workers, which the switches forward like any traffic: on real sockets
  // (TcpScheduleAllreduce) and over ns-3's TCP (backends with TCP).
  kSchedule,
};

// How the workers check a round's result (atp/scenario/inputs.h, check_result).
enum class ResultCheck : std::uint8_t {
  kExact,            // the exact integer sum, or per fragment the float32 overflow path's (ATP's protocol)
  kFloat32Rounding,  // the float32 sum within its rounding bound: summed in float32 in another order (ring, Gloo)
};

struct Algorithm {
  std::string_view name;     // what `algorithm:` takes; JobResult::algorithm
  std::string_view summary;  // one line for --help
  AlgorithmRuntime runtime = AlgorithmRuntime::kProtocol;
  bool in_network_aggregation = false;  // the switches aggregate its packets (atp); else they only forward them
  ResultCheck check = ResultCheck::kExact;
  // The runtime's own name for it, where the runtime runs several: Gloo's "ring" or "halving_doubling".
  std::string_view variant = {};
  // Where it cannot run, the end of the refusal: what to use instead ("" where nothing is alike).
  std::string_view instead = {};
  // kProtocol: the in-network protocol its workers' endpoints speak, by its name in the
  // protocol table (atp/cluster/protocols.h), which brings its plan, endpoint and re-forming.
  std::string_view protocol = {};
  // Host collectives (kSchedule): one rank's schedule (builders.h), given the job's racks
  // (job_racks), which the hierarchical ones follow and the flat ones ignore, and its connections
  // per pair (ScenarioJob::connections: PLink's lanes; 1 for the others).
  Schedule (*schedule)(int rank, int size, std::size_t count, const RankGroups& racks, int connections) = nullptr;
  // A measurement rather than an allreduce (probe): a rank's round `round` is these calls, run one
  // after the other and each timed (JobResult::call_seconds), with no result to check; `schedule`
  // then names only whom to connect to.
  std::vector<Schedule> (*timed_calls)(int rank, int size, std::size_t count, std::uint32_t round) = nullptr;
  // kSchedule: its schedule follows the job's groups (the racks, or PLink's probed groups); a flat
  // one ignores them.
  bool follows_racks = false;
  // Its jobs name parameter servers (`ps:` in a file), which aggregate what the switches did not
  // (ATP's protocol). Else no PS runs: a ring of endpoints (Rina) or a host collective.
  bool parameter_servers = false;
  // kSchedule: its groups are all the workers in one, whatever the racks (PLink's FA, whose
  // masters Autotune moves within that group): what job_groups gives its jobs.
  bool one_group = false;
  // kSchedule: its groups may be other than the racks (`grouping:` random or probe, the PyTorch
  // backend's ATP_GROUPING=probe: PLink's 2LHA).
  bool takes_grouping = false;
  // kSchedule: its ranks may spread a pair's bytes over several TCP connections (`connections:`,
  // ATP_CONNECTIONS: PLink's lanes); the others keep one per pair.
  bool takes_connections = false;
  // kSchedule: Autotune may move its masters between rounds (`autotune:`: PLink's 2LHA and FA).
  bool tunes_masters = false;
};

// Every algorithm, in the order --help lists them; the first is the default. Gloo's are listed in
// every build, so that a file naming one on a build without Gloo is told so, not "unknown".
std::span<const Algorithm> algorithms();
const Algorithm& default_algorithm();  // atp
// By name; nullptr if there is none of that name.
const Algorithm* find_algorithm(std::string_view name);
// "atp, ps, ring, gloo or gloo_hd": the names, for messages.
std::string algorithm_names();

// What a backend offers the algorithms: each backend says it once (Backend::algorithm_support),
// and the refusals below are worded from it and the algorithms' data.
struct AlgorithmSupport {
  std::string_view where;     // the backend in a sentence: "the in-process network", "ns3"
  bool tcp = false;           // TCP between hosts: kSchedule runs
  bool real_sockets = false;  // real processes with real sockets: kGloo runs where the build has Gloo
  bool gloo_built = false;    // this build has Gloo (ATP_WITH_GLOO)
};

// "" when a backend offering `support` runs jobs of `algorithm`; else why not and what to use, as
// the end of a sentence that starts with the algorithm's name ("gloo is Gloo's code on ...").
std::string cannot_run(const Algorithm& algorithm, const AlgorithmSupport& support);
// The first job of `scenario` that a backend offering `support` cannot run, in one sentence
// naming its key ("jobs[1].algorithm: ring runs over TCP, ..."), or whose `grouping: probe` has
// no probed groups yet; "" when it runs every one.
std::string cannot_run_algorithms(const Scenario& scenario, const AlgorithmSupport& support);

}  // namespace atp
