// Messages of the daemons' HTTP control plane, as JSON: what `atp run --backend udp` (or a user)
// sends a switch or PS to install a job, and the stats they report. One codec for both sides.
#pragma once

#include <stdexcept>
#include <string>

#include "atp/plan.h"

namespace atp::control {

// A control message that does not parse or names impossible values: what() is one sentence
// naming the field ("roles[0].level: must be 0 or 1, got 7").
class ControlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Overlay host addresses are written as dotted quads ("10.0.0.1"), as plan_network prints them.
std::string address_to_string(Address address);
// Throws ControlError naming `field` if `text` is not a dotted quad.
Address parse_address(const std::string& text, const std::string& field = "address");

// A switch's part of a job plan: admission, roles and the job's multicast ports. The job id is
// plan.entry.job. Shape:
//   {"job": 1, "admitted_ports": [0, 1], "roles": [{"ps": "10.0.0.3", "level": 0}],
//    "multicast_ports": [0, 1]}
std::string to_json(const SwitchJobPlan& plan);
SwitchJobPlan switch_job_from_json(const std::string& text);  // throws ControlError

// A PS's part of a job plan. Shape:
//   {"job": 1, "self": "10.0.0.3", "multicast_group": "224.0.0.1", "group_sizes": [2],
//    "values_per_packet": 62, "num_aggregators": 4096, "max_window_seqs": 1024}
// Every key is required when parsing except values_per_packet, num_aggregators and
// max_window_seqs (PsConfig's defaults); unknown keys are errors.
std::string to_json(const PsConfig& config);
PsConfig ps_job_from_json(const std::string& text);  // throws ControlError

}  // namespace atp::control
