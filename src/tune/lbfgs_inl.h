// Implementation of MinimizeLbfgsBox (declared in gp.h).
#pragma once

#include <cmath>
#include <deque>
#include <limits>

namespace stoker::tune {

template <typename F>
double MinimizeLbfgsBox(F&& f, Eigen::VectorXd& x, const Eigen::VectorXd& lo,
                        const Eigen::VectorXd& hi, int max_iterations) {
  const int n = static_cast<int>(x.size());
  const int kMemory = 8;
  x = x.cwiseMax(lo).cwiseMin(hi);
  Eigen::VectorXd g(n), g_new(n);
  double fx = f(x, g);
  if (!std::isfinite(fx)) return fx;
  std::deque<Eigen::VectorXd> s_hist, y_hist;
  for (int iter = 0; iter < max_iterations; ++iter) {
    // Components at a bound whose gradient pushes outward are frozen.
    Eigen::VectorXd pg = g;
    for (int i = 0; i < n; ++i) {
      if ((x[i] <= lo[i] && g[i] > 0) || (x[i] >= hi[i] && g[i] < 0)) pg[i] = 0;
    }
    if (pg.lpNorm<Eigen::Infinity>() < 1e-6) break;
    // Two-loop recursion.
    Eigen::VectorXd q = pg;
    std::vector<double> a(s_hist.size());
    for (int k = static_cast<int>(s_hist.size()) - 1; k >= 0; --k) {
      a[k] = s_hist[k].dot(q) / y_hist[k].dot(s_hist[k]);
      q -= a[k] * y_hist[k];
    }
    if (!s_hist.empty()) q *= s_hist.back().dot(y_hist.back()) / y_hist.back().squaredNorm();
    for (size_t k = 0; k < s_hist.size(); ++k) {
      double b = y_hist[k].dot(q) / y_hist[k].dot(s_hist[k]);
      q += s_hist[k] * (a[k] - b);
    }
    Eigen::VectorXd d = -q;
    for (int i = 0; i < n; ++i) {
      if (pg[i] == 0) d[i] = 0;
    }
    if (g.dot(d) >= 0) {
      d = -pg;
      s_hist.clear();
      y_hist.clear();
    }
    double step = s_hist.empty() ? std::min(1.0, 1.0 / d.lpNorm<Eigen::Infinity>()) : 1.0;
    bool accepted = false;
    Eigen::VectorXd x_new;
    double f_new = 0;
    for (int ls = 0; ls < 25; ++ls) {
      x_new = (x + step * d).cwiseMax(lo).cwiseMin(hi);
      f_new = f(x_new, g_new);
      if (std::isfinite(f_new) && f_new <= fx + 1e-4 * g.dot(x_new - x)) {
        accepted = true;
        break;
      }
      step *= 0.5;
    }
    if (!accepted) {
      if (s_hist.empty()) break;
      s_hist.clear();
      y_hist.clear();
      continue;
    }
    Eigen::VectorXd s = x_new - x, yv = g_new - g;
    double change = fx - f_new;
    x = x_new;
    fx = f_new;
    g = g_new;
    if (s.dot(yv) > 1e-12) {
      s_hist.push_back(s);
      y_hist.push_back(yv);
      if (static_cast<int>(s_hist.size()) > kMemory) {
        s_hist.pop_front();
        y_hist.pop_front();
      }
    }
    if (change < 1e-7 * (1.0 + std::fabs(fx))) break;
  }
  return fx;
}

}  // namespace stoker::tune
