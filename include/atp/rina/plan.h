// Rina's job plan (docs/rina.md): a job's ring of racks and single workers on a planned network,
// what each worker (RinaConfig) and each switch on their paths is given, and the job a ring
// re-forms into when workers are gone. Standard library only, like the plan it builds on.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "atp/plan/plan.h"
#include "atp/rina/worker.h"

namespace atp {

// A Rina worker's windows stop at this many fragments unless its job names a max_window: where no
// switch marks ECN (the scenario files' default links) a timeout is a window's only brake, and a
// Rina resend that comes too early sends the sum waiting for it on without the workers still
// queued (docs/rina.md). Measured on a k=4 fat-tree at 100 Gbit/s, 97.5 MiB per worker, four ToRs
// aggregating: 23.6 Gbit/s and 11,417 resends with ATP's 1024, 44.4 and 1,733 with 256, 46.6 and
// 24 with 64; the BOM gives 55.0. 64 fragments of 16 KB are four times a 20 us round trip's worth
// at 100 Gbit/s.
inline constexpr std::uint32_t kRinaMaxWindow = 64;

// A Rina job (docs/rina.md): its ring and what each worker and switch is given.
struct RinaJobPlan {
  std::uint16_t values_per_packet = 0;              // JobSpec's, or the width fragment_width chose
  std::vector<std::vector<std::uint32_t>> members;  // the ring (RinaConfig::members)
  std::vector<RinaConfig> workers;                  // same order as JobSpec::workers
  std::map<std::string, SwitchJobPlan> switches;    // every switch on a path between two workers
};

// The ring of a job: each rack whose ToR is ATP-capable and holds two or more of its workers is one
// member (unless JobSpec::in_network_aggregation is false: then every worker is its own, a plain
// ring), every other worker one of its own, ordered by their first worker. Its PS list is ignored.
// Throws PlanError as plan_job does (a worker that is no host, more than 32 workers in a rack, a
// fragment wider than a rack's aggregators or the MTU).
RinaJobPlan plan_rina_job(const NetworkPlan& network, const JobSpec& job);

// The job a Rina ring re-forms into when some of its workers are gone (docs/rina.md "Failures"):
// `job` with `left` (hosts, in rank order) as its workers, the fragment width the old ring had,
// and a first seq past every one the old ring may have used: the last, in serial-number order, of
// `old_ring_seqs` (each a survivor's Endpoint::resume_seq).
JobSpec rina_reformed_job(JobSpec job, std::vector<std::string> left, std::uint16_t values_per_packet,
                          std::span<const Seq> old_ring_seqs);

}  // namespace atp
