#include "server/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stoker::server {
namespace {

constexpr int64_t kS = 1000000;
constexpr int64_t kNow = 1795000000LL * kS;
constexpr double kHour = 3600;

TEST(FairShareTest, AnHourJustEndedCountsAlmostAllOfIt) {
  // One GPU for the last hour with a one-day half-life: the early part has
  // decayed a little, so just under 3600 GPU-seconds.
  auto u = UsageFromHistory({{"alice", 1, kNow - 3600 * kS, kNow}}, kNow, 24 * kHour);
  EXPECT_LT(u["alice"], 3600);
  EXPECT_GT(u["alice"], 3600 * 0.98);
}

TEST(FairShareTest, UsageOneHalfLifeAgoCountsHalf) {
  // A short burst (1 s of 4 GPUs) one half-life ago counts half of 4 GPU-seconds.
  int64_t at = kNow - static_cast<int64_t>(24 * kHour) * kS;
  auto u = UsageFromHistory({{"bob", 4, at, at + kS}}, kNow, 24 * kHour);
  EXPECT_NEAR(u["bob"], 2.0, 1e-4);
  auto two = UsageFromHistory({{"bob", 4, at - 24 * 3600 * kS, at - 24 * 3600 * kS + kS}}, kNow,
                              24 * kHour);
  EXPECT_NEAR(two["bob"], 1.0, 1e-4);
}

TEST(FairShareTest, MatchesTickByTickAccrual) {
  // The controller adds g x dt each tick and decays what it has by 2^(-dt/h);
  // with small ticks that converges to the closed form.
  const double h = 2 * kHour;
  const double g = 0.5;
  double accrued = 0;
  int64_t start = kNow - 3 * 3600 * kS, end = kNow - 1800 * kS;
  for (int64_t t = start + kS; t <= kNow; t += kS) {
    accrued *= std::exp2(-1.0 / h);
    if (t <= end) accrued += g * 1.0;
  }
  auto u = UsageFromHistory({{"carol", g, start, end}}, kNow, h);
  EXPECT_NEAR(u["carol"], accrued, accrued * 1e-3);
}

TEST(FairShareTest, SumsPerUserAndIgnoresEmptyAndFutureParts) {
  auto u = UsageFromHistory({{"a", 1, kNow - 10 * kS, kNow - 5 * kS},
                             {"a", 1, kNow - 5 * kS, kNow + 100 * kS},  // still running: up to now
                             {"b", 0, kNow - 10 * kS, kNow},            // no GPUs
                             {"c", 2, kNow, kNow - kS}},                // inverted
                            kNow, 24 * kHour);
  EXPECT_NEAR(u["a"], 10.0, 0.01);
  EXPECT_EQ(u.count("b"), 0u);
  EXPECT_EQ(u.count("c"), 0u);
}

TEST(FairShareTest, CountsWholeGpusAndSharesOfPlacedReplicas) {
  scheduler::PlacedReplica shared, whole, cpu_only;
  shared.gpus = {{0, 0.25, 4ull << 30}};
  whole.gpus = {{1, 1.0, 16ull << 30}, {2, 1.0, 16ull << 30}};
  EXPECT_DOUBLE_EQ(HeldGpus({shared, whole, cpu_only}), 2.25);
  EXPECT_DOUBLE_EQ(HeldGpus({}), 0);
}

}  // namespace
}  // namespace stoker::server
