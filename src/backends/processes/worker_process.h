// The worker process of the process backends (`atp worker --spec FILE`): what run_loopback tells it, and
// the lines it prints back. Both sides use this codec.
//
// Protocol, one JSON object per stdout line:
//   {"event": "ready"}                      its Communicator is bound; it now waits for "go\n" on stdin
//   {"event": "round", "round": k}          round k (0-based) completed and checked
//   {"event": "wait", "round": k}           its input and the answer of round k are ready; it waits
//                                           for "go\n" to start round k: the runner answers once
//                                           every live worker of the job waits
//   {"event": "alive"}                      every alive_every while it checks a round and prepares the
//                                           next (its compute phase, its input and the answer):
//                                           seconds, for a large job on a loaded machine
//   {"event": "failed", "round": k, "error": ...}
//                                           a protocol that re-forms (Rina): round k failed (no
//                                           progress: a worker gone); it
//                                           waits for "reform ..." or "stop" (then reports the error)
//   {"event": "result", ...}                the last line: see WorkerResult
// Every worker waits for "go" so that all start together: process start-up is not measured.
// The "wait" and "failed" lines of a protocol's worker also carry "next_seq" (Endpoint::resume_seq):
// where the job starts if the runner re-forms it (a protocol that re-forms: Rina's), which it does
// with one line to each worker left, "reform " + reform_json(...), in place of "go" or "stop"
// (docs/rina.md "Failures").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/io/socket_address.h"
#include "atp/plink/masters.h"
#include "atp/schedule/builders.h"
#include "atp/wire.h"

namespace atp::worker_process {

struct WorkerSpec {
  std::string algorithm = "atp";  // Algorithm::name: ATP's protocol runs a Communicator, the others a TCP collective
  JobId job = 0;                  // the job's id: its inputs' seed, and Gloo's rendezvous prefix
  double scale = 1e8;             // the job's fixed-point scale, which its exact results are checked with
  // An algorithm of a protocol (atp, ps, rina: Algorithm::protocol): this worker's endpoint config,
  // its part of the protocol's plan (EndpointJobPlan::workers; null for the others), its data
  // address and its ToR switch's data address (loopback; nullopt: hosts address each other by IP,
  // netns).
  nlohmann::json config;
  SocketAddress local;
  std::optional<SocketAddress> uplink;
  // Host collectives (ring, gloo): every rank's TCP address (ring) or this host's IP (gloo,
  // ranks[worker]), and gloo's rendezvous directory.
  std::vector<SocketAddress> ranks;
  RankGroups racks;     // host collectives: the job's racks (job_racks), which hierarchical ones follow
  int connections = 1;  // host collectives: per pair of ranks (ScenarioJob::connections)
  // PLink's Autotune (plink, plink_fa): after each round its "round" line carries what TCP measured
  // of its connections; the runner's "go" may carry the next round's master shares.
  bool autotune = false;
  std::string store_dir;
  // What it needs to regenerate every worker's inputs and check the results itself.
  std::uint64_t seed = 0;
  std::size_t worker = 0;   // index within the job
  std::size_t workers = 0;  // the job's worker count
  std::uint64_t elements = 0;
  std::uint32_t rounds = 0;
  std::uint32_t warmup_rounds = 0;  // the first rounds are not counted in allreduce_ns
  double magnitude = 1;
  Duration compute{0};                       // between rounds
  Duration start{0};                         // after "go", before round 0
  Duration alive_every{0};                   // between "alive" lines (0: none)
  std::optional<std::uint32_t> crash_round;  // reports a crash instead of starting this round
};

std::string to_json(const WorkerSpec& spec);
WorkerSpec spec_from_json(const std::string& text);  // throws std::exception naming the key

struct WorkerResult {
  bool correct = false;  // every round completed with the exact result
  bool crashed = false;  // stopped by the scenario's crash at_round
  std::uint32_t completed_rounds = 0;
  std::uint64_t retransmissions = 0, fast_retransmits = 0, requested_resends = 0, timeouts = 0, final_requests = 0,
                float_fragments = 0;
  std::uint64_t wrong_values = 0;  // in the rounds it checked (it stops after the first with any)
  // Time spent inside allreduce calls, all rounds: what the job's `seconds` is made of (the
  // checking between rounds is this harness's cost, not the collective's).
  std::int64_t allreduce_ns = 0;
  // Algorithm::timed_calls (probe): each call's time, [round][call], nanoseconds.
  std::vector<std::vector<std::int64_t>> call_ns;
  std::string error;  // why not correct
};

std::string result_line(const WorkerResult& result);
// A line the worker printed: its event ("ready", "round", "wait", "alive", "failed", "result"; "" if not
// one of its lines).
struct WorkerLine {
  std::string event;
  std::uint32_t round = 0;                              // "round", "wait", "failed"
  Seq next_seq = 0;                                     // "wait", "failed" of a Rina worker
  std::string error;                                    // "failed"
  WorkerResult result;                                  // "result"
  std::vector<TcpScheduleAllreduce::LinkSample> links;  // "round" of an Autotune worker: its connections
};
WorkerLine parse_line(const std::string& line);

// The runner's answer to an Autotune worker's "wait": "go" keeps its plan, "go " + shares_json()
// installs a new one. shares_from_json throws std::exception naming the key.
std::string shares_json(const plink::MasterShares& shares);
plink::MasterShares shares_from_json(const std::string& text);

// The job a worker goes on in after workers of its job were lost (a protocol that re-forms: Rina's).
struct Reform {
  nlohmann::json config;                // this worker's part of the new job's plan (its endpoint config)
  std::vector<std::uint32_t> excluded;  // the job's workers (indices) whose values are out from now on
  std::uint32_t round = 0;              // the round to go on from
};
std::string reform_json(const Reform& reform);     // one line, without "reform "
Reform reform_from_json(const std::string& text);  // throws std::exception naming the key

// The process body itself is atp::run_worker_process (atp/backends/processes.h), which `atp worker` calls.

}  // namespace atp::worker_process
