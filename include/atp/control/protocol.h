// What the orchestrator and the hosts need of an in-network allreduce protocol (ATP's, Rina's),
// without naming it: its plan of a job, and the endpoint a worker's host runs from its part of
// that plan. The protocols themselves are listed once, in atp/cluster/protocols.h; each brings its
// entry from its own folder (ATP's: control/atp_protocol.cc, Rina's: src/rina/protocol.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atp/endpoint.h"
#include "atp/plan/plan.h"

namespace atp {

// A job's plan in any protocol: what the orchestrator installs on the switches and PSes, and each
// worker's endpoint config as a JSON value (its protocol's codec), which that worker's host, in
// this process or another, turns into an Endpoint with Protocol::endpoint.
struct EndpointJobPlan {
  JobId job = 0;
  std::uint16_t values_per_packet = 0;            // JobSpec's, or the width fragment_width chose
  std::vector<nlohmann::json> workers;            // same order as JobSpec::workers
  std::vector<PsConfig> ps;                       // ATP's PSes, in JobSpec::ps order; none for Rina
  std::map<std::string, SwitchJobPlan> switches;  // every switch on the job's paths
  // Rina: the ring's members, each of which delivers one hop sum per fragment at least (what its
  // in-network share is measured against). 0 for a protocol without a ring.
  std::size_t ring_members = 0;
};

struct Protocol {
  std::string_view name;  // Endpoint::protocol(); what an algorithm's `protocol` names
  // The job's plan on `network`. Throws PlanError (one sentence naming the job).
  EndpointJobPlan (*plan)(const NetworkPlan& network, const JobSpec& job) = nullptr;
  // A worker's endpoint from its part of a plan. Throws control::ControlError naming a field the
  // config lacks or gets wrong, std::invalid_argument for one the endpoint refuses.
  std::unique_ptr<Endpoint> (*endpoint)(const nlohmann::json& config) = nullptr;
  // The job the survivors go on in when workers are gone (Rina's re-forming, docs/rina.md
  // "Failures"): `job` with `left` as its workers, the old plan's fragment width, and a first seq
  // past every one of `resume_seqs` (each survivor's Endpoint::resume_seq). nullptr: the protocol
  // does not re-form (ATP: a lost worker fails the job's round).
  JobSpec (*reformed)(JobSpec job, std::vector<std::string> left, std::uint16_t values_per_packet,
                      std::span<const Seq> resume_seqs) = nullptr;
};

// ATP's entry: plan_job, WorkerEndpoint, no re-forming.
EndpointJobPlan atp_endpoint_plan(const NetworkPlan& network, const JobSpec& job);
std::unique_ptr<Endpoint> atp_endpoint(const nlohmann::json& config);

}  // namespace atp
