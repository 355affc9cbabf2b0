#include "tune/gp_bo.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace stoker::tune {
namespace {

constexpr double kLog2Pi = 1.8378770664093453;

struct Scored {
  double value;
  std::vector<double> u;
};

Eigen::MatrixXd ToMatrix(const std::vector<std::vector<double>>& pts, int d) {
  Eigen::MatrixXd m(d, pts.size());
  for (size_t c = 0; c < pts.size(); ++c) {
    for (int j = 0; j < d; ++j) m(j, c) = pts[c][j];
  }
  return m;
}

// A canonical point with every slot drawn at random.
std::vector<double> RandomPoint(const Encoding& enc, Rng& rng) {
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> cube(enc.size());
  for (double& c : cube) c = unif(rng);
  return FromCube(enc, cube);
}

// A neighbour of u: either a Gaussian step of size sigma in every numeric
// slot, or one move in one slot (a step, a ±1 level, another category).
std::vector<double> Mutate(const Encoding& enc, const std::vector<double>& u, double sigma,
                           Rng& rng) {
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v = u;
  std::vector<int> active;
  for (int i = 0; i < enc.size(); ++i) {
    if (u[i] != kInactive) active.push_back(i);
  }
  if (active.empty()) return v;
  if (unif(rng) < 0.5) {
    for (int i : active) {
      if (!enc.IsCategorical(i)) v[i] += sigma * normal(rng);
    }
  } else {
    int i = active[std::uniform_int_distribution<int>(0, active.size() - 1)(rng)];
    int levels = enc.Levels(i);
    if (levels == 0) {
      v[i] += sigma * normal(rng);
    } else if (levels > 1) {
      int level = enc.LevelOf(i, v[i]);
      if (enc.IsCategorical(i) || unif(rng) < 0.2) {
        int other = std::uniform_int_distribution<int>(0, levels - 2)(rng);
        level = other >= level ? other + 1 : other;
      } else {
        level = std::clamp(level + (unif(rng) < 0.5 ? -1 : 1), 0, levels - 1);
      }
      v[i] = enc.LevelValue(i, level);
    }
  }
  enc.Repair(v, [&](int i) {
    return enc.IsCategorical(i) ? std::floor(unif(rng) * enc.Levels(i)) : unif(rng);
  });
  return v;
}

class Acquisition {
 public:
  Acquisition(const GaussianProcess& gp, double best) : gp_(gp), best_(best) {}
  std::vector<double> operator()(const std::vector<std::vector<double>>& pts) const {
    Eigen::VectorXd mean, var;
    gp_.Predict(ToMatrix(pts, gp_.dims()), &mean, &var);
    std::vector<double> out(pts.size());
    for (size_t i = 0; i < pts.size(); ++i) {
      out[i] = LogExpectedImprovement(best_, mean[i], std::sqrt(var[i]));
    }
    return out;
  }

