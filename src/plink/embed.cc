// ProbeEmbed's embedding (include/atp/plink/embed.h): equation (1) by Adam, on distances scaled
// to a median of 1 so that one learning rate serves microseconds and seconds alike.
#include "atp/plink/embed.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace atp::plink {
namespace {

void validate(const Eigen::MatrixXd& p, const EmbedOptions& o) {
  if (p.rows() != p.cols()) {
    throw std::invalid_argument("the probed distances must be a square matrix (got " + std::to_string(p.rows()) +
                                " x " + std::to_string(p.cols()) + ")");
  }
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    for (Eigen::Index j = 0; j < p.cols(); ++j) {
      if (i == j) continue;
      if (!std::isfinite(p(i, j)) || p(i, j) < 0) {
        throw std::invalid_argument("the probed distance between nodes " + std::to_string(i) + " and " +
                                    std::to_string(j) + " must be finite and non-negative (got " +
                                    std::to_string(p(i, j)) + ")");
      }
      if (p(i, j) != p(j, i)) {
        throw std::invalid_argument("the probed distances must be symmetric (nodes " + std::to_string(i) + " and " +
                                    std::to_string(j) + ": " + std::to_string(p(i, j)) + " and " +
                                    std::to_string(p(j, i)) + "); average both directions first");
      }
    }
  }
  if (!(o.alpha >= 1.0 && o.alpha <= 2.0)) {
    throw std::invalid_argument("alpha must be between 1 and 2 (got " + std::to_string(o.alpha) + ")");
  }
  if (o.dimensions < 1) throw std::invalid_argument("the embedding needs at least 1 dimension");
  if (o.iterations < 1) throw std::invalid_argument("the embedding needs at least 1 iteration");
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate)) {
    throw std::invalid_argument("the learning rate must be a positive number");
  }
}

// The median of the off-diagonal distances, or their largest if that is 0; 1 if all are 0.
double typical_distance(const Eigen::MatrixXd& p) {
  std::vector<double> values;
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    for (Eigen::Index j = 0; j < i; ++j) values.push_back(p(i, j));
  }
  if (values.empty()) return 1.0;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
  const double median = values[values.size() / 2];
  if (median > 0) return median;
  const double largest = *std::max_element(values.begin(), values.end());
  return largest > 0 ? largest : 1.0;
}

// Adam's state for one block of parameters.
struct Adam {
  Eigen::ArrayXXd m, v;
  explicit Adam(Eigen::Index rows, Eigen::Index cols) : m(Eigen::ArrayXXd::Zero(rows, cols)), v(m) {}
  template <class Params>
  void step(Params& x, const Eigen::ArrayXXd& gradient, double rate, int t) {
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
    m = kBeta1 * m + (1 - kBeta1) * gradient;
    v = kBeta2 * v + (1 - kBeta2) * gradient.square();
    const double unbias1 = 1 - std::pow(kBeta1, t), unbias2 = 1 - std::pow(kBeta2, t);
    x.array() -= rate * (m / unbias1) / ((v / unbias2).sqrt() + kEpsilon);
  }
};

}  // namespace

double Embedding::distance(Eigen::Index i, Eigen::Index j) const {
  if (i == j) return 0.0;
  return std::pow((coordinates.row(i) - coordinates.row(j)).norm(), alpha) + node_costs(i) + node_costs(j);
}

Eigen::MatrixXd Embedding::distances() const {
  const Eigen::Index n = coordinates.rows();
  Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < i; ++j) d(i, j) = d(j, i) = distance(i, j);
  }
  return d;
}

Embedding embed(const Eigen::MatrixXd& probed, const EmbedOptions& options) {
  validate(probed, options);
  const Eigen::Index n = probed.rows();
  const double alpha = options.alpha;
  const double scale = typical_distance(probed);
  const Eigen::MatrixXd q = probed / scale;  // a median of 1

  // Random starting coordinates whose typical distance is about 1 (two Gaussian points with
  // standard deviation s per dimension are sqrt(2 dimensions) s apart on average).
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(2.0 * options.dimensions));
  Eigen::MatrixXd x(n, options.dimensions);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  Eigen::VectorXd h = Eigen::VectorXd::Zero(n);

  const double pairs = std::max<double>(1.0, static_cast<double>(n) * static_cast<double>(n - 1) / 2);
  Adam adam_x(n, options.dimensions), adam_h(n, 1);
  Eigen::ArrayXXd grad_x(n, options.dimensions), grad_h(n, 1);
  for (int t = 1; t <= options.iterations; ++t) {
    grad_x.setZero();
    grad_h.setZero();
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) {
        const Eigen::RowVectorXd diff = x.row(i) - x.row(j);
        const double d = std::max(diff.norm(), 1e-12);
        const double residual = std::pow(d, alpha) + h(i) + h(j) - q(i, j);
        // d(d^alpha)/dx_i = alpha d^(alpha - 2) (x_i - x_j)
        const Eigen::RowVectorXd g = (2 * residual * alpha * std::pow(d, alpha - 2) / pairs) * diff;
        grad_x.row(i) += g.array();
        grad_x.row(j) -= g.array();
        if (options.node_costs) {
          grad_h(i, 0) += 2 * residual / pairs;
          grad_h(j, 0) += 2 * residual / pairs;
        }
      }
    }
    // The step decays from the learning rate to a hundredth of it, so that the fit settles.
    const double rate = options.learning_rate * std::pow(0.01, static_cast<double>(t - 1) / options.iterations);
    adam_x.step(x, grad_x, rate, t);
    if (options.node_costs) {
      adam_h.step(h, grad_h, rate, t);
      h = h.cwiseMax(0.0);  // h_i is non-negative (projected)
    }
  }

  Embedding e;
  e.alpha = alpha;
  e.coordinates = x * std::pow(scale, 1.0 / alpha);  // so that d^alpha is in the probed unit
  e.node_costs = h * scale;
  e.mean_squared_error = 0.0;
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < i; ++j) {
      const double misfit = e.distance(i, j) - probed(i, j);
      e.mean_squared_error += misfit * misfit / pairs;
    }
  }
  return e;
}

}  // namespace atp::plink
