#include "tune/gp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tune/gp_bo.h"
#include "tune/space.h"

namespace stoker::tune {
namespace {

Eigen::MatrixXd RandomPoints(int d, int n, Rng& rng) {
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  Eigen::MatrixXd x(d, n);
  for (int c = 0; c < n; ++c) {
    for (int j = 0; j < d; ++j) x(j, c) = unif(rng);
  }
  return x;
}

// The analytic gradient of the negative log posterior at theta, component by
// component, against central differences.
void ExpectGradientMatchesFiniteDifferences(const GaussianProcess& gp, const Eigen::MatrixXd& x,
                                            const Eigen::VectorXd& y,
                                            const Eigen::VectorXd& theta) {
  Eigen::VectorXd grad;
  double f = gp.NegLogPosterior(x, y, theta, &grad);
  ASSERT_TRUE(std::isfinite(f));
  ASSERT_EQ(grad.size(), theta.size());
  for (int k = 0; k < theta.size(); ++k) {
    Eigen::VectorXd tp = theta, tm = theta;
    tp[k] += 1e-5;
    tm[k] -= 1e-5;
    double fd =
        (gp.NegLogPosterior(x, y, tp, nullptr) - gp.NegLogPosterior(x, y, tm, nullptr)) / 2e-5;
    EXPECT_NEAR(grad[k], fd, 1e-4 * std::max(1.0, std::fabs(fd))) << "component " << k;
  }
}

TEST(GaussianProcessTest, GradientMatchesFiniteDifferences) {
  Rng rng(7);
  Eigen::MatrixXd x = RandomPoints(3, 25, rng);
  x(2, 3) = kInactive;  // exercise the inactive and categorical branches
  for (int c = 0; c < 25; ++c) x(1, c) = c % 3;
  Eigen::VectorXd y(25);
  for (int c = 0; c < 25; ++c) y[c] = std::sin(5 * x(0, c)) + 0.3 * x(1, c);
  GaussianProcess gp({false, true, false});
  Eigen::VectorXd theta(5);
  theta << std::log(0.3), std::log(0.8), std::log(2.0), 0.2, std::log(1e-2);
  ExpectGradientMatchesFiniteDifferences(gp, x, y, theta);
}

TEST(GaussianProcessTest, GradientWithTheQuadraticTrendMatchesFiniteDifferences) {
  Rng rng(5);
  Eigen::MatrixXd x = RandomPoints(3, 20, rng);
  x(2, 4) = kInactive;
  for (int c = 0; c < 20; ++c) x(1, c) = c % 2;
  Eigen::VectorXd y(20);
  for (int c = 0; c < 20; ++c) y[c] = std::pow(x(0, c) + x(2, c) - 1.1, 2) - 0.2 * x(1, c);
  GaussianProcess gp({false, true, false}, /*quadratic_trend=*/true);
  ASSERT_EQ(gp.theta_size(), 6);
  Eigen::VectorXd theta(6);
  theta << std::log(0.4), std::log(0.7), std::log(1.5), -0.3, std::log(1e-2), std::log(0.2);
  ExpectGradientMatchesFiniteDifferences(gp, x, y, theta);
}

TEST(GaussianProcessTest, QuadraticTrendCarriesAnObliqueBowlAcrossTheBox) {
  // f = (x0 + x1 - 1)² + 3 (x0 - x1)²: a rotated bowl, sampled only in the
  // lower-left quarter; the trend must place its minimum near (0.5, 0.5)
  // where the stationary kernel alone reverts to the mean.
  Rng rng(13);
  Eigen::MatrixXd x = 0.45 * RandomPoints(2, 30, rng);
  auto f = [](double a, double b) { return std::pow(a + b - 1, 2) + 3 * std::pow(a - b, 2); };
  Eigen::VectorXd y(30);
  for (int c = 0; c < 30; ++c) y[c] = f(x(0, c), x(1, c));
  const double mu = y.mean(), sd = std::sqrt((y.array() - mu).square().mean());
  y = (y.array() - mu) / sd;
  Eigen::MatrixXd centre(2, 1);
  centre << 0.5, 0.5;
  const double truth = (f(0.5, 0.5) - mu) / sd;
  Eigen::VectorXd with_trend, without, var;
  GaussianProcess trend({false, false}, true), plain({false, false});
  ASSERT_TRUE(trend.Fit(x, y, {}, {}, rng));
  ASSERT_TRUE(plain.Fit(x, y, {}, {}, rng));
  trend.Predict(centre, &with_trend, &var);
  plain.Predict(centre, &without, &var);
  EXPECT_LT(std::fabs(with_trend[0] - truth), 0.1 * std::fabs(truth));
  EXPECT_LT(std::fabs(with_trend[0] - truth), 0.5 * std::fabs(without[0] - truth));
}

TEST(GaussianProcessTest, FitRecoversTheOrderOfLengthScales) {
  // Fast variation along x0, slow along x1, none along x2.
  Rng rng(11);
  Eigen::MatrixXd x = RandomPoints(3, 80, rng);
  Eigen::VectorXd y(80);
  for (int c = 0; c < 80; ++c) y[c] = std::sin(9 * x(0, c)) + 0.8 * std::sin(2.5 * x(1, c));
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  GaussianProcess gp({false, false, false});
  ASSERT_TRUE(gp.Fit(x, y, {}, {}, rng));
  const Eigen::VectorXd& t = gp.theta();
  EXPECT_LT(t[0], t[1]);
  EXPECT_LT(t[1], t[2]);
  EXPECT_GT(std::exp(t[2]), 3.0);  // the irrelevant dimension is switched off
}

TEST(GaussianProcessTest, PosteriorInterpolatesNoiselessData) {
  Rng rng(3);
  Eigen::MatrixXd x = RandomPoints(2, 30, rng);
  Eigen::VectorXd y(30);
  for (int c = 0; c < 30; ++c) y[c] = std::cos(4 * x(0, c)) * x(1, c);
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  GaussianProcess gp({false, false});
  ASSERT_TRUE(gp.Fit(x, y, {}, {}, rng));
  Eigen::VectorXd mean, var;
  gp.Predict(x, &mean, &var);
  EXPECT_LT((mean - y).cwiseAbs().maxCoeff(), 0.05);
  EXPECT_LT(var.maxCoeff(), 0.01);
  Eigen::MatrixXd far(2, 1);
  far << 5.0, 5.0;  // far from every point: prior variance
  gp.Predict(far, &mean, &var);
  EXPECT_GT(var[0], 0.1);
}

TEST(LbfgsTest, MinimizesRosenbrockInsideABox) {
  auto f = [](const Eigen::VectorXd& v, Eigen::VectorXd& g) {
    double a = 1 - v[0], b = v[1] - v[0] * v[0];
    g.resize(2);
    g[0] = -2 * a - 400 * v[0] * b;
    g[1] = 200 * b;
    return a * a + 100 * b * b;
  };
  Eigen::VectorXd x(2), lo(2), hi(2);
  x << -1.2, 1.0;
  lo << -2, -2;
  hi << 2, 2;
  EXPECT_LT(MinimizeLbfgsBox(f, x, lo, hi, 500), 1e-8);
  EXPECT_NEAR(x[0], 1.0, 1e-3);
  // With the optimum outside the box the answer sits on the bound.
  x << 0.0, 0.0;
  hi << 0.5, 2;
  MinimizeLbfgsBox(f, x, lo, hi, 500);
  EXPECT_NEAR(x[0], 0.5, 1e-6);
  EXPECT_NEAR(x[1], 0.25, 1e-3);
}

TEST(AcquisitionTest, LogExpectedImprovementMatchesTheClosedFormAndStaysFinite) {
  auto ei = [](double best, double mean, double sd) {
    double z = (best - mean) / sd;
    return sd * (z * 0.5 * std::erfc(-z / std::sqrt(2.0)) +
                 std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI));
  };
  for (double mean : {-1.0, 0.0, 0.5, 2.0, 5.0}) {
    EXPECT_NEAR(LogExpectedImprovement(0.0, mean, 0.7), std::log(ei(0.0, mean, 0.7)), 1e-6);
  }
  // Deep in the tail (z = -40) the direct formula underflows; log EI does not
  // and keeps decreasing.
  double a = LogExpectedImprovement(0.0, 40.0, 1.0);
  double b = LogExpectedImprovement(0.0, 41.0, 1.0);
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_LT(b, a);
  // Continuous across the switch at z = -6.
  EXPECT_NEAR(LogExpectedImprovement(0, 5.999999, 1), LogExpectedImprovement(0, 6.000001, 1), 1e-3);
}

TEST(AcquisitionTest, NormalQuantileInvertsTheCdf) {
  for (double p : {1e-10, 1e-4, 0.01, 0.3, 0.5, 0.77, 0.99, 1 - 1e-7}) {
    double x = NormalQuantile(p);
    EXPECT_NEAR(0.5 * std::erfc(-x / std::sqrt(2.0)), p, 1e-9 * std::max(p, 1e-3));
  }
}

TEST(WarpTest, HalfRankKeepsOrderAndTamesAHeavyTail) {
  std::vector<double> y = {0.1, 0.2, 0.3, 0.25, 0.15, 1e6, 50, 0.4};
  std::vector<double> w = WarpObjectives(y, OutputWarping::kHalfRank);
  for (size_t i = 0; i < y.size(); ++i) {
    for (size_t j = 0; j < y.size(); ++j) {
      if (y[i] < y[j]) {
        EXPECT_LT(w[i], w[j]);
      }
    }
  }
  // Without warping the 1e6 outlier squashes every other value together.
  std::vector<double> plain = WarpObjectives(y, OutputWarping::kNone);
  EXPECT_LT(plain[1] - plain[0], 1e-5);
  EXPECT_GT(w[1] - w[0], 0.05);
  EXPECT_LT(*std::max_element(w.begin(), w.end()), 3.0);
}

}  // namespace
}  // namespace stoker::tune
