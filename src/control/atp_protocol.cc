// ATP's entry in the protocol table (protocol.h): its job plan with each worker's config as a JSON
// value, and its worker endpoint from one.
#include "atp/control/protocol.h"
#include "atp/control/worker_config_json.h"

namespace atp {

EndpointJobPlan atp_endpoint_plan(const NetworkPlan& network, const JobSpec& job) {
  JobPlan plan = plan_job(network, job);
  EndpointJobPlan out;
  out.job = job.id;
  out.values_per_packet = plan.values_per_packet;
  for (const WorkerConfig& w : plan.workers) out.workers.push_back(control::worker_config_json(w));
  out.ps = std::move(plan.ps);
  out.switches = std::move(plan.switches);
  return out;
}

std::unique_ptr<Endpoint> atp_endpoint(const nlohmann::json& config) {
  return std::make_unique<WorkerEndpoint>(control::worker_config_from(config));
}

}  // namespace atp
