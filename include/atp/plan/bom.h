// The bandwidth-occupation model (BOM) of Chen et al., "Rina: Enhancing Ring-AllReduce with
// In-network Aggregation in Distributed Model Training" (2024), §III-B, of PS-based in-network
// aggregation (ATP, SwitchML; the PS baseline is the case of no aggregating switch), the same
// accounting for ring allreduce and for Rina, and Rina's order for replacing switches with
// aggregating ones (§IV-D): what `atp bom` prints.
//
// The model: every link has the same bandwidth B0, and a worker's throughput is B0 over the most
// gradients' worth (S, one worker's gradient) any link carries in one allreduce, each direction of
// a link counted apart.
// - PS-based (the paper's model): each worker sends its gradient up the routes' tree towards the
//   PS. A link carries one stream per worker below it, except that an aggregating switch sends one
//   stream for all of them (Lemma 2); streams share a link evenly (Lemma 1), and an aggregating
//   switch sends no faster than its slowest input (Lemma 3). The PS's results going back down
//   (one multicast stream per link) are not modelled, as in the paper.
// - Ring (this project's, in the same units): the workers in job order; every ring edge carries
//   2(n-1)/n S along its route.
// - Rina (this project's, in the same units, of Rina as built here, docs/rina.md): a rack whose
//   ToR aggregates and holds at least two of the job's workers is one ring member, every other
//   worker one of its own; G members in order of their first worker. Every ring edge carries
//   2(G-1)/G S, from the rack's ToR (or the worker) to the next rack's ToR (or worker): the switch
//   that completes a chunk multicasts it to its own rack at once, so no chunk goes around more
//   than a ring of G does. In a rack of L, each worker sends its gradient to the ToR once (S) and
//   gets every chunk's sum by multicast (S), and carries 1/L of the reduce-scatter's partial sums
//   ((G-1)/(G L) S), which it adds its own gradient to. With `agent_carries` the rack's agent (its
//   first worker) carries all of them ((G-1)/G S), as the paper has it (§IV-B).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "atp/plan/plan.h"

namespace atp {

// One direction of a link the job uses: from a worker or switch to the next node.
struct BomLink {
  std::string from, to;
  // Gradients' worth (S) it carries in one allreduce: for PS-based aggregation, the gradient
  // streams it carries.
  double load = 0;
};

struct BomPrediction {
  double throughput = 0;  // of every worker, a fraction of one link's bandwidth B0: 1 / bottleneck.load
  // PS-based: the tree's links, workers' first, then switches' in topology order. Ring and Rina:
  // in the order the model first loads them.
  std::vector<BomLink> links;
  BomLink bottleneck;  // the link with the most load (the first such in `links`)
};

// A job's tree towards its PS (one PS: the model has one root) on `network`'s routes, found once:
// then the prediction for any set of aggregating switches, and Rina's replacement order. Throws
// PlanError for a job without workers, with more than one PS, or naming hosts the network lacks.
// A job without a PS (ring, Rina) has only predict_ring and predict_rina; the others throw
// PlanError for it. The model keeps a pointer to `network`, which must outlive it.
class BomModel {
 public:
  BomModel(const NetworkPlan& network, const JobSpec& job);

  // PS-based in-network aggregation with the switches in `aggregating` adding their inputs up (the
  // others forward); with none, the PS baseline.
  BomPrediction predict(const std::set<std::string>& aggregating) const;
  // Ring allreduce among the job's workers, in job order. PlanError for fewer than two workers.
  BomPrediction predict_ring() const;
  // Rina with the racks whose ToR is in `aggregating` abstracted; `agent_carries`: the paper's
  // agent receives every partial sum, else (as built) the rack's workers share them. PlanError for
  // fewer than two workers.
  BomPrediction predict_rina(const std::set<std::string>& aggregating, bool agent_carries = false) const;

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

  const NetworkPlan* network_;
  std::vector<std::string> workers_;
  std::map<std::string, std::string> parent_;                 // each worker's and switch's next node
  std::map<std::string, std::vector<std::string>> children_;  // what hangs below each switch, as found
  std::vector<std::string> switches_;                         // on the tree, in topology order
  std::map<std::string, std::string> tor_;                    // each host's switch
};

}  // namespace atp
