// PLink's Autotune (PLink, MLSys'20, §4.3; docs/plink.md): the masters of 2LHA moved to where the
// bandwidth is, as links change. Quicktune redistributes them at once in proportion to measured
// bandwidth; Finetune then moves them one step at a time away from the node that the blame model
// names. Its output is master shares (masters.h), from which two_level_schedule (aggregation.h) builds the
// next iteration's schedules: every rank computes the same shares from the same measurements, so a
// new plan needs no coordinator and is installed between iterations, where no chunk is in flight.
// No I/O, no clock: the measurements come from the transport.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "atp/plink/aggregation.h"
#include "atp/plink/masters.h"
#include "atp/schedule/builders.h"

namespace atp::plink {

// What Autotune reads after an iteration, per ordered pair of ranks (i, j): how many bytes i sent j
// (D(i, j): the plan's, plan_bytes), at what rate while i's stream to j was busy (bytes per
// second; <= 0: not measured), and the connection's round trip (seconds; 0 where not known).
struct LinkMeasurements {
  Eigen::MatrixXd bytes, bytes_per_second, round_trip_s;
};

// D(i, j) of the 2LHA plan with `shares` over `groups` (two_level_schedule, aggregation.h) for
// `count` elements in chunks of `chunk_elements`: the bytes rank i sends rank j in an iteration.
Eigen::MatrixXd plan_bytes(const RankGroups& groups, const MasterShares& shares, std::size_t count,
                           std::size_t chunk_elements = kDefaultChunkElements);

// Quicktune (§4.3.1): GMs to each group in proportion to the bandwidth its members measured to the
// other groups (with one group: to each other), then within a group, and its LMs, in proportion to
// each member's total measured bandwidth. A rank that measured nothing keeps the mean of its
// group's. Throws std::invalid_argument when the matrices are not size x size.
MasterShares quicktune(const RankGroups& groups, const LinkMeasurements& m);

struct FinetuneOptions {
  double beta = 0.1;      // the weight of imbalance in the blame
  double gamma = 1.0;     // the weight of time
  double epsilon = 1.05;  // tune while the largest blame exceeds the smallest by this factor
};

// The blame of each rank (§4.3.2): beta x its normalised imbalance ((l - min l) / (max l - min l),
// l(i) = the bytes it sends) + gamma x its normalised time (t / mean t, t(i) = its largest round
// trip + the sum over its peers of D(i, j) / BW(i, j)).
Eigen::VectorXd blame(const LinkMeasurements& m, const FinetuneOptions& options = {});

// Finetune's state between steps: the last bottleneck, and how many chunks' worth of master work
// the next move from it takes (doubling while the same node stays the bottleneck).
struct FinetuneState {
  int last_bottleneck = -1;
  double moves = 1;
};

// One Finetune step: if the largest blame exceeds the smallest by more than epsilon, one chunk's
// GM (`state.moves` of them, when the same node was the bottleneck last time) leaves the most
// blamed rank for the least blamed; where it masters no GM, its LM duties go to the least blamed
// member of its group. Returns the new shares, or nullopt when the blame is balanced or there is
// nothing to move. `chunks`: the chunk count, the unit of a move.
std::optional<MasterShares> finetune(const RankGroups& groups, const MasterShares& shares, std::size_t chunks,
                                     const LinkMeasurements& m, FinetuneState& state,
                                     const FinetuneOptions& options = {});

struct AutotuneOptions {
  double trigger = 0.2;  // a change of the iteration time by more than this share starts Quicktune
  // Finetune at every iteration whose blame is unbalanced, not only from a trigger until the blame
  // is balanced (the paper's Fig. 10 runs so, "ignoring the stop condition").
  bool continuous = false;
  FinetuneOptions finetune;
};

// The loop of §4.3: watches the iteration time; when it changes by more than `trigger` from one
// iteration to the next (not counting the first iteration of a plan it made), Quicktune, then one
// Finetune step per iteration until the blame is balanced.
class Autotune {
 public:
  Autotune(RankGroups groups, std::size_t chunks, AutotuneOptions options = {});
  // After an iteration of `seconds` whose plan was `shares`, measured as `m`: the shares of the
  // next iteration's plan, or nullopt to keep the plan.
  std::optional<MasterShares> after_iteration(double seconds, const MasterShares& shares, const LinkMeasurements& m);

 private:
  RankGroups groups_;
  std::size_t chunks_;
  AutotuneOptions options_;
  std::optional<double> settled_;  // the last iteration's time
  bool replanned_ = false;         // the last iteration ran a plan this loop made
  bool tuning_ = false;            // between a trigger and a balanced blame
  FinetuneState finetune_;
};

}  // namespace atp::plink
