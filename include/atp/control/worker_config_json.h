// ATP's worker config as a JSON value: the part of a message that carries it (the process backends'
// worker spec, ClusterJob's rendezvous store, the testbed's install reply), which nests it as a
// value, never as text parsed twice.
#pragma once

#include <nlohmann/json.hpp>

#include "atp/worker.h"

namespace atp::control {

// One worker's part of a job plan (plan_job's WorkerConfig), for a process that did not plan the
// job itself (a PyTorch rank gets it from rank 0 through the rendezvous store). Shape:
//   {"job": 1, "self": "10.0.0.1", "ps": [{"ps": "10.0.0.3", "node": 2}], "values_per_packet": 62, "scale": 1e8,
//    "first_aggregator": 0, "num_aggregators": 4096, "index": "allocated", "slot_home": 0, "loss_recovery": "atp",
//    "congestion": {"enabled": true, "initial_window": 0, "min_window": 1, "max_window": 1024,
//                   "initial_ssthresh": 1024, "mtu_bytes": 1500},
//    "retransmit_timeout_ns": 1000000, "min_retransmit_timeout_ns": 1000000,
//    "max_retransmit_timeout_ns": 1000000000,
//    "progress_timeout_ns": 2000000000, "initial_seq": 0}
// Every key is required; unknown keys are errors. The values are not checked against each other
// (WorkerEndpoint's constructor does that).
nlohmann::json worker_config_json(const WorkerConfig& config);
WorkerConfig worker_config_from(const nlohmann::json& doc);  // throws ControlError naming the field

}  // namespace atp::control
