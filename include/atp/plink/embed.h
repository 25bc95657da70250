// PLink's ProbeEmbed, its denoising half (PLink, MLSys'20, §4.1.2; docs/plink.md): nodes placed
// in a Euclidean space so that their distances there agree with the probed ones. Equation (1):
//
//   minimise  sum over pairs i < j of  ( d_ij^alpha + [h_i + h_j] - p_ij )^2,   d_ij = |v_i - v_j|
//
// p_ij: the probed distance (a latency, or an inverse bandwidth); v_i: node i's coordinates; h_i:
// an optional non-negative per-node cost (a host's own stack latency, after Vivaldi); alpha in
// [1, 2]: 1 fits distances as they are, 2 compacts the long ones more than the short ones without
// changing their order. Fitted with Adam (Kingma & Ba), as the paper does. No I/O.
#pragma once

#include <Eigen/Dense>
#include <cstdint>

namespace atp::plink {

struct EmbedOptions {
  int dimensions = 2;           // of the coordinate space; fewer dimensions denoise more (§4.1.2)
  double alpha = 2.0;           // in [1, 2]
  bool node_costs = false;      // fit h_i too
  int iterations = 3000;        // Adam steps over the whole objective
  double learning_rate = 0.02;  // Adam's step, in units of the probed distances' median
  std::uint64_t seed = 1;       // the starting coordinates
};

struct Embedding {
  Eigen::MatrixXd coordinates;  // one row per node, `dimensions` columns
  Eigen::VectorXd node_costs;   // h_i, in the probed distances' unit (zeros without node_costs)
  double alpha = 2.0;
  // The objective (1) at the end, over the number of pairs: the mean squared misfit, in the
  // probed distances' unit squared.
  double mean_squared_error = 0.0;

  // The embedding's distance between i and j in the probed distances' unit: d_ij^alpha + h_i + h_j
  // (what the fit makes close to p_ij), the denoised distance.
  double distance(Eigen::Index i, Eigen::Index j) const;
  // Every pair's denoised distance (0 on the diagonal).
  Eigen::MatrixXd distances() const;
};

// `probed`: n x n, symmetric, finite and non-negative off the diagonal (the diagonal is ignored).
// Throws std::invalid_argument (one sentence naming what is wrong) for anything else, for alpha
// outside [1, 2], fewer than 1 dimension or iteration, or a learning rate that is not positive.
// Deterministic for given options.
Embedding embed(const Eigen::MatrixXd& probed, const EmbedOptions& options = {});

}  // namespace atp::plink
