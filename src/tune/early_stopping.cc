#include "tune/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stoker::tune {

bool MedianStop(const std::vector<Curve>& completed, const Curve& running, bool minimize,
                const MedianStopOptions& options) {
  if (running.empty()) return false;
  const double sign = minimize ? 1.0 : -1.0;  // compare as lower-is-better
  const double step = running.back().step;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& p : running) best = std::min(best, sign * p.value);
  std::vector<double> averages;
  for (const auto& curve : completed) {
    double sum = 0;
    int n = 0;
    for (const auto& p : curve) {
      if (p.step > step) break;
      sum += sign * p.value;
      ++n;
    }
    if (n > 0) averages.push_back(sum / n);
  }
  if (static_cast<int>(averages.size()) < std::max(1, options.min_completed)) return false;
  std::sort(averages.begin(), averages.end());
  size_t m = averages.size();
  double median = m % 2 ? averages[m / 2] : 0.5 * (averages[m / 2 - 1] + averages[m / 2]);
  return best > median;
}

bool DecayCurveStop(const std::vector<Curve>& completed, const Curve& running, bool minimize,
                    const DecayCurveOptions& options) {
  const int n = static_cast<int>(running.size());
  if (n < std::max(4, options.min_points)) return false;
  const double sign = minimize ? 1.0 : -1.0;
  double final_step = 0, bar = std::numeric_limits<double>::infinity();
  int n_completed = 0;
  for (const auto& c : completed) {
    if (c.empty()) continue;
    ++n_completed;
    final_step = std::max(final_step, c.back().step);
    bar = std::min(bar, sign * c.back().value);
  }
  if (n_completed < std::max(1, options.min_completed)) return false;
  const double t0 = running.back().step;
  if (!(t0 > 0) || t0 >= final_step) return false;

  double mean_v = 0;
  for (const auto& p : running) mean_v += sign * p.value;
  mean_v /= n;
  double var_v = 0;
  for (const auto& p : running) var_v += std::pow(sign * p.value - mean_v, 2);
  var_v /= n;

  struct Model {
    double log_lik, mean, sd;
  };
  std::vector<Model> models;
  for (int family = 0; family < 2; ++family) {
    for (int k = 0; k < 40; ++k) {
      double c = std::pow(10.0, -2.0 + 4.0 * k / 39.0);  // 0.01 .. 100
      auto phi = [&](double t) {
        return family == 0 ? std::exp(-c * t / t0) : std::pow(1.0 + t / t0, -c);
      };
      // Least squares for v = a + b φ: normal equations of [1 φ].
      double s1 = n, sp = 0, spp = 0, sv = 0, spv = 0;
      for (const auto& p : running) {
        double f = phi(p.step), v = sign * p.value;
        sp += f, spp += f * f, sv += v, spv += f * v;
      }
      double det = s1 * spp - sp * sp;
      if (!(std::fabs(det) > 1e-12 * std::max(1.0, s1 * spp))) continue;
      double a = (spp * sv - sp * spv) / det;
      double b = (s1 * spv - sp * sv) / det;
      double sse = 0;
      for (const auto& p : running) sse += std::pow(sign * p.value - a - b * phi(p.step), 2);
      double s2 = std::max(sse / (n - 2), 1e-12 * (1.0 + var_v));
      // Prediction variance at the final step: parameter + measurement noise.
      double f = phi(final_step);
      double lev = (spp - 2 * f * sp + f * f * s1) / det;  // xᵀ(XᵀX)⁻¹x
      models.push_back(
          {-0.5 * n * std::log(std::max(sse, 1e-300) / n), a + b * f, std::sqrt(s2 * (1.0 + lev))});
    }
  }
  if (models.empty()) return false;
  double max_ll = -std::numeric_limits<double>::infinity();
  for (const auto& m : models) max_ll = std::max(max_ll, m.log_lik);
  double wsum = 0, p_better = 0;
  for (const auto& m : models) {
    double w = std::exp(m.log_lik - max_ll);
    wsum += w;
    p_better += w * 0.5 * std::erfc(-(bar - m.mean) / (m.sd * std::sqrt(2.0)));
  }
  return p_better / wsum < options.probability;
}

}  // namespace stoker::tune
