// GpBoSampler: Gaussian-process Bayesian optimisation, the default algorithm
// (Vertex ALGORITHM_UNSPECIFIED).
//
// Per call (see README.md for the reasoning and the papers):
//  1. While fewer than `initial_points` trials exist (done + pending), or
//     fewer than 2 feasible ones, suggest points of a scrambled Halton design
//     (seeded by options.seed, continued across calls); a study's first
//     trial is the centre of the space (centre_first).
//  2. Warp the objectives (lower is better): half-rank warping of the worse
//     half onto a Gaussian tail, then z-scoring; infeasible trials take the
//     worst warped value.
//  3. Fit a Matérn-5/2 ARD GP with a quadratic trend (gp.h) by MAP:
//     L-BFGS from the best of 17 screened starts, or from the previous
//     call's fit (every 10th observation count refits from scratch); above
//     max_fit_points observations the hyperparameters are fitted on a subset.
//  4. Maximise log expected improvement over the unit representation (or,
//     by default, a trust region around the incumbent: see trust_region) with
//     a batched multi-start local search: random + Halton candidates and
//     perturbations of the best observations seed adaptive-step moves
//     (Gaussian steps in continuous slots, ±1-level moves in integer and
//     discrete ones, category swaps, children activated by parent moves).
//  5. Batches and pending trials: kriging believer — each pending point and
//     each point already chosen in this call is added with the GP mean as
//     its value, so the next choice moves away from it. No suggestion equals
//     a done, pending or already chosen one.
// Deterministic for a given options.seed, call sequence and Rng state.
#pragma once

#include <Eigen/Dense>

#include "tune/gp.h"
#include "tune/sampler.h"

namespace stoker::tune {

// kHalfRank (default): see step 2 above. kRank: every value replaced by the
// normal quantile of its rank. kLog: log(y - min + 0.1·(median - min)),
// compressing the worse values while stretching the best ones. kNone: z-score only.
enum class OutputWarping { kNone, kHalfRank, kRank, kLog };

struct GpBoOptions {
  uint64_t seed = 0;       // scramble of the initial quasi-random design
  int initial_points = 0;  // 0: clamp(D + 1, 5, 10) for D encoded slots
  GpFitOptions fit;        // hyperparameter fitting
  // Once a previous fit exists its θ is the only start, run for at most
  // warm_iterations; every 10th observation count refits from scratch.
  int warm_restarts = 1;
  int warm_iterations = 12;
  // Acquisition evaluations per suggestion at small n; scaled down as n²
  // grows so that a call stays well under a second at 1000 observations.
  int acquisition_evaluations = 3000;
  OutputWarping warping = OutputWarping::kHalfRank;
  // Confine the acquisition search to a trust region around the incumbent
  // (TuRBO: Eriksson et al., NeurIPS 2019): a box of side L·w_j in slot j,
  // w_j the length scale over their geometric mean. L is replayed from the
  // history each call: 0.8 after the initial design, doubled (to at most
  // 1.6) after 3 improvements in a row, halved after max(4, D) trials
  // without one, and reset to 0.8 below 0.8·2^-7. On by default: on the
  // 31-entry suite (bench/tune/RESULTS.md, 2026-11-28) it had lower regret
  // than the global search in 32 of 124 cells and higher in none.
  bool trust_region = true;
  // Add the quadratic trend term to the kernel (gp.h). On by default: on the
  // suite (bench/tune/RESULTS.md, 2026-11-29, 20 seeds) it had significantly
  // lower regret than without in 11 of 124 cells and higher in 1.
  bool quadratic_trend = true;
  // A study's first trial is the centre of the unit representation (the
  // middle of each range, geometric for log scales; the middle level or
  // category), as open-source Vizier's GP bandit seeds it. On by default: on
  // the suite (bench/tune/RESULTS.md, 2026-11-30, 20 seeds) it had
  // significantly lower regret in 26 of 124 cells and higher in 2 (27 and 4
  // on fresh seeds); the losses are Levy's, whose centre is a side basin.
  bool centre_first = true;
};

class GpBoSampler final : public Sampler {
 public:
  explicit GpBoSampler(GpBoOptions options = {}) : options_(options) {}
  std::vector<Assignment> Suggest(const Space& space, const std::vector<Observation>& done,
                                  const std::vector<Assignment>& pending, int count,
                                  Rng& rng) override;

 private:
  GpBoOptions options_;
  Eigen::VectorXd last_theta_;  // warm start; only its size is checked
};

// The warped, standardised objectives (lower is better) used as GP targets.
std::vector<double> WarpObjectives(const std::vector<double>& y, OutputWarping warping);

// log E[max(best - f, 0)] for f ~ N(mean, sd²): accurate far into the tail.
double LogExpectedImprovement(double best, double mean, double sd);

// Φ⁻¹(p) for p in (0, 1) (Acklam's rational approximation, refined once).
double NormalQuantile(double p);

}  // namespace stoker::tune