 private:
  const GaussianProcess& gp_;
  double best_;
};

// A box in the unit representation that numeric slots are confined to;
// empty bounds: the whole cube.
struct Region {
  std::vector<double> lo, hi;
};

// u with every active numeric slot clamped into the region (then snapped);
// with `squeeze`, mapped from [0, 1] onto the region's side instead.
void Confine(const Encoding& enc, const Region& r, bool squeeze, std::vector<double>& u) {
  if (r.lo.empty()) return;
  for (int j = 0; j < enc.size(); ++j) {
    if (u[j] == kInactive || enc.IsCategorical(j)) continue;
    double v = squeeze ? r.lo[j] + (r.hi[j] - r.lo[j]) * u[j] : std::clamp(u[j], r.lo[j], r.hi[j]);
    u[j] = enc.Snap(j, v);
  }
}

// All evaluated candidates, best first.
std::vector<Scored> MaximizeAcquisition(const Encoding& enc, const Acquisition& acq,
                                        const std::vector<std::vector<double>>& observed,
                                        const std::vector<double>& y, int budget,
                                        const Region& region, Rng& rng) {
  std::vector<Scored> all;
  auto evaluate = [&](std::vector<std::vector<double>>& pts) {
    std::vector<double> v = acq(pts);
    size_t first = all.size();
    for (size_t i = 0; i < pts.size(); ++i) all.push_back({v[i], std::move(pts[i])});
    return first;
  };
  // Starting pool: random, quasi-random, and perturbations of the best.
  std::vector<std::vector<double>> pool;
  const int n_global = std::max(32, budget / 4);
  ScrambledHalton halton(enc.size(), rng());
  for (int i = 0; i < n_global; ++i) {
    pool.push_back(i % 2 == 0 ? RandomPoint(enc, rng) : FromCube(enc, halton.Point(i + 1)));
    Confine(enc, region, true, pool.back());
  }
  std::vector<int> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return y[a] < y[b]; });
  const int n_top = std::min<int>(5, order.size());
  for (int t = 0; t < n_top; ++t) {
    for (int k = 0; k < 12; ++k) {
      pool.push_back(Mutate(enc, observed[order[t]], 0.05, rng));
      Confine(enc, region, false, pool.back());
    }
  }
  const int used = static_cast<int>(pool.size());
  evaluate(pool);
  // Distinct starts.
  std::vector<int> idx(all.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return all[a].value > all[b].value; });
  const int kStarts = 5, kNeighbours = 16;
  struct Walker {
    std::vector<double> u;
    double value;
    double sigma;
  };
  std::vector<Walker> walkers;
  for (int i : idx) {
    if (static_cast<int>(walkers.size()) >= kStarts) break;
    bool dup = false;
    for (const auto& w : walkers) dup |= w.u == all[i].u;
    if (!dup) walkers.push_back({all[i].u, all[i].value, 0.1});
  }
  const int rounds = std::max(3, (budget - used) / (kStarts * kNeighbours));
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<double>> batch;
    for (const auto& w : walkers) {
      for (int k = 0; k < kNeighbours; ++k) {
        batch.push_back(Mutate(enc, w.u, w.sigma, rng));
        Confine(enc, region, false, batch.back());
      }
    }
    size_t first = evaluate(batch);
    for (size_t w = 0; w < walkers.size(); ++w) {
      int best = -1;
      for (int k = 0; k < kNeighbours; ++k) {
        const Scored& s = all[first + w * kNeighbours + k];
        if (s.value > walkers[w].value && (best < 0 || s.value > all[best].value)) {
          best = static_cast<int>(first + w * kNeighbours + k);
        }
      }
      if (best >= 0) {
        walkers[w].u = all[best].u;
        walkers[w].value = all[best].value;
        walkers[w].sigma = std::min(0.3, walkers[w].sigma * 1.5);
      } else {
        walkers[w].sigma = std::max(1e-4, walkers[w].sigma * 0.5);
      }
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Scored& a, const Scored& b) { return a.value > b.value; });
  return all;
}

