// Scenario files (topology + jobs + faults, YAML) and their results. One format for every
// backend; this header has the format, the results and the report writers (the backends that
// run it are in atp/backends/).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "atp/plan/plan.h"
#include "atp/scenario/algorithm.h"
#include "atp/sim/simulated_network.h"  // sim::ChannelConfig: the links' settings

namespace atp {

// A bad scenario file: what() is one sentence naming the key and what is wrong with it.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ScenarioJob {
  JobSpec spec;  // name, id (1.. in file order), hosts, protocol settings
  // How its allreduce is done (`algorithm:`): never null, one of algorithms(). Every one runs on
  // the same hosts and switches, so they can be compared in one scenario.
  const Algorithm* algorithm = &default_algorithm();
  std::uint64_t elements = 0;  // float32 values per allreduce
  std::uint32_t rounds = 1;    // allreduce rounds (probe: plink::probe_rounds of its workers)
  // The first rounds run and are checked but not timed (process backends): connection set-up,
  // ARP and cold caches stay out of seconds and algbw, as in nccl-tests' warm-up iterations.
  std::uint32_t warmup_rounds = 0;
  double magnitude = 1.0;    // inputs are uniform in [-magnitude, magnitude]
  Duration compute_time{0};  // the "off" phase between a worker's rounds
  Duration start_time{0};    // when every worker starts round 0
  // PLink's groups (`grouping:`, algorithm plink only): the racks, the paper's Balanced Random
  // (sqrt(n) groups dealt at random from the scenario's seed), or ProbeEmbed's groups of the
  // workers' probed distances, which are filled in before the run (with_probed_groups,
  // atp/backends/discover.h): its ranks by group.
  JobGrouping grouping = JobGrouping::kTopology;
  RankGroups probed_groups;
  // PLink's Autotune (`autotune:`, plink and plink_fa): between rounds the masters move to where
  // the measured bandwidth is (atp/plink/autotune.h); every rank waits for the last before the
  // next round.
  bool autotune = false;
  // PLink's connections per pair of workers (`connections:`, plink and plink_fa; schedule.h's lanes):
  // chunks go round them. scenario_job() starts it at plink::kDefaultLanes; the other algorithms
  // keep one connection per pair.
  int connections = 1;
};

// The job `jobs[index]` of a scenario is before its own keys are read: of `algorithm`, id index + 1,
// with in-network aggregation where the algorithm has it, named `name` ("": "job<id>"). What the
// parser and the scenarios built in code (atp bench, atp demo) start every job from.
ScenarioJob scenario_job(const Algorithm& algorithm, std::size_t index, std::string name = "");

// Link settings a fault replaces; an unset field keeps the scenario's default.
struct LinkOverrides {
  std::optional<Duration> delay;
  std::optional<double> rate_gbps;
  std::optional<std::uint32_t> buffer_packets;
  std::optional<std::uint32_t> buffer_bytes;  // either buffer replaces the other (given_buffer_replaces)
  std::optional<std::uint32_t> ecn_threshold_packets;
  std::optional<double> loss;       // probability
  std::optional<double> duplicate;  // probability
  std::optional<double> reorder;    // probability

  void apply_to(EgressConfig& link) const;  // replaces the fields that are set
};

struct LinkFault {
  std::string a, b;      // the link's two ends (hosts or switches), in file order
  bool one_way = false;  // true: only the a -> b direction; false: both directions
  LinkOverrides overrides;
  Duration from{0};               // active from this simulated time
  std::optional<Duration> until;  // and back to the defaults at this time (unset: forever)

  // Whether it changes the link direction sender -> receiver.
  bool applies_to(const std::string& sender, const std::string& receiver) const;
  bool active_at(Duration t) const { return t >= this->from && !(until && t >= *until); }
};

struct CrashFault {
  std::string host;
  std::optional<std::uint32_t> at_round;  // stops before any of its workers starts this round (0-based)
  std::optional<Duration> at_time;        // stops at this simulated time
};

// A switch losing all its state at `at`, as when its process restarts: for `down` it drops every
// packet, then it comes back with an empty aggregator table and the control plane installs its
// jobs again. Jobs must complete through retransmission and PS fallback.
struct SwitchRestart {
  std::string switch_name;
  Duration at{0};
  Duration down{0};
};

// A host sending bad packets to its switch from `from` until `until`: malformed bytes, packets
// of installed jobs with spoofed worker and PS addresses, and packets of jobs nobody installed.
// Switches must count and drop every one without touching any job's result.
struct NoiseSource {
  std::string host;  // a host with no worker or PS role
  double rate_pps = 1000;
  Duration from{0};
  std::optional<Duration> until;
};

