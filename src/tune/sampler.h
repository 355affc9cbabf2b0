// Samplers: the one-method interface that proposes the next trials of a study.
//
// A Sampler is a pure function of the search space, the finished trials, the
// trials still running and a seeded RNG — no I/O, no clock — so a study can be
// replayed exactly. Implementations may keep a cache that only makes later
// calls faster or better started (GpBoSampler keeps its last GP fit as a warm
// start); the same sequence of calls with the same seeds gives the same
// suggestions. Not thread-safe: one Sampler per study, called from one thread.
//
// Objective convention: Observation::objective is LOWER-IS-BETTER. The study
// driver negates metrics whose goal is MAXIMIZE (and GOAL_TYPE_UNSPECIFIED,
// which Vertex treats as maximize) before building Observations; see
// MinimizationObjective.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "tune/space.h"

namespace stoker::tune {

using Rng = std::mt19937_64;

struct Observation {
  Assignment params;
  double objective = 0.0;  // lower is better; ignored when !feasible
  // False for INFEASIBLE trials (finished without a usable measurement) and
  // non-finite objectives; GpBoSampler models them as the worst value seen.
  bool feasible = true;
};

// The lower-is-better objective of a metric value.
inline double MinimizationObjective(double value, bool maximize) {
  return maximize ? -value : value;
}

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Up to `count` new assignments, none equal to a `pending` one (and, where
  // the sampler can tell, none equal to a `done` one). Fewer only when the
  // space is exhausted (GridSampler) or `space` is invalid: callers must
  // check ValidateSpace(space) first; an invalid space yields no suggestions.
  virtual std::vector<Assignment> Suggest(const Space& space, const std::vector<Observation>& done,
                                          const std::vector<Assignment>& pending, int count,
                                          Rng& rng) = 0;
};

// GRID_SEARCH: every combination of INTEGER, DISCRETE and CATEGORICAL values
// (conditional children expanded under the parent values that activate
// them), in a fixed odometer order — the first parameter varies slowest,
// values in their declared order — skipping points already done or pending.
// A space with a DOUBLE parameter yields nothing (ValidateGridSpace says why).
class GridSampler final : public Sampler {
 public:
  std::vector<Assignment> Suggest(const Space& space, const std::vector<Observation>& done,
                                  const std::vector<Assignment>& pending, int count,
                                  Rng& rng) override;
};
// InvalidArgument naming the first DOUBLE parameter, or when the grid has
// more than `max_points` points.
Status ValidateGridSpace(const Space& space, int64_t max_points = 1'000'000);
// Every grid point in enumeration order (for tests and the driver's
// "maxTrialCount > grid size" check).
std::vector<Assignment> EnumerateGrid(const Space& space);

// RANDOM_SEARCH: independent uniform draws in the encoded (scaled) space, so
// LOG parameters are log-uniform. Retries a few times to avoid repeating a
// done or pending point in small discrete spaces.
class RandomSampler final : public Sampler {
 public:
  std::vector<Assignment> Suggest(const Space& space, const std::vector<Observation>& done,
                                  const std::vector<Assignment>& pending, int count,
                                  Rng& rng) override;
};

// Scrambled Halton sequence in [0,1)^dims: radical inverses in the first
// `dims` primes with a random digit permutation per dimension (0 kept fixed)
// and a random Cranley-Patterson shift, both drawn from `seed`.
class ScrambledHalton {
 public:
  ScrambledHalton(int dims, uint64_t seed);
  std::vector<double> Point(uint64_t index) const;

 private:
  std::vector<int> bases_;
  std::vector<std::vector<int>> perms_;
  std::vector<double> shift_;
};

// A low-discrepancy design: point k of a ScrambledHalton sequence (seeded by
// the constructor's seed, fixed for the study) where k counts done + pending
// trials, so successive calls continue one sequence. The per-call rng is
// unused.
class QuasiRandomSampler final : public Sampler {
 public:
  explicit QuasiRandomSampler(uint64_t seed) : seed_(seed) {}
  std::vector<Assignment> Suggest(const Space& space, const std::vector<Observation>& done,
                                  const std::vector<Assignment>& pending, int count,
                                  Rng& rng) override;

 private:
  uint64_t seed_;
};

// Maps a point of [0,1]^size to a canonical unit point of `enc`: numeric
// slots snapped, categorical slots to index floor(c·K), inactive children
// set to kInactive.
std::vector<double> FromCube(const Encoding& enc, const std::vector<double>& cube);

// Vertex AI algorithms. kDefault is ALGORITHM_UNSPECIFIED (Bayesian
// optimisation: GpBoSampler).
enum class Algorithm { kDefault, kGrid, kRandom, kQuasiRandom };
// `seed` fixes the study's quasi-random design; per-call randomness comes
// from the Rng passed to Suggest.
std::unique_ptr<Sampler> MakeSampler(Algorithm algorithm, uint64_t seed);

}  // namespace stoker::tune