// Whether u lies within kBatchRadius (unit-cube distance; a different
// category or activity counts 1) of a point of the current batch. Keeps a
// parallel batch from spending trials on near-copies when the model is sure.
constexpr double kBatchRadius = 0.01;
bool TooClose(const Encoding& enc, const std::vector<double>& u,
              const std::vector<std::vector<double>>& batch) {
  for (const auto& b : batch) {
    double d2 = 0;
    for (int j = 0; j < enc.size() && d2 < kBatchRadius * kBatchRadius; ++j) {
      bool iu = u[j] == kInactive, ib = b[j] == kInactive;
      if (iu || ib || enc.IsCategorical(j)) {
        d2 += (iu == ib && u[j] == b[j]) ? 0.0 : 1.0;
      } else {
        d2 += (u[j] - b[j]) * (u[j] - b[j]);
      }
    }
    if (d2 < kBatchRadius * kBatchRadius) return true;
  }
  return false;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double NormalQuantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  p = std::clamp(p, 1e-300, 1.0 - 1e-16);
  double x;
  if (p < 0.02425) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step against the exact CDF.
  double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double LogExpectedImprovement(double best, double mean, double sd) {
  sd = std::max(sd, 1e-12);
  double z = (best - mean) / sd;
  double log_h;
  if (z > -6) {
    double h = z * 0.5 * std::erfc(-z / std::sqrt(2.0)) + std::exp(-0.5 * z * z - 0.5 * kLog2Pi);
    log_h = std::log(std::max(h, 1e-300));
  } else {
    // zΦ(z) + φ(z) = φ(z)(1 − x R(x)) with x = −z and the Mills ratio
    // R(x) = Φ(−x)/φ(x) = 1/(x + 1/(x + 2/(x + 3/(x + …)))), evaluated
    // bottom-up; converges quickly for x ≥ 6.
    double x = -z, cf = x;
    for (int k = 60; k >= 1; --k) cf = x + k / cf;
    double r = 1.0 / cf;
    log_h = -0.5 * z * z - 0.5 * kLog2Pi + std::log(1.0 - x * r);
  }
  return std::log(sd) + log_h;
}

std::vector<double> WarpObjectives(const std::vector<double>& y, OutputWarping warping) {
  const size_t n = y.size();
  std::vector<double> w = y;
  if (n == 0) return w;
  if (n >= 3 && warping == OutputWarping::kLog) {
    double lo = *std::min_element(y.begin(), y.end());
    double shift = 0.1 * (Median(y) - lo);
    if (shift <= 0) shift = 1e-12 + 1e-9 * std::fabs(lo);
    for (size_t i = 0; i < n; ++i) w[i] = std::log(y[i] - lo + shift);
  } else if (n >= 3 && warping != OutputWarping::kNone) {
    // Ranks (ties get their mean rank), as quantiles (r + 0.5) / n.
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return y[a] < y[b]; });
    std::vector<double> q(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && y[order[j + 1]] == y[order[i]]) ++j;
      for (size_t k = i; k <= j; ++k) q[order[k]] = (0.5 * (i + j) + 0.5) / n;
      i = j + 1;
    }
    if (warping == OutputWarping::kRank) {
      for (size_t i = 0; i < n; ++i) w[i] = NormalQuantile(q[i]);
    } else {
      // Half-rank (Vizier): keep the better half as is; map the worse half
      // onto a Gaussian tail whose scale is the better half's spread, so one
      // huge value cannot flatten the model near the optimum.
      double med = Median(y);
      double ss = 0;
      int good = 0;
      for (double v : y) {
        if (v <= med) ss += (v - med) * (v - med), ++good;
      }
      double sd = good > 1 ? std::sqrt(ss / good) : 0.0;
      if (sd <= 0) {
        double mean = std::accumulate(y.begin(), y.end(), 0.0) / n, s2 = 0;
        for (double v : y) s2 += (v - mean) * (v - mean);
        sd = std::sqrt(s2 / n);
      }
      if (sd > 0) {
        for (size_t i = 0; i < n; ++i) {
          if (y[i] > med) w[i] = std::min(y[i], med + sd * NormalQuantile(q[i]));
        }
      }
    }
  }
  double mean = std::accumulate(w.begin(), w.end(), 0.0) / n, s2 = 0;
  for (double v : w) s2 += (v - mean) * (v - mean);
  double sd = std::sqrt(s2 / n);
  for (double& v : w) v = sd > 0 ? (v - mean) / sd : 0.0;
  return w;
}

namespace {

// The model's targets: the feasible objectives warped; infeasible points
// one standard deviation above the worst feasible value, so that the model
// steers away from their region. Needs a feasible point.
std::vector<double> ModelTargets(const std::vector<double>& raw, const std::vector<bool>& feasible,
                                 OutputWarping warping) {
  std::vector<double> fy;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (feasible[i]) fy.push_back(raw[i]);
  }
  std::vector<double> wf = WarpObjectives(fy, warping);
  double worst = *std::max_element(wf.begin(), wf.end()) + 1.0;
  std::vector<double> y(raw.size());
  for (size_t i = 0, k = 0; i < raw.size(); ++i) y[i] = feasible[i] ? wf[k++] : worst;
  return y;
}

