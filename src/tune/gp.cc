#include "tune/gp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tune/space.h"

namespace stoker::tune {
namespace {

constexpr double kSqrt5 = 2.23606797749979;
constexpr double kJitter = 1e-9;
// Priors (on the log scale, inputs in the unit cube, outputs standardised).
// Length scales: median e^-0.75/2 ≈ 0.24 times √D, sd 0.8 (see LogLengthMean).
constexpr double kLogLengthSd = 0.8;
constexpr double kLogSignalMean = 0.0, kLogSignalSd = 1.0;
constexpr double kLogNoiseMean = -7.0, kLogNoiseSd = 2.5;  // e^-7 ≈ 1e-3
// The trend's prior sits well below the signal's (q2 ≈ 0.007 against s2 ≈ 1),
// so the trend is used where the data ask for it; bounds q2 ∈ [1e-4, 10].
constexpr double kLogTrendMean = -5.0, kLogTrendSd = 2.5;

// The length-scale prior's median grows with √D (Hvarfner et al., ICML
// 2024), but from a shorter base and with a tighter spread than theirs: on
// the tuning suite (bench/tune/RESULTS.md, 2026-11-29) median 0.24√D with
// sd 0.8 had significantly lower regret than 0.5√D with sd 1.5 in 31 of 124
// cells and higher in 3 (26 and 1 on fresh seeds); a median e times longer
// was higher in 54 and lower in none. Few trials cannot pin a length scale
// down, so the prior decides how far from its data the model stays sure.
double LogLengthMean(int d) { return std::log(0.5) - 0.75 + 0.5 * std::log(std::max(1, d)); }

// δ_j(a, b) of gp.h.
inline double Delta(double a, double b, bool categorical) {
  bool ia = a == kInactive, ib = b == kInactive;
  if (ia || ib) return ia == ib ? 0.0 : 1.0;
  if (categorical) return a == b ? 0.0 : 1.0;
  double d = a - b;
  return d * d;
}

// Matérn-5/2 correlation of r². Its derivative with respect to log l_j is
// (5/3)(1+√5 r)e^{-√5 r} · δ_j / l_j² (used in NegLogPosterior).
inline double Matern(double r2) {
  double r = std::sqrt(std::max(r2, 0.0));
  return (1.0 + kSqrt5 * r + 5.0 / 3.0 * r2) * std::exp(-kSqrt5 * r);
}

}  // namespace

GaussianProcess::GaussianProcess(std::vector<bool> categorical, bool quadratic_trend)
    : categorical_(std::move(categorical)), quadratic_trend_(quadratic_trend) {
  theta_ = PriorMode();
}

Eigen::VectorXd GaussianProcess::PriorMode() const {
  const int d = dims();
  Eigen::VectorXd t(theta_size());
  t.head(d).setConstant(LogLengthMean(d));
  t[d] = kLogSignalMean;
  t[d + 1] = kLogNoiseMean;
  if (quadratic_trend_) t[d + 2] = kLogTrendMean;
  return t;
}

void GaussianProcess::ThetaBounds(Eigen::VectorXd* lo, Eigen::VectorXd* hi) const {
  const int d = dims();
  lo->resize(theta_size());
  hi->resize(theta_size());
  lo->head(d).setConstant(std::log(0.01));
  hi->head(d).setConstant(std::log(100.0));
  (*lo)[d] = std::log(0.01);
  (*hi)[d] = std::log(100.0);
  (*lo)[d + 1] = std::log(1e-6);
  (*hi)[d + 1] = std::log(2.0);
  if (quadratic_trend_) {
    (*lo)[d + 2] = std::log(1e-4);
    (*hi)[d + 2] = std::log(10.0);
  }
}

Eigen::MatrixXd GaussianProcess::Centred(const Eigen::MatrixXd& x) const {
  const int d = dims();
  int numeric = 0;
  for (int j = 0; j < d; ++j) numeric += categorical_[j] ? 0 : 1;
  const double scale = std::sqrt(12.0 / std::max(1, numeric));
  Eigen::MatrixXd u = Eigen::MatrixXd::Zero(d, x.cols());
  for (int c = 0; c < x.cols(); ++c) {
    for (int j = 0; j < d; ++j) {
      if (!categorical_[j] && x(j, c) != kInactive) u(j, c) = scale * (x(j, c) - 0.5);
    }
  }
  return u;
}

Eigen::MatrixXd GaussianProcess::TrendFeatures(const Eigen::MatrixXd& ua,
                                               const Eigen::MatrixXd& ub) {
  Eigen::MatrixXd v = ua.transpose() * ub;
  return (1.0 + v.array()).square().matrix();
}

Eigen::MatrixXd GaussianProcess::Cross(const Eigen::MatrixXd& b, const Eigen::MatrixXd& ub) const {
  const Eigen::MatrixXd& a = x_;
  const int d = dims();
  Eigen::VectorXd w(d);
  for (int j = 0; j < d; ++j) w[j] = std::exp(-2.0 * theta_[j]);
  const double s2 = std::exp(theta_[d]);
  const double q2 = quadratic_trend_ ? std::exp(theta_[d + 2]) : 0.0;
  Eigen::MatrixXd k(a.cols(), b.cols());
  for (int c = 0; c < b.cols(); ++c) {
    for (int i = 0; i < a.cols(); ++i) {
      double r2 = 0;
      for (int j = 0; j < d; ++j) r2 += w[j] * Delta(a(j, i), b(j, c), categorical_[j]);
      k(i, c) = s2 * Matern(r2);
      if (quadratic_trend_) {
        double v = 1.0 + u_.col(i).dot(ub.col(c));
        k(i, c) += q2 * v * v;
      }
    }
  }
  return k;
}

std::vector<Eigen::MatrixXd> GaussianProcess::PairwiseDeltas(const Eigen::MatrixXd& x) const {
  const int d = dims();
  const int n = static_cast<int>(x.cols());
  std::vector<Eigen::MatrixXd> delta(d, Eigen::MatrixXd::Zero(n, n));
  for (int j = 0; j < d; ++j) {
    for (int c = 0; c < n; ++c) {
      for (int i = 0; i < c; ++i) {
        double v = Delta(x(j, i), x(j, c), categorical_[j]);
        delta[j](i, c) = v;
        delta[j](c, i) = v;
      }
    }
  }
  if (quadratic_trend_) {
    Eigen::MatrixXd u = Centred(x);
    delta.push_back(TrendFeatures(u, u));
  }
  return delta;
}

double GaussianProcess::NegLogPosterior(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                        const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const {
  return NegLogPosterior(PairwiseDeltas(x), y, theta, grad);
}

double GaussianProcess::NegLogPosterior(const std::vector<Eigen::MatrixXd>& delta,
                                        const Eigen::VectorXd& y, const Eigen::VectorXd& theta,
                                        Eigen::VectorXd* grad) const {
  const int d = dims();
  const int n = static_cast<int>(y.size());
  Eigen::VectorXd w(d);
  for (int j = 0; j < d; ++j) w[j] = std::exp(-2.0 * theta[j]);
  const double s2 = std::exp(theta[d]);
  const double n2 = std::exp(theta[d + 1]);
  Eigen::MatrixXd r2 = Eigen::MatrixXd::Zero(n, n);
  for (int j = 0; j < d; ++j) r2.noalias() += w[j] * delta[j];
  Eigen::MatrixXd kf(n, n), gf(grad != nullptr ? n : 0, grad != nullptr ? n : 0);
  for (int c = 0; c < n; ++c) {
    for (int i = 0; i < n; ++i) {
      double rr = r2(i, c), r = std::sqrt(std::max(rr, 0.0)), e = s2 * std::exp(-kSqrt5 * r);
      kf(i, c) = (1.0 + kSqrt5 * r + 5.0 / 3.0 * rr) * e;
      if (grad != nullptr) gf(i, c) = 5.0 / 3.0 * (1.0 + kSqrt5 * r) * e;
    }
  }
  Eigen::MatrixXd kt;
  if (quadratic_trend_) kt = std::exp(theta[d + 2]) * delta[d];
  Eigen::MatrixXd k = quadratic_trend_ ? Eigen::MatrixXd(kf + kt) : kf;
  k.diagonal().array() += n2 + kJitter;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return std::numeric_limits<double>::infinity();
  Eigen::VectorXd alpha = llt.solve(y);
  const Eigen::MatrixXd& l = llt.matrixLLT();
  double logdet = 0;
  for (int i = 0; i < n; ++i) logdet += std::log(l(i, i));
  double nlp = 0.5 * y.dot(alpha) + logdet + 0.5 * n * std::log(2 * M_PI);
  // Priors.
  const double mu_l = LogLengthMean(d);
  for (int j = 0; j < d; ++j) nlp += 0.5 * std::pow((theta[j] - mu_l) / kLogLengthSd, 2);
  nlp += 0.5 * std::pow((theta[d] - kLogSignalMean) / kLogSignalSd, 2);
  nlp += 0.5 * std::pow((theta[d + 1] - kLogNoiseMean) / kLogNoiseSd, 2);
  if (quadratic_trend_) nlp += 0.5 * std::pow((theta[d + 2] - kLogTrendMean) / kLogTrendSd, 2);
  if (grad != nullptr) {
    grad->resize(theta_size());
    Eigen::MatrixXd wm = llt.solve(Eigen::MatrixXd::Identity(n, n));
    wm.noalias() -= alpha * alpha.transpose();  // W = K⁻¹ − ααᵀ
    Eigen::MatrixXd wg = wm.cwiseProduct(gf);
    for (int j = 0; j < d; ++j) {
      (*grad)[j] = 0.5 * w[j] * wg.cwiseProduct(delta[j]).sum() +
                   (theta[j] - mu_l) / (kLogLengthSd * kLogLengthSd);
    }
    (*grad)[d] = 0.5 * wm.cwiseProduct(kf).sum() +
                 (theta[d] - kLogSignalMean) / (kLogSignalSd * kLogSignalSd);
    (*grad)[d + 1] =
        0.5 * n2 * wm.trace() + (theta[d + 1] - kLogNoiseMean) / (kLogNoiseSd * kLogNoiseSd);
    if (quadratic_trend_) {
      (*grad)[d + 2] = 0.5 * wm.cwiseProduct(kt).sum() +
                       (theta[d + 2] - kLogTrendMean) / (kLogTrendSd * kLogTrendSd);
    }
  }
  return nlp;
}

bool GaussianProcess::Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                          const GpFitOptions& options, const Eigen::VectorXd& warm, Rng& rng) {
  const int n = static_cast<int>(x.cols());
  const int d = dims();
  // The fitting subset: the best half and a random half of the rest.
  Eigen::MatrixXd xf = x;
  Eigen::VectorXd yf = y;
  if (n > options.max_fit_points) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return y[a] < y[b]; });
    int keep_best = options.max_fit_points / 2;
    std::shuffle(order.begin() + keep_best, order.end(), rng);
    order.resize(options.max_fit_points);
    std::sort(order.begin(), order.end());
    xf.resize(x.rows(), order.size());
    yf.resize(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      xf.col(i) = x.col(order[i]);
      yf[i] = y[order[i]];
    }
  }
  Eigen::VectorXd lo, hi;
  ThetaBounds(&lo, &hi);
  const std::vector<Eigen::MatrixXd> delta = PairwiseDeltas(xf);
  auto f = [&](const Eigen::VectorXd& th, Eigen::VectorXd& g) {
    return NegLogPosterior(delta, yf, th, &g);
  };
  // Starts: the warm start (if any), then the best by value alone (one
  // Cholesky each, far cheaper than an L-BFGS run) of the prior mode and
  // options.screen draws from the prior.
  std::vector<Eigen::VectorXd> starts;
  if (warm.size() == theta_size()) starts.push_back(warm.cwiseMax(lo).cwiseMin(hi));
  if (static_cast<int>(starts.size()) < options.restarts) {
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<std::pair<double, Eigen::VectorXd>> screened;
    screened.emplace_back(NegLogPosterior(delta, yf, PriorMode(), nullptr), PriorMode());
    for (int k = 0; k < options.screen; ++k) {
      Eigen::VectorXd t = PriorMode();
      for (int j = 0; j < d; ++j) t[j] += kLogLengthSd * normal(rng);
      t[d] += 0.5 * normal(rng);
      t[d + 1] += 1.5 * normal(rng);
      if (quadratic_trend_) t[d + 2] += kLogTrendSd * normal(rng);
      t = t.cwiseMax(lo).cwiseMin(hi);
      screened.emplace_back(NegLogPosterior(delta, yf, t, nullptr), t);
    }
    std::stable_sort(screened.begin(), screened.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t k = 0; k < screened.size() && static_cast<int>(starts.size()) < options.restarts;
         ++k) {
      starts.push_back(screened[k].second);
    }
  }
  starts.resize(std::min<size_t>(starts.size(), std::max(1, options.restarts)));
  Eigen::VectorXd best_theta = theta_;
  double best = std::numeric_limits<double>::infinity();
  for (Eigen::VectorXd t : starts) {
    double v = MinimizeLbfgsBox(f, t, lo, hi, options.max_iterations);
    if (v < best) {
      best = v;
      best_theta = t;
    }
  }
  if (!std::isfinite(best)) return false;
  theta_ = best_theta;
  return SetData(x, y);
}