// A TCP flow between two hosts (`background:`), sharing the links and switch queues with the
// jobs: the competing traffic of the paper's Fig. 16. Runs from `from` until `until` or until
// every job has finished.
struct BackgroundFlow {
  std::string from, to;  // hosts
  Duration start{0};
  std::optional<Duration> until;
  // The sender's TCP: `congestion:` cubic (Linux's and ns-3's default), reno or bbr, and `ecn:`
  // whether it asks for ECN (and so backs off at the switches' marks, as ATP does). Named, not
  // left to the machine: a testbed whose kernel defaults to BBR gave another experiment.
  std::string congestion = "cubic";
  bool ecn = true;
};
// The congestion controls a background flow may name.
inline constexpr std::string_view kFlowCongestionControls[] = {"cubic", "reno", "bbr"};

// Links' MTU: Ethernet jumbo frames by default, as the testbed's; 1500 for standard Ethernet.
inline constexpr std::uint32_t kDefaultMtuBytes = 9000;
inline constexpr std::uint32_t kMinScenarioMtuBytes = 576;    // IPv4's least
inline constexpr std::uint32_t kMaxScenarioMtuBytes = 65000;  // what a simulated link carries

struct Scenario {
  std::uint64_t seed = 1;
  Topology topology;
  LinkOverrides link;  // `link:`: every link's delay/rate/buffer/ECN where it sets them (link_base)
  // `link: {mtu_bytes}`: the largest IP packet a link carries, on the simulated backends and the
  // testbed alike, so that default fragments are as wide on each (loopback keeps its own).
  std::uint32_t mtu_bytes = kDefaultMtuBytes;
  std::vector<ScenarioJob> jobs;
  std::vector<LinkFault> link_faults;
  std::vector<CrashFault> crashes;
  std::vector<SwitchRestart> restarts;
  std::vector<NoiseSource> noise;
  std::vector<BackgroundFlow> background;
  Duration time_limit = std::chrono::seconds(60);  // simulated
};

// A job's first RTO (JobSpec::retransmit_timeout) where its file sets no `rto_us`: before a round
// trip is measured the RTO is a guess, and the paper's 1 ms is far below a round trip on a slow
// link, where the first windows of all `workers` may cross one link (the PS's, a rack's uplink):
// at least the time they take there at `rate_gbps` (0: unlimited), so 18 ms for 8 workers at 200
// Mbit/s, and 1 ms for them from 4 Gbit/s up. (With 1 ms at 200 Mbit/s every fragment timed out
// before its result, and where every worker resends, every result carries the resend flag and no
// worker ever measures a round trip: the N-to-N PS on the testbed resent each fragment 7 times.)
Duration first_retransmit_timeout(double rate_gbps, std::size_t workers, const CongestionConfig& congestion);

// A link direction's settings before faults: `link:`'s, and where it sets no buffer or ECN
// threshold, the queue's own at that end: a switch port's (switch_port_egress: marks from a
// depth sized for `link:`'s rate, 20 packets at 1 Gbit/s and below; room for 1 MB), or a host
// NIC's (no limit, as a sender that waits for its queue). A host's NIC never marks (§3.7: marking
// is the switches'), whatever `link:` says, and serves its jobs in turn
// (ChannelConfig::fair_queueing, as a host's fq_codel).
sim::ChannelConfig link_base(const Scenario& s, bool from_host);
// `base` (a backend's view of link_base) with every fault of `faults` (indices
// into s.link_faults) active at `t` applied, in file order: the settings of a link direction
// (faults that apply_to it) at one time, the same way on every backend.
sim::ChannelConfig link_settings(const Scenario& s, std::span<const std::size_t> faults, Duration t,
                                 sim::ChannelConfig base);
// The indices of the faults that apply to the link direction from -> to, in file order.
std::vector<std::size_t> link_faults_of(const Scenario& s, const std::string& from, const std::string& to);

// What a scenario file is read for: a run of its jobs (`atp run`: each job needs `elements`), or a
// testbed whose jobs are the ranks of a user's command (`atp testbed`: `elements`, `rounds` and
// the like may be left out; they are not used).
enum class ScenarioUse : std::uint8_t { kRun, kTestbed };

// Throws ScenarioError. `source` names the text in syntax errors (a file name). A parsed
// scenario's memory need is checked against this machine's (check_scenario_memory).
Scenario parse_scenario_yaml(const std::string& text, const std::string& source = "scenario",
                             ScenarioUse use = ScenarioUse::kRun);