// The trust region's side length, replayed from the feasible objectives in
// the order they were observed (see GpBoOptions::trust_region).
double TrustRegionLength(const std::vector<double>& raw, const std::vector<bool>& feasible,
                         int n_init, int d) {
  constexpr double kInit = 0.8, kMax = 1.6, kMin = kInit / 128;
  const int fail_limit = std::max(4, d);
  double length = kInit, best = INFINITY;
  int successes = 0, failures = 0, seen = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (!feasible[i]) continue;
    bool better = raw[i] < best - 1e-3 * std::fabs(best);
    best = std::min(best, raw[i]);
    if (++seen <= n_init) continue;
    successes = better ? successes + 1 : 0;
    failures = better ? 0 : failures + 1;
    if (successes == 3) length = std::min(kMax, 2 * length), successes = 0;
    if (failures == fail_limit) length /= 2, failures = 0;
    if (length < kMin) length = kInit;
  }
  return length;
}

// The box of side length·w_j around `center` in each numeric slot j, w_j
// the slot's length scale over the geometric mean of the numeric ones.
Region TrustRegion(const Encoding& enc, const std::vector<double>& center,
                   const Eigen::VectorXd& theta, double length) {
  double log_mean = 0;
  int numeric = 0;
  for (int j = 0; j < enc.size(); ++j) {
    if (!enc.IsCategorical(j)) log_mean += theta[j], ++numeric;
  }
  log_mean /= std::max(1, numeric);
  Region r{std::vector<double>(enc.size(), 0.0), std::vector<double>(enc.size(), 1.0)};
  for (int j = 0; j < enc.size(); ++j) {
    if (enc.IsCategorical(j) || center[j] == kInactive) continue;
    double half = 0.5 * length * std::exp(theta[j] - log_mean);
    r.lo[j] = std::max(0.0, center[j] - half);
    r.hi[j] = std::min(1.0, center[j] + half);
  }
  return r;
}

// The initial design's point number *index (1-based, one per trial of the
// study), which it advances: the centre of the space first when
// centre_first, else the Halton sequence, skipping points already taken.
Assignment DesignPoint(const Encoding& enc, const ScrambledHalton& halton, bool centre_first,
                       const std::set<std::string>& taken, uint64_t* index) {
  if (*index == 1 && centre_first) {
    ++*index;  // the centre takes the design's first point
    return enc.Decode(FromCube(enc, std::vector<double>(enc.size(), 0.5)));
  }
  Assignment a;
  for (int attempt = 0; attempt < 64; ++attempt) {
    a = enc.Decode(FromCube(enc, halton.Point((*index)++)));
    if (!taken.count(Key(a))) break;
  }
  return a;
}

}  // namespace