bool GaussianProcess::SetData(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  const int d = dims();
  x_ = x;
  if (quadratic_trend_) u_ = Centred(x);
  Eigen::MatrixXd k = Cross(x, u_);
  k.diagonal().array() += std::exp(theta_[d + 1]) + kJitter;
  llt_.compute(k);
  if (llt_.info() != Eigen::Success) {
    // Add noise until positive definite; a broken fit must not stop tuning.
    for (double extra = 1e-6; extra < 1.0 && llt_.info() != Eigen::Success; extra *= 10) {
      k.diagonal().array() += extra;
      llt_.compute(k);
    }
    if (llt_.info() != Eigen::Success) return false;
  }
  alpha_ = llt_.solve(y);
  return true;
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean,
                              Eigen::VectorXd* var) const {
  const int d = dims();
  Eigen::MatrixXd us = quadratic_trend_ ? Centred(xs) : Eigen::MatrixXd();
  Eigen::MatrixXd ks = Cross(xs, us);
  *mean = ks.transpose() * alpha_;
  llt_.matrixL().solveInPlace(ks);
  Eigen::VectorXd prior = Eigen::VectorXd::Constant(xs.cols(), std::exp(theta_[d]));
  if (quadratic_trend_) {
    Eigen::ArrayXd v = us.colwise().squaredNorm().transpose().array();
    prior.array() += std::exp(theta_[d + 2]) * (1.0 + v).square();
  }
  *var = (prior.array() - ks.colwise().squaredNorm().transpose().array()).cwiseMax(1e-12).matrix();
}

}  // namespace stoker::tune
