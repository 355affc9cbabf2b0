// Gaussian-process regression on unit points (see space.h) for GpBoSampler.
//
// Kernel: Matérn-5/2 with ARD, k(a, b) = s2 (1 + √5 r + 5/3 r²) exp(-√5 r),
//   r² = Σ_j δ_j(a_j, b_j) / l_j², where δ_j is
//     (a_j - b_j)²   for numeric slots,
//     [a_j != b_j]   for categorical slots (a Hamming distance, so each
//                    categorical parameter costs one length scale, not K),
//     0 / 1          when both / exactly one of a_j, b_j is kInactive.
// Observation noise variance n2 is added on the diagonal. The mean is zero:
// callers standardise the outputs.
//
// Optional quadratic trend (universal kriging with a Bayesian quadratic
// mean): k += q2 (1 + v(a, b))², v(a, b) = (12 / D_num) Σ_j u_j(a) u_j(b),
// u_j = x_j − ½ over the active numeric slots (0 elsewhere), so that v ≈ 1
// at a uniform point. Its feature space is every constant, linear and
// quadratic form of the centred inputs, rotated ones included, so a bowl or
// an oblique valley that an axis-aligned stationary kernel cannot carry
// across the box is modelled globally; q2 → 0 when the data do not want it.
//
// Hyperparameters θ = (log l_1..log l_D, log s2, log n2[, log q2]) maximise the log
// marginal likelihood plus log-normal priors (a MAP fit), within bounds,
// by projected L-BFGS from several starts. Not thread-safe; pure.
#pragma once

#include <Eigen/Dense>
#include <random>
#include <vector>

namespace stoker::tune {

using Rng = std::mt19937_64;

struct GpFitOptions {
  // Number of L-BFGS runs: from the warm start (if given), then from the
  // best, by value alone, of the prior mode and `screen` draws from the prior.
  int restarts = 1;
  int screen = 16;
  int max_iterations = 30;  // per start
  // Fit hyperparameters on at most this many points (half the best, half at
  // random); the posterior then conditions on all of them.
  int max_fit_points = 128;
};

class GaussianProcess {
 public:
  // categorical[j]: slot j is compared for equality only.
  explicit GaussianProcess(std::vector<bool> categorical, bool quadratic_trend = false);

  // Points are columns of x (D × n). `warm` (size theta_size(), may be empty)
  // is the first start. Returns false when no start gave a positive-definite kernel.
  bool Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpFitOptions& options,
           const Eigen::VectorXd& warm, Rng& rng);
  // Conditions on (x, y) with the current hyperparameters.
  bool SetData(const Eigen::MatrixXd& x, const Eigen::VectorXd& y);
  // Posterior mean and latent-function variance at the columns of xs.
  void Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean, Eigen::VectorXd* var) const;

  // θ as above; settable for tests and warm starts.
  const Eigen::VectorXd& theta() const { return theta_; }
  void set_theta(const Eigen::VectorXd& theta) { theta_ = theta; }
  int dims() const { return static_cast<int>(categorical_.size()); }
  int theta_size() const { return dims() + (quadratic_trend_ ? 3 : 2); }

  // Negative log posterior of θ on (x, y) and its gradient (for tests).
  double NegLogPosterior(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                         const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const;
  // Lower and upper bounds of θ.
  void ThetaBounds(Eigen::VectorXd* lo, Eigen::VectorXd* hi) const;
  Eigen::VectorXd PriorMode() const;

 private:
  // Per-slot squared distances δ_j, then (with the trend) the matrix (1 + v)².
  std::vector<Eigen::MatrixXd> PairwiseDeltas(const Eigen::MatrixXd& x) const;
  double NegLogPosterior(const std::vector<Eigen::MatrixXd>& delta, const Eigen::VectorXd& y,
                         const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const;
  // k(x_i, b_c) for the conditioned points x_ and the columns of b; ub is
  // Centred(b) when the trend is on (else unused).
  Eigen::MatrixXd Cross(const Eigen::MatrixXd& b, const Eigen::MatrixXd& ub) const;
  // The columns of x as the trend's scaled, centred u (numeric active slots).
  Eigen::MatrixXd Centred(const Eigen::MatrixXd& x) const;
  // (1 + v(a_i, b_c))² of the trend, from Centred(a) and Centred(b).
  static Eigen::MatrixXd TrendFeatures(const Eigen::MatrixXd& ua, const Eigen::MatrixXd& ub);

  std::vector<bool> categorical_;
  bool quadratic_trend_;
  Eigen::VectorXd theta_;
  Eigen::MatrixXd x_;
  Eigen::MatrixXd u_;  // Centred(x_), with the trend
  Eigen::VectorXd alpha_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
};

// Minimises f within [lo, hi] by L-BFGS with projection onto the box and a
// backtracking Armijo line search. f(x, grad) returns the value (may be +inf
// outside its domain) and fills grad. Returns the best value; x is updated.
template <typename F>
double MinimizeLbfgsBox(F&& f, Eigen::VectorXd& x, const Eigen::VectorXd& lo,
                        const Eigen::VectorXd& hi, int max_iterations);

}  // namespace stoker::tune

#include "tune/lbfgs_inl.h"
