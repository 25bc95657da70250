// Rina's entry in the protocol table (protocol.h): its config as a JSON value, on the control
// layer's field readers, its plan and its endpoint.
#include "atp/rina/protocol.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "atp/control/json_fields.h"
#include "atp/rina/plan.h"

namespace atp {

using control::check_keys;
using control::congestion_from;
using control::congestion_json;
using control::ControlError;
using control::get_address_list;
using control::get_list;
using control::get_number;
using control::get_timeouts;
using control::get_unsigned;
using control::put_timeouts;
using control::shown;
using control::to_unsigned;
using nlohmann::json;

nlohmann::json rina_config_json(const RinaConfig& c) {
  json workers = json::array();
  for (const Address a : c.workers) workers.push_back(format_address(a));
  json doc = {{"job", c.job},
              {"rank", c.rank},
              {"workers", workers},
              {"members", c.members},
              {"values_per_packet", c.values_per_packet},
              {"scale", c.scale},
              {"aggregator_slots", c.aggregator_slots},
              {"congestion", congestion_json(c.congestion)}};
  put_timeouts(c, doc);
  return doc;
}

RinaConfig rina_config_from(const json& doc) {
  if (!doc.is_object()) throw ControlError("Rina worker config: expected an object, got " + shown(doc));
  check_keys(doc, "",
             {"job", "rank", "workers", "members", "values_per_packet", "scale", "aggregator_slots", "congestion",
              "retransmit_timeout_ns", "min_retransmit_timeout_ns", "max_retransmit_timeout_ns", "progress_timeout_ns",
              "initial_seq"});
  RinaConfig c;
  c.job = get_unsigned<JobId>(doc, "", "job");
  c.rank = get_unsigned<std::uint32_t>(doc, "", "rank");
  c.workers = get_address_list(doc, "", "workers", 1024);
  const json& members = get_list(doc, "", "members");
  for (std::size_t m = 0; m < members.size(); ++m) {
    const std::string where = "members[" + std::to_string(m) + "]";
    if (!members[m].is_array()) throw ControlError(where + ": expected a list of ranks, got " + shown(members[m]));
    std::vector<std::uint32_t> ranks;
    for (std::size_t i = 0; i < members[m].size(); ++i) {
      ranks.push_back(static_cast<std::uint32_t>(to_unsigned(members[m][i], where + "[" + std::to_string(i) + "]",
                                                             std::numeric_limits<std::uint32_t>::max())));
    }
    c.members.push_back(std::move(ranks));
  }
  c.values_per_packet = get_unsigned<std::uint16_t>(doc, "", "values_per_packet");
  c.scale = get_number(doc, "", "scale", 0, std::numeric_limits<double>::max());
  c.aggregator_slots = get_unsigned<std::uint32_t>(doc, "", "aggregator_slots");
  c.congestion = congestion_from(doc);
  get_timeouts(doc, c);
  return c;
}

EndpointJobPlan rina_endpoint_plan(const NetworkPlan& network, const JobSpec& job) {
  RinaJobPlan plan = plan_rina_job(network, job);
  EndpointJobPlan out;
  out.job = job.id;
  out.values_per_packet = plan.values_per_packet;
  for (const RinaConfig& w : plan.workers) out.workers.push_back(rina_config_json(w));
  out.switches = std::move(plan.switches);
  out.ring_members = plan.members.size();
  return out;
}

std::unique_ptr<Endpoint> rina_endpoint(const json& config) {
  return std::make_unique<RinaWorker>(rina_config_from(config));
}

}  // namespace atp