std::vector<Assignment> GpBoSampler::Suggest(const Space& space,
                                             const std::vector<Observation>& done,
                                             const std::vector<Assignment>& pending, int count,
                                             Rng& rng) {
  std::vector<Assignment> out;
  if (count <= 0 || !ValidateSpace(space).ok()) return out;
  Encoding enc(space);
  const int d = enc.size();
  const int n_init =
      options_.initial_points > 0 ? options_.initial_points : std::clamp(d + 1, 5, 10);

  std::set<std::string> taken;
  for (const auto& o : done) taken.insert(Key(o.params));
  for (const auto& a : pending) taken.insert(Key(a));
  auto take = [&](Assignment a) {
    taken.insert(Key(a));
    out.push_back(std::move(a));
  };
  auto take_random = [&]() {
    Assignment a;
    for (int attempt = 0; attempt < 64; ++attempt) {
      a = enc.Decode(RandomPoint(enc, rng));
      if (!taken.count(Key(a))) break;
    }
    take(std::move(a));
  };

  std::vector<std::vector<double>> xs;
  std::vector<double> raw;
  std::vector<bool> feasible;
  for (const auto& o : done) {
    xs.push_back(enc.Encode(o.params));
    bool ok = o.feasible && std::isfinite(o.objective);
    feasible.push_back(ok);
    raw.push_back(ok ? o.objective : 0.0);
  }
  const int n_feasible = static_cast<int>(std::count(feasible.begin(), feasible.end(), true));

  // 1. Initial design.
  ScrambledHalton halton(d, options_.seed);
  uint64_t index = done.size() + pending.size() + 1;
  while (static_cast<int>(out.size()) < count &&
         (static_cast<int>(done.size() + pending.size() + out.size()) < n_init || n_feasible < 2)) {
    take(DesignPoint(enc, halton, options_.centre_first, taken, &index));
  }
  if (static_cast<int>(out.size()) >= count) return out;

  // 2. Warped targets.
  std::vector<double> y = ModelTargets(raw, feasible, options_.warping);

  // 3. Fit.
  std::vector<bool> categorical(d);
  for (int j = 0; j < d; ++j) categorical[j] = enc.IsCategorical(j);
  GaussianProcess gp(categorical, options_.quadratic_trend);
  GpFitOptions fit = options_.fit;
  Eigen::VectorXd warm;
  const bool full_refit = last_theta_.size() != gp.theta_size() || done.size() % 10 == 0;
  if (!full_refit) {
    warm = last_theta_;
    fit.restarts = options_.warm_restarts;
    fit.max_iterations = options_.warm_iterations;
  }
  Eigen::MatrixXd x = ToMatrix(xs, d);
  Eigen::VectorXd yv = Eigen::Map<const Eigen::VectorXd>(y.data(), y.size());
  if (!gp.Fit(x, yv, fit, warm, rng)) {
    while (static_cast<int>(out.size()) < count) take_random();
    return out;
  }
  last_theta_ = gp.theta();

  // 5. Pending points (and, below, chosen ones) as kriging-believer fantasies.
  std::vector<std::vector<double>> all_x = xs;
  std::vector<double> all_y = y;
  auto add_fantasies = [&](const std::vector<std::vector<double>>& pts) {
    if (pts.empty()) return;
    Eigen::VectorXd mean, var;
    gp.Predict(ToMatrix(pts, d), &mean, &var);
    for (size_t i = 0; i < pts.size(); ++i) {
      all_x.push_back(pts[i]);
      all_y.push_back(mean[i]);
    }
    gp.SetData(ToMatrix(all_x, d), Eigen::Map<const Eigen::VectorXd>(all_y.data(), all_y.size()));
  };
  std::vector<std::vector<double>> pend;
  for (const auto& a : pending) pend.push_back(enc.Encode(a));
  add_fantasies(pend);
  // Points of the current parallel batch: pending ones and those chosen now.
  std::vector<std::vector<double>> batch_points = pend;

  // 4. Maximise log EI, one point at a time.
  const double n = static_cast<double>(all_x.size());
  const int budget = std::clamp(static_cast<int>(options_.acquisition_evaluations * 9e4 / (n * n)),
                                500, options_.acquisition_evaluations);
  Region region;
  if (options_.trust_region) {
    int incumbent = static_cast<int>(std::min_element(y.begin(), y.end()) - y.begin());
    region =
        TrustRegion(enc, xs[incumbent], gp.theta(), TrustRegionLength(raw, feasible, n_init, d));
  }
  while (static_cast<int>(out.size()) < count) {
    double best = *std::min_element(all_y.begin(), all_y.end());
    Acquisition acq(gp, best);
    std::vector<Scored> cands = MaximizeAcquisition(enc, acq, xs, y, budget, region, rng);
    bool found = false;
    for (const auto& c : cands) {
      if (TooClose(enc, c.u, batch_points)) continue;
      Assignment a = enc.Decode(c.u);
      if (taken.count(Key(a))) continue;
      batch_points.push_back(c.u);
      take(std::move(a));
      if (static_cast<int>(out.size()) < count) add_fantasies({c.u});
      found = true;
      break;
    }
    if (!found) take_random();
  }
  return out;
}

}  // namespace stoker::tune
