// Automated early stopping of running trials (Vertex
// medianAutomatedStoppingSpec and decayCurveStoppingSpec). Pure functions of
// the learning curves; the study driver calls them whenever a running trial
// reports a measurement and stops the trial when they return true. The
// x-axis is whatever the spec asks for: stepCount, or elapsedDuration in
// seconds when useElapsedDuration is set.
#pragma once

#include <vector>

namespace stoker::tune {

struct CurvePoint {
  double step;   // stepCount or elapsed seconds
  double value;  // the objective metric, in its own sign (see `minimize`)
};
// Measurements of one trial, ordered by step.
using Curve = std::vector<CurvePoint>;

struct MedianStopOptions {
  // Completed trials with a measurement at or before the running trial's
  // latest step needed before the rule may stop anything.
  int min_completed = 3;
};

// Vizier's median rule: stop when the running trial's best value so far is
// worse than the median, over completed trials, of their running averages
// (mean of their measurements up to the running trial's latest step).
bool MedianStop(const std::vector<Curve>& completed, const Curve& running, bool minimize,
                const MedianStopOptions& options = {});

struct DecayCurveOptions {
  int min_points = 5;         // measurements of the running trial before judging
  int min_completed = 1;      // completed trials needed (they set the bar and the horizon)
  double probability = 0.05;  // stop when P(final better than the bar) < this
};

// Decay-curve rule: fits saturating curves v(t) = a + b·φ_c(t) to the running
// trial, with φ_c(t) = exp(-c t/T₀) (exponential) or (1 + t/T₀)^(-c) (power
// law) for a grid of rates c (T₀ = its latest step), (a, b) by least squares;
// averages the models' Gaussian predictions at the final step (the largest
// step a completed trial reached) with weights from their likelihoods; stops
// when the probability that the final value beats the best completed trial's
// last value is below options.probability. Never stops a trial that has
// reached the final step.
bool DecayCurveStop(const std::vector<Curve>& completed, const Curve& running, bool minimize,
                    const DecayCurveOptions& options = {});

}  // namespace stoker::tune
