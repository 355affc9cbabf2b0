#include "tune/early_stopping.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stoker::tune {
namespace {

Curve Decay(double start, double end, double rate, int steps, double noise_seed = 0) {
  Curve c;
  for (int t = 1; t <= steps; ++t) {
    double wobble = noise_seed == 0 ? 0 : 0.002 * std::sin(noise_seed * t);
    c.push_back({double(t), end + (start - end) * std::exp(-rate * t) + wobble});
  }
  return c;
}

TEST(MedianStopTest, StopsATrialWorseThanTheMedianOfRunningAverages) {
  std::vector<Curve> done = {Decay(1, 0.1, 0.2, 50), Decay(1, 0.2, 0.2, 50),
                             Decay(1, 0.15, 0.2, 50)};
  Curve bad = Decay(3, 2.0, 0.2, 10);
  EXPECT_TRUE(MedianStop(done, bad, /*minimize=*/true));
}

TEST(MedianStopTest, KeepsATrialBetterThanTheMedian) {
  std::vector<Curve> done = {Decay(1, 0.1, 0.2, 50), Decay(1, 0.2, 0.2, 50),
                             Decay(1, 0.15, 0.2, 50)};
  Curve good = Decay(0.5, 0.05, 0.3, 10);
  EXPECT_FALSE(MedianStop(done, good, true));
}

TEST(MedianStopTest, UsesOnlyMeasurementsUpToTheRunningStep) {
  // Completed trials were bad early and good late: at step 5 their running
  // average is high, so a trial that is mediocre at step 5 keeps going.
  std::vector<Curve> done(3, Decay(10, 0.0, 0.1, 100));
  Curve running = Decay(5, 4.0, 1.0, 5);
  EXPECT_FALSE(MedianStop(done, running, true));
}

TEST(MedianStopTest, NeedsEnoughCompletedTrials) {
  std::vector<Curve> done = {Decay(1, 0.1, 0.2, 50)};
  EXPECT_FALSE(MedianStop(done, Decay(3, 2.0, 0.2, 10), true));
  EXPECT_TRUE(MedianStop(done, Decay(3, 2.0, 0.2, 10), true, {.min_completed = 1}));
  EXPECT_FALSE(MedianStop({}, Decay(3, 2.0, 0.2, 10), true));
  EXPECT_FALSE(MedianStop(done, {}, true, {.min_completed = 1}));
}

TEST(MedianStopTest, RespectsMaximize) {
  // Accuracy-like curves: higher is better.
  std::vector<Curve> done = {Decay(0.1, 0.9, 0.2, 50), Decay(0.1, 0.92, 0.2, 50),
                             Decay(0.1, 0.88, 0.2, 50)};
  EXPECT_TRUE(MedianStop(done, Decay(0.05, 0.2, 0.2, 10), /*minimize=*/false));
  EXPECT_FALSE(MedianStop(done, Decay(0.5, 0.99, 0.5, 10), false));
}

TEST(DecayCurveStopTest, StopsACurveConvergingAboveTheBest) {
  std::vector<Curve> done = {Decay(2, 0.2, 0.1, 100, 1.3), Decay(2, 0.3, 0.1, 100, 2.1)};
  Curve running = Decay(3, 1.0, 0.15, 20, 0.7);
  EXPECT_TRUE(DecayCurveStop(done, running, true));
}

TEST(DecayCurveStopTest, ContinuesACurveHeadingBelowTheBest) {
  std::vector<Curve> done = {Decay(2, 0.3, 0.1, 100, 1.3)};
  // Still at 1.0+ now, but decaying fast towards 0.1.
  Curve running = Decay(2.5, 0.1, 0.05, 15, 0.7);
  EXPECT_FALSE(DecayCurveStop(done, running, true));
}

TEST(DecayCurveStopTest, RespectsMaximize) {
  std::vector<Curve> done = {Decay(0.1, 0.9, 0.1, 100, 1.3)};
  EXPECT_TRUE(DecayCurveStop(done, Decay(0.05, 0.4, 0.2, 20, 0.7), /*minimize=*/false));
  EXPECT_FALSE(DecayCurveStop(done, Decay(0.05, 0.97, 0.05, 20, 0.7), false));
}

TEST(DecayCurveStopTest, WaitsForEnoughPointsAndNeverStopsAtTheEnd) {
  std::vector<Curve> done = {Decay(2, 0.2, 0.1, 100, 1.3)};
  EXPECT_FALSE(DecayCurveStop(done, Decay(3, 1.0, 0.15, 3), true));
  EXPECT_FALSE(DecayCurveStop(done, Decay(3, 1.0, 0.15, 100), true));
  EXPECT_FALSE(DecayCurveStop({}, Decay(3, 1.0, 0.15, 20), true));
}

}  // namespace
}  // namespace stoker::tune
