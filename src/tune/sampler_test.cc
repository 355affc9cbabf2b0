#include "tune/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "tune/gp_bo.h"

namespace stoker::tune {
namespace {

Parameter Num(const std::string& name, ParameterKind kind, double lo, double hi,
              ScaleType scale = ScaleType::kLinear) {
  Parameter p;
  p.name = name;
  p.kind = kind;
  p.min = lo;
  p.max = hi;
  p.scale = scale;
  return p;
}

Parameter Cat(const std::string& name, std::vector<std::string> cats) {
  Parameter p;
  p.name = name;
  p.kind = ParameterKind::kCategorical;
  p.categories = std::move(cats);
  return p;
}

Parameter Disc(const std::string& name, std::vector<double> values) {
  Parameter p;
  p.name = name;
  p.kind = ParameterKind::kDiscrete;
  p.values = std::move(values);
  return p;
}

double Num(const Assignment& a, const std::string& name) { return std::get<double>(a.at(name)); }

// Runs `rounds` rounds of `batch` suggestions against f, lower is better.
std::vector<Observation> RunStudy(Sampler& s, const Space& space,
                                  const std::function<double(const Assignment&)>& f, int trials,
                                  int batch, uint64_t seed) {
  Rng rng(seed);
  std::vector<Observation> done;
  while (static_cast<int>(done.size()) < trials) {
    int n = std::min(batch, trials - static_cast<int>(done.size()));
    for (auto& a : s.Suggest(space, done, {}, n, rng)) {
      done.push_back({a, f(a), true});
    }
  }
  return done;
}

TEST(GridSamplerTest, EnumeratesExactlyTheProductAndNeverRepeats) {
  Space space{
      {Num("n", ParameterKind::kInteger, 1, 3), Disc("b", {0.1, 1, 10}), Cat("c", {"x", "y"})}};
  ASSERT_TRUE(ValidateGridSpace(space).ok());
  EXPECT_EQ(EnumerateGrid(space).size(), 18u);
  GridSampler grid;
  Rng rng(1);
  std::vector<Observation> done;
  std::vector<Assignment> pending;
  std::set<std::string> seen;
  for (int round = 0; round < 10; ++round) {
    auto got = grid.Suggest(space, done, pending, 5, rng);
    for (auto& a : got) {
      EXPECT_TRUE(seen.insert(Key(a)).second) << "repeated " << Key(a);
      // Alternate: some finish, some stay pending.
      if (seen.size() % 2)
        done.push_back({a, 0.0, true});
      else
        pending.push_back(a);
    }
    if (got.empty()) break;
  }
  EXPECT_EQ(seen.size(), 18u);
  EXPECT_TRUE(grid.Suggest(space, done, pending, 5, rng).empty());
  // Deterministic order: the first parameter varies slowest.
  auto all = EnumerateGrid(space);
  EXPECT_EQ(Num(all[0], "n"), 1);
  EXPECT_EQ(Num(all[5], "n"), 1);
  EXPECT_EQ(Num(all[6], "n"), 2);
  EXPECT_EQ(std::get<std::string>(all[1].at("c")), "y");
}

TEST(GridSamplerTest, ExpandsConditionalChildrenOnlyUnderTheirParents) {
  Parameter opt = Cat("opt", {"sgd", "adam"});
  opt.children.push_back({Disc("momentum", {0.0, 0.9}), {}, {"sgd"}});
  Space space{{opt, Num("n", ParameterKind::kInteger, 1, 2)}};
  auto all = EnumerateGrid(space);
  EXPECT_EQ(all.size(), 6u);  // sgd × 2 momenta × 2 + adam × 2
  for (const auto& a : all) {
    bool sgd = std::get<std::string>(a.at("opt")) == "sgd";
    EXPECT_EQ(a.count("momentum"), sgd ? 1u : 0u);
  }
}

TEST(GridSamplerTest, RejectsDoubleParameters) {
  Space space{{Num("lr", ParameterKind::kDouble, 0, 1)}};
  Status s = ValidateGridSpace(space);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lr"), std::string::npos);
  GridSampler grid;
  Rng rng(1);
  EXPECT_TRUE(grid.Suggest(space, {}, {}, 3, rng).empty());
}

Space MixedSpace() {
  Parameter opt = Cat("opt", {"sgd", "adam", "rmsprop"});
  opt.children.push_back({Num("momentum", ParameterKind::kDouble, 0, 0.99), {}, {"sgd"}});
  Parameter layers = Num("layers", ParameterKind::kInteger, 1, 4);
  layers.children.push_back(
      {Num("width", ParameterKind::kInteger, 8, 512, ScaleType::kLog), {3, 4}, {}});
  return Space{{Num("lr", ParameterKind::kDouble, 1e-5, 1e-1, ScaleType::kLog), opt, layers,
                Disc("batch", {16, 32, 64, 128})}};
}

double MixedObjective(const Assignment& a) {
  double v = std::pow(std::log10(Num(a, "lr")) + 3, 2) + 0.1 * Num(a, "layers");
  if (std::get<std::string>(a.at("opt")) == "sgd") v += std::pow(Num(a, "momentum") - 0.9, 2);
  if (a.count("width")) v += 0.01 * std::log2(Num(a, "width"));
  return v + Num(a, "batch") / 1000;
}

void ExpectValid(const Assignment& a) {
  double lr = Num(a, "lr");
  EXPECT_GE(lr, 1e-5);
  EXPECT_LE(lr, 1e-1);
  std::string opt = std::get<std::string>(a.at("opt"));
  EXPECT_TRUE(opt == "sgd" || opt == "adam" || opt == "rmsprop") << opt;
  EXPECT_EQ(a.count("momentum"), opt == "sgd" ? 1u : 0u);
  double layers = Num(a, "layers");
  EXPECT_EQ(layers, std::round(layers));
  EXPECT_TRUE(layers >= 1 && layers <= 4);
  EXPECT_EQ(a.count("width"), layers >= 3 ? 1u : 0u);
  if (a.count("width")) {
    double w = Num(a, "width");
    EXPECT_EQ(w, std::round(w));
    EXPECT_TRUE(w >= 8 && w <= 512);
  }
  double b = Num(a, "batch");
  EXPECT_TRUE(b == 16 || b == 32 || b == 64 || b == 128) << b;
  EXPECT_EQ(a.size(), 4u + a.count("momentum") + a.count("width"));
}

TEST(SamplerTest, CategoricalAndIntegerValuesAreAlwaysValidMembers) {
  Space space = MixedSpace();
  ASSERT_TRUE(ValidateSpace(space).ok());
  RandomSampler random;
  QuasiRandomSampler quasi(5);
  GpBoSampler gp;
  for (Sampler* s : std::vector<Sampler*>{&random, &quasi, &gp}) {
    auto done = RunStudy(*s, space, MixedObjective, 30, 3, 17);
    ASSERT_EQ(done.size(), 30u);
    for (const auto& o : done) ExpectValid(o.params);
  }
}

TEST(GpBoSamplerTest, ConditionalParametersAppearOnlyWhenTheParentMatches) {
  GpBoSampler gp;
  auto done = RunStudy(gp, MixedSpace(), MixedObjective, 40, 1, 23);
  int sgd = 0, wide = 0;
  for (const auto& o : done) {
    ExpectValid(o.params);
    sgd += std::get<std::string>(o.params.at("opt")) == "sgd";
    wide += Num(o.params, "layers") >= 3;
  }
  EXPECT_GT(sgd, 0);
  EXPECT_GT(wide, 0);
}

TEST(GpBoSamplerTest, ExpectedImprovementOnAQuadraticLandsNearTheMinimum) {
  Space space{{Num("x", ParameterKind::kDouble, -2, 3)}};
  auto f = [](const Assignment& a) { return std::pow(Num(a, "x") - 0.7, 2); };
  GpBoSampler gp;
  auto done = RunStudy(gp, space, f, 10, 1, 5);
  Rng rng(99);
  auto next = gp.Suggest(space, done, {}, 1, rng);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_NEAR(Num(next[0], "x"), 0.7, 0.05);
  double best = 1e9;
  for (const auto& o : done) best = std::min(best, o.objective);
  EXPECT_LT(best, 0.01);
}

TEST(GpBoSamplerTest, ABatchOfEightHasPairwiseDistinctPoints) {
  Space space{{Num("x", ParameterKind::kDouble, 0, 1), Num("y", ParameterKind::kDouble, 0, 1)}};
  auto f = [](const Assignment& a) {
    return std::pow(Num(a, "x") - 0.3, 2) + std::pow(Num(a, "y") - 0.6, 2);
  };
  GpBoSampler gp;
  auto done = RunStudy(gp, space, f, 12, 1, 8);
  Rng rng(4);
  std::vector<Assignment> pending = gp.Suggest(space, done, {}, 2, rng);
  auto batch = gp.Suggest(space, done, pending, 8, rng);
  ASSERT_EQ(batch.size(), 8u);
  batch.insert(batch.end(), pending.begin(), pending.end());
  double min_dist = 1e9;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (size_t j = i + 1; j < batch.size(); ++j) {
      min_dist = std::min(min_dist, std::hypot(Num(batch[i], "x") - Num(batch[j], "x"),
                                               Num(batch[i], "y") - Num(batch[j], "y")));
    }
  }
  EXPECT_GT(min_dist, 1e-3);
}

TEST(GpBoSamplerTest, AStudysFirstTrialIsTheCentreOfTheSpace) {
  Space space{{Num("x", ParameterKind::kDouble, 0, 10), Num("n", ParameterKind::kInteger, 1, 5),
               Num("lr", ParameterKind::kDouble, 1e-4, 1, ScaleType::kLog), Disc("b", {0.1, 1, 10}),
               Cat("c", {"a", "b", "c"})}};
  auto expect_centre = [](const Assignment& a) {
    EXPECT_DOUBLE_EQ(Num(a, "x"), 5.0);
    EXPECT_DOUBLE_EQ(Num(a, "n"), 3.0);
    EXPECT_NEAR(Num(a, "lr"), 1e-2, 1e-12);  // geometric middle of a log range
    EXPECT_DOUBLE_EQ(Num(a, "b"), 1.0);
    EXPECT_EQ(std::get<std::string>(a.at("c")), "b");
  };
  Rng rng(1);
  GpBoSampler gp;
  auto first = gp.Suggest(space, {}, {}, 1, rng);
  ASSERT_EQ(first.size(), 1u);
  expect_centre(first[0]);
  // A parallel first round holds the centre once; the rest are the design's.
  GpBoSampler batch_gp;
  auto batch = batch_gp.Suggest(space, {}, {}, 4, rng);
  ASSERT_EQ(batch.size(), 4u);
  expect_centre(batch[0]);
  for (size_t i = 1; i < batch.size(); ++i) EXPECT_NE(Key(batch[i]), Key(batch[0]));
  // The second trial continues the design whether or not the first is done.
  auto second = gp.Suggest(space, {{first[0], 1.0, true}}, {}, 1, rng);
  auto second_pending = gp.Suggest(space, {}, first, 1, rng);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(Key(second[0]), Key(batch[1]));
  EXPECT_EQ(Key(second_pending[0]), Key(batch[1]));
  // Off: the first trial is the design's first point, not the centre.
  GpBoOptions off;
  off.centre_first = false;
  GpBoSampler plain(off);
  auto plain_first = plain.Suggest(space, {}, {}, 1, rng);
  ASSERT_EQ(plain_first.size(), 1u);
  EXPECT_NE(Key(plain_first[0]), Key(first[0]));
}

TEST(GpBoSamplerTest, TrustRegionShrinksAroundAnIncumbentThatIsNeverBeaten) {
  Space space;
  for (const char* name : {"a", "b", "c", "d"}) {
    space.parameters.push_back(Num(name, ParameterKind::kDouble, 0, 1));
  }
  auto f = [](const Assignment& a) {
    double s = 0;
    for (const char* name : {"a", "b", "c", "d"}) s += std::pow(Num(a, name) - 0.8, 2);
    return s;
  };
  // The optimum first, then 29 random points: 24 failures after the initial
  // design halve the region six times (side 0.8 / 64 times the length-scale
  // weight).
  std::vector<Observation> done;
  Assignment best = {{"a", 0.8}, {"b", 0.8}, {"c", 0.8}, {"d", 0.8}};
  done.push_back({best, f(best), true});
  RandomSampler random;
  Rng data_rng(3);
  for (auto& a : random.Suggest(space, {}, {}, 29, data_rng)) done.push_back({a, f(a), true});
  GpBoOptions options;
  options.trust_region = true;
  GpBoSampler gp(options);
  Rng rng(8);
  auto next = gp.Suggest(space, done, {}, 3, rng);
  ASSERT_EQ(next.size(), 3u);
  for (const auto& a : next) {
    for (const char* name : {"a", "b", "c", "d"}) EXPECT_NEAR(Num(a, name), 0.8, 0.1) << name;
  }
}

TEST(GpBoSamplerTest, SameSeedGivesSameSuggestions) {
  Space space = MixedSpace();
  GpBoSampler a, b;
  auto run_a = RunStudy(a, space, MixedObjective, 20, 2, 31);
  auto run_b = RunStudy(b, space, MixedObjective, 20, 2, 31);
  ASSERT_EQ(run_a.size(), run_b.size());
  for (size_t i = 0; i < run_a.size(); ++i) EXPECT_EQ(Key(run_a[i].params), Key(run_b[i].params));
  GpBoSampler c;
  auto run_c = RunStudy(c, space, MixedObjective, 20, 2, 32);
  int differ = 0;
  for (size_t i = 0; i < run_a.size(); ++i) differ += Key(run_a[i].params) != Key(run_c[i].params);
  EXPECT_GT(differ, 0);
}

TEST(GpBoSamplerTest, NeverRepeatsAPointInASmallDiscreteSpace) {
  Space space{{Num("n", ParameterKind::kInteger, 1, 3), Cat("c", {"a", "b"})}};
  auto f = [](const Assignment& a) {
    return Num(a, "n") + (std::get<std::string>(a.at("c")) == "a" ? 0 : 0.5);
  };
  GpBoSampler gp;
  auto done = RunStudy(gp, space, f, 6, 1, 3);
  std::set<std::string> keys;
  for (const auto& o : done) keys.insert(Key(o.params));
  EXPECT_EQ(keys.size(), 6u);
}

TEST(GpBoSamplerTest, InfeasibleTrialsAreAvoided) {
  Space space{{Num("x", ParameterKind::kDouble, 0, 1)}};
  GpBoSampler gp;
  Rng rng(2);
  std::vector<Observation> done;
  for (int i = 0; i < 25; ++i) {
    auto a = gp.Suggest(space, done, {}, 1, rng).at(0);
    double x = Num(a, "x");
    // x > 0.5 crashes; below, lower is better towards 0.4.
    done.push_back({a, x > 0.5 ? NAN : std::fabs(x - 0.4), x <= 0.5});
  }
  int late_infeasible = 0;
  for (int i = 15; i < 25; ++i) late_infeasible += !done[i].feasible;
  EXPECT_LE(late_infeasible, 3);
}

TEST(QuasiRandomSamplerTest, ContinuesOneSequenceAcrossCalls) {
  Space space{{Num("x", ParameterKind::kDouble, 0, 1), Num("y", ParameterKind::kDouble, 0, 1)}};
  QuasiRandomSampler one(9), two(9);
  Rng rng(1);
  auto all = one.Suggest(space, {}, {}, 4, rng);
  auto first = two.Suggest(space, {}, {}, 2, rng);
  auto rest = two.Suggest(space, {}, first, 2, rng);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(Key(all[2]), Key(rest[0]));
  EXPECT_EQ(Key(all[3]), Key(rest[1]));
  // Low discrepancy: 64 points leave no empty cell of a 4 × 4 grid.
  auto many = one.Suggest(space, {}, {}, 64, rng);
  std::set<int> cells;
  for (const auto& a : many) cells.insert(int(Num(a, "x") * 4) * 4 + int(Num(a, "y") * 4));
  EXPECT_EQ(cells.size(), 16u);
}

TEST(MakeSamplerTest, DefaultIsBayesianOptimisation) {
  EXPECT_NE(dynamic_cast<GpBoSampler*>(MakeSampler(Algorithm::kDefault, 1).get()), nullptr);
  EXPECT_NE(dynamic_cast<GridSampler*>(MakeSampler(Algorithm::kGrid, 1).get()), nullptr);
  EXPECT_NE(dynamic_cast<RandomSampler*>(MakeSampler(Algorithm::kRandom, 1).get()), nullptr);
}

}  // namespace
}  // namespace stoker::tune
