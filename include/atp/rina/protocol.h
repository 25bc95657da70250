// Rina's entry in the protocol table (atp/control/protocol.h): its plan with each worker's config as
// a JSON value, and its endpoint from one. The config's codec is for the messages that carry it: the process
// backends' worker spec and "reform" line, ClusterJob's rendezvous store, the testbed's install
// reply. Shape:
//   {"job": 1, "rank": 0, "workers": ["10.0.0.1", "10.0.0.2"], "members": [[0, 1]],
//    "values_per_packet": 256, "scale": 1e8, "aggregator_slots": 4096,
//    "congestion": {...as ATP's worker config's...}, "retransmit_timeout_ns": 1000000,
//    "min_retransmit_timeout_ns": 1000000, "max_retransmit_timeout_ns": 1000000000,
//    "progress_timeout_ns": 2000000000, "initial_seq": 0}
// Every key is required; unknown keys are errors. The worker's own constructor checks what the
// fields mean together (RinaWorker: one sentence).
#pragma once

#include <nlohmann/json.hpp>

#include "atp/control/protocol.h"
#include "atp/rina/worker.h"

namespace atp {

nlohmann::json rina_config_json(const RinaConfig& config);
RinaConfig rina_config_from(const nlohmann::json& doc);  // throws control::ControlError naming the field

// plan_rina_job with each worker's config as rina_config_json.
EndpointJobPlan rina_endpoint_plan(const NetworkPlan& network, const JobSpec& job);
std::unique_ptr<Endpoint> rina_endpoint(const nlohmann::json& config);  // a RinaWorker of rina_config_from

}  // namespace atp
