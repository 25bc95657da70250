// The bandwidth-occupation model (BOM) of Chen et al., "Rina: Enhancing Ring-AllReduce with
// In-network Aggregation in Distributed Model Training" (2024), §III-B, of PS-based in-network
// aggregation (ATP, SwitchML; the PS baseline is the case of no aggregating switch), and Rina's
// order for replacing switches with aggregating ones (§IV-D): what `atp bom` prints.
//
// The model: every link has the same bandwidth B0; each worker sends its gradient up the routes'
// tree towards the PS. A link carries one stream per worker below it, except that an aggregating
// switch sends one stream for all of them (Lemma 2); streams share a link evenly (Lemma 1), and an
// aggregating switch sends no faster than its slowest input (Lemma 3). So every worker's
// throughput is B0 divided by the most streams any link of the tree carries. The PS's results
// going back down (one multicast stream per link) are not modelled, as in the paper.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "atp/plan/plan.h"

namespace atp {

// One link of a job's tree towards its PS: from a worker or switch to the next node on the way.
struct BomLink {
  std::string from, to;
  std::uint32_t streams = 0;  // gradient streams it carries
};

struct BomPrediction {
  double throughput = 0;       // of every worker, a fraction of one link's bandwidth B0
  std::vector<BomLink> links;  // the tree's links, workers' first, then switches' in topology order
  BomLink bottleneck;          // the link with the most streams (the first such in `links`)
};

// A job's tree towards its PS (one PS: the model has one root) on `network`'s routes, found once:
// then the prediction for any set of aggregating switches, and Rina's replacement order. Throws
// PlanError for a job without workers, with other than one PS, or naming hosts the network lacks.
class BomModel {
 public:
  BomModel(const NetworkPlan& network, const JobSpec& job);

  // The prediction with the switches in `aggregating` adding their inputs up (the others forward).
  BomPrediction predict(const std::set<std::string>& aggregating) const;

  // Rina's order for making switches aggregating, one at a time (§IV-D): first the switches the
  // job's workers hang under, those with the most workers first; then the other switches on the
  // job's tree towards its PS, each time the one with the most workers below it, an aggregating
  // switch and everything below it counting as one worker; ties go to the switch first in the
  // topology. Switches off the tree are not listed: they carry none of the job's traffic.
  std::vector<std::string> deployment_order() const;

 private:
  // Streams (or, for the replacement order, workers) that leave `node` towards the PS: one for a
  // worker and for an aggregating switch, the sum of its children's for another switch.
  std::uint32_t streams_out(const std::string& node, const std::set<std::string>& aggregating) const;

  std::vector<std::string> workers_;
  std::map<std::string, std::string> parent_;                 // each worker's and switch's next node
  std::map<std::string, std::vector<std::string>> children_;  // what hangs below each switch, as found
  std::vector<std::string> switches_;                         // on the tree, in topology order
};

}  // namespace atp
