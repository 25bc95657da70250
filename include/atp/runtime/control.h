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

// A switch's part of a job plan: admission, roles and the job's multicast ports.
std::string to_json(JobId job, const SwitchJobPlan& plan);
SwitchJobPlan switch_job_from_json(const std::string& text);  // throws ControlError

// A PS's part of a job plan.
std::string to_json(const PsConfig& config);
PsConfig ps_job_from_json(const std::string& text);  // throws ControlError

}  // namespace atp::control