// Reads the file with read_config_file (a regular file of at most kMaxConfigFileBytes: not a
// device, FIFO or directory) and parses it. Throws ScenarioError naming the path or the key.
Scenario load_scenario_file(const std::string& path, ScenarioUse use = ScenarioUse::kRun);

// A lower bound of the memory (bytes) a run of `scenario` needs where one process holds every
// worker (inproc; the process backends hold the same on one machine, spread over processes):
// each worker's input, its endpoint's copy and result and its reference sums (44 B per value,
// plus 32 B per fragment), and every ATP switch's aggregator table (aggregators x (width x 4 B
// + the aggregator's state)). Saturates at 2^64 - 1.
std::uint64_t scenario_memory_bytes(const Scenario& scenario);
// Throws ScenarioError when scenario_memory_bytes exceeds `available` (0: unknown, no check): one
// sentence naming the key of the largest need (jobs[i].elements or topology.switches[i].aggregators)
// and the bytes needed, so that a run is refused before anything is allocated instead of being
// killed for memory.
void check_scenario_memory(const Scenario& scenario, std::uint64_t available);

// A worker a Rina job went on without (docs/rina.md "Failures"): its host crashed, and the ring
// of the others, re-formed, redid the rounds from `from_round` on without its values.
struct ExcludedWorker {
  std::string host;
  std::uint32_t from_round = 0;
};

struct JobResult {
  std::string name;
  bool correct = false;                // every round completed on every worker with the exact result
  std::uint32_t rounds = 0;            // rounds the scenario asked for
  std::uint32_t completed_rounds = 0;  // rounds that every worker completed
  std::size_t workers = 0;
  std::uint64_t tensor_bytes = 0;                            // float32 bytes per worker per round
  std::map<std::string, std::uint64_t> switch_aggregations;  // switch -> packets aggregated there
  std::uint64_t ps_packets_received = 0;
  std::uint64_t retransmissions = 0;  // over all workers, any reason (incl. float resends)
  // Of those, before the RTO (holes overdue after later results, probes). A host collective on
  // ns-3: its TCP connections' fast recoveries (retransmissions are not counted there).
  std::uint64_t fast_retransmits = 0;
  std::uint64_t requested_resends = 0;  // of those, asked for by the PS (docs/protocol.md "Resend requests")
  std::uint64_t timeouts = 0;           // retransmission timeouts fired, over all workers' flows (and ns-3's TCP's)
  // Rina: asks for a final a worker had not received (docs/rina.md, "Reliability"), over all
  // workers; loss recovery, as resends are: near 0 where nothing is lost. ATP, PS, ring: 0.
  std::uint64_t final_requests = 0;
  std::uint64_t collisions = 0;  // packets forwarded past a busy aggregator, over all switches
  // Aggregators its switches marked ECN as it held over an even share of a nearly full table
  // (SwitchJobCounters::table_marks), over all switches.
  std::uint64_t table_marks = 0;
  std::uint64_t float_fragments = 0;  // fragments that took the float32 overflow path, all rounds
  // Values of results that differed from the reference, summed over workers and the rounds they
  // checked (nccl-tests' #wrong); a worker stops after the first round with any.
  std::uint64_t wrong_values = 0;
  std::uint64_t reclaimed_aggregators = 0;  // of this job, freed by switches' reclaim timeout
  std::uint16_t values_per_packet = 0;      // the fragment width planned (0: a TCP collective, no fragments)
  std::uint64_t fragments = 0;              // fragments per round x completed rounds
  std::uint32_t warmup_rounds = 0;          // of the completed rounds, not timed (not in seconds, algbw)
  // inproc: simulated time from first start to last completion; loopback, netns: wall-clock time the slowest
  // worker spent inside allreduce calls (not the checking between rounds)
  double seconds = 0;
  double algbw_gbps = 0;  // tensor bits x timed completed rounds / seconds (nccl-tests' algbw)
  // Share of the worker packets that switches absorbed: (contributions - PS packets) /
  // (contributions - fragments); 1 = every fragment reached the PS fully aggregated, 0 = none.
  double in_network_share = 0;
  std::string error;              // why the job is not correct, if it is not
  std::string algorithm = "atp";  // Algorithm::name
  // Rina: workers whose host crashed and whom the others' ring went on without. Their rounds from
  // `from_round` on are the others' exact sum, and correct means that.
  std::vector<ExcludedWorker> excluded_workers;
  // Seconds from the start of the run at which each round was completed by every worker: the
  // job's progress over time, for goodput plots.
  std::vector<double> round_end_seconds;
  // Algorithm::timed_calls (probe): each worker's time for each call, [worker][round][call], in
  // seconds; plink::probe_samples makes the distances of them.
  std::vector<std::vector<std::vector<double>>> call_seconds;
  std::uint32_t replans = 0;  // PLink's Autotune: rounds that ran a new plan
};

