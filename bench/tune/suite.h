// The tuner benchmark suite (issue #33): test functions with known optima,
// their search spaces, observation noise and study parallelism — defined once,
// here. tune-bench runs Stoker's samplers on them directly; the Optuna side
// (optuna_bench.py) reads the spaces from `tune-bench spec` (JSON) and has
// every point evaluated by `tune-bench eval`, so the formulas, shifts, noise
// and optima exist in this one place.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tune/space.h"

namespace stoker::bench {

// One suite entry: a (function, space, noise, parallelism) combination. Each
// entry gives one row per budget in the report.
struct Entry {
  std::string name;
  std::string source;  // where the formula comes from, and what the entry tests
  tune::Space space;
  double optimum = 0;  // the noise-free global minimum inside the space
  double noise = 0;    // standard deviation of the Gaussian observation noise
  int parallel = 1;    // trials asked per round, all asked before any is told
  std::function<double(const tune::Assignment&)> f;  // noise-free value
};

const std::vector<Entry>& Suite();
const Entry* FindEntry(const std::string& name);

// The value a study sees for trial `trial` of the study with seed `seed`:
// the noise-free value plus the entry's noise, drawn from a hash of
// (seed, trial) so that every sampler sees the same noise sequence.
double Observed(const Entry& e, double true_value, int seed, int trial);

// The suite's spaces as JSON (one object per entry: name, source, optimum,
// noise, parallel, params with kind/min/max/scale/values/categories/children).
nlohmann::json SpecJson();

// A JSON params object ({"x0": 1.5, "optimizer": "adam"}) as an Assignment.
tune::Assignment FromJson(const nlohmann::json& params);

}  // namespace stoker::bench