// A background flow's outcome (netns backend).
struct FlowResult {
  std::string from, to;
  // When goodput_mbps's first sample begins, from the start of the run (the jobs' clock): its
  // sender's start (ns-3), its first byte's arrival (netns, where starting the two processes
  // and connecting takes tens of milliseconds or more on a busy machine).
  double start_seconds = 0;
  std::uint64_t bytes = 0;           // received by `to`
  double seconds = 0;                // from its first to its last byte
  double goodput_gbps = 0;           // bytes * 8 / seconds
  double interval_s = 0;             // the width of one goodput_mbps sample
  std::vector<double> goodput_mbps;  // received rate per interval, from the flow's start
};

// A job's progress per interval (`atp run --series`), for plots. One entry per interval from the
// start; the last may cover the time after the job finished.
struct JobSeries {
  std::string name;
  // Allreduce bytes each worker got back (mean over workers; ATP: distinct parameter packets x
  // values x 4 B, Rina: the values of the finals it recorded x 4 B) x 8 / interval
  std::vector<double> goodput_gbps;
  // Workers' mean congestion window at the interval's end (Rina: the reduce-scatter's)
  std::vector<double> window_packets;
  std::vector<std::uint64_t> switch_aggregations;  // gradient packets switches aggregated, over all switches
  std::vector<std::uint64_t> ps_packets;           // gradient packets its PSes received
};

// One direction of a link. bytes: inproc and the process backends count ATP bytes; ns3 whole
// packets as sent (IPv4/UDP or TCP headers and the 2-byte PPP header).
struct LinkResult {
  std::string from, to;
  std::uint64_t packets = 0, bytes = 0, lost = 0, queue_drops = 0, ecn_marked = 0;
  std::uint64_t duplicated = 0;  // extra copies the link's duplicate setting made (inproc, ns3)
};

// The links' counters summed over every direction.
struct LinkTotals {
  std::uint64_t packets = 0, bytes = 0, lost = 0, queue_drops = 0, ecn_marked = 0;
};
LinkTotals link_totals(const std::vector<LinkResult>& links);

struct ScenarioResult {
  std::string backend;
  std::vector<JobResult> jobs;
  std::vector<LinkResult> links;         // one per direction, in planned-link order
  std::vector<FlowResult> flows;         // one per background flow, in file order
  std::uint64_t leaked_aggregators = 0;  // still held after the final reclaim sweep
  // Packets hosts could not hand to any endpoint (netns: also what their sockets had no buffer for)
  std::uint64_t host_dropped_packets = 0;
  std::uint64_t noise_packets = 0;  // bad packets noise sources sent
  // Of those (with the copies a duplicating link made), the ones that reached a running switch:
  // not lost on the noise host's link and not arriving while its switch was down (a restart).
  // Every one must be rejected, so rejected_packets equals it when no job packet is rejected.
  std::uint64_t noise_packets_received = 0;
  // Packets switches counted and dropped as malformed, of an unknown job or not admitted on
  // their ingress port (noise, or packets of a job a restarted switch has not been given yet).
  // rejected_packets == noise_packets_received + restart_rejected_packets: anything else is a bug.
  std::uint64_t rejected_packets = 0;
  // Of those, the jobs' own packets that a restarted switch received before the control plane
  // had installed its jobs again (loopback, netns; the simulated switches come back with their jobs).
  std::uint64_t restart_rejected_packets = 0;
  bool time_limit_reached = false;
  double simulated_seconds = 0;
  std::uint64_t events = 0;
  double wall_seconds = 0;         // ns3: wall-clock time the simulation took
  std::uint64_t link_packets = 0;  // ns3: packets sent on all links (simulator speed = this / wall_seconds)
  double series_interval_s = 0;    // 0: no series recorded
  std::vector<JobSeries> series;   // one per ATP job, in file order
};

bool all_correct(const ScenarioResult& result);
// A result for `job` holding what the scenario says of it (name, algorithm, rounds, workers,
// tensor_bytes); every runner fills in the rest.
JobResult job_result_for(const ScenarioJob& job);
// Fills algbw_gbps and in_network_share from the counts and seconds a runner measured.
void derive_rates(JobResult& job);
std::string to_json(const ScenarioResult& result);     // pretty, stable key order
std::string to_summary(const ScenarioResult& result);  // a short human table

}  // namespace atp
