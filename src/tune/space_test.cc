#include "tune/space.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stoker::tune {
namespace {

Parameter Double(const std::string& name, double lo, double hi, ScaleType scale) {
  Parameter p;
  p.name = name;
  p.kind = ParameterKind::kDouble;
  p.min = lo;
  p.max = hi;
  p.scale = scale;
  return p;
}

Parameter Integer(const std::string& name, double lo, double hi, ScaleType scale) {
  Parameter p = Double(name, lo, hi, scale);
  p.kind = ParameterKind::kInteger;
  return p;
}

Parameter Discrete(const std::string& name, std::vector<double> values, ScaleType scale) {
  Parameter p;
  p.name = name;
  p.kind = ParameterKind::kDiscrete;
  p.values = std::move(values);
  p.scale = scale;
  return p;
}

Parameter Categorical(const std::string& name, std::vector<std::string> cats) {
  Parameter p;
  p.name = name;
  p.kind = ParameterKind::kCategorical;
  p.categories = std::move(cats);
  return p;
}

const ScaleType kScales[] = {ScaleType::kLinear, ScaleType::kLog, ScaleType::kReverseLog};

TEST(EncodingTest, DoubleRoundTripsOnEveryScale) {
  for (ScaleType scale : kScales) {
    Space space{{Double("x", 0.001, 10.0, scale)}};
    ASSERT_TRUE(ValidateSpace(space).ok());
    Encoding enc(space);
    for (double x : {0.001, 0.0123, 0.5, 1.0, 7.7, 10.0}) {
      std::vector<double> u = enc.Encode({{"x", x}});
      ASSERT_GE(u[0], 0.0);
      ASSERT_LE(u[0], 1.0);
      Assignment back = enc.Decode(u);
      EXPECT_NEAR(std::get<double>(back.at("x")), x, 1e-9 * std::max(1.0, x));
    }
    EXPECT_NEAR(enc.Encode({{"x", 0.001}})[0], 0.0, 1e-12);
    EXPECT_NEAR(enc.Encode({{"x", 10.0}})[0], 1.0, 1e-12);
  }
}

TEST(EncodingTest, LogIsDenseNearMinAndReverseLogNearMax) {
  Space log_space{{Double("x", 1, 100, ScaleType::kLog)}};
  Space rev_space{{Double("x", 1, 100, ScaleType::kReverseLog)}};
  Encoding log_enc(log_space), rev_enc(rev_space);
  // The midpoint of the range sits high in LOG's cube and low in REVERSE_LOG's.
  EXPECT_GT(log_enc.Encode({{"x", 50.5}})[0], 0.8);
  EXPECT_LT(rev_enc.Encode({{"x", 50.5}})[0], 0.2);
  // Mirror images: u_rev(x) = 1 - u_log(min + max - x).
  for (double x : {2.0, 10.0, 60.0}) {
    EXPECT_NEAR(rev_enc.Encode({{"x", x}})[0], 1.0 - log_enc.Encode({{"x", 101.0 - x}})[0], 1e-12);
  }
}

TEST(EncodingTest, IntegerRoundTripsEveryValueOnEveryScale) {
  for (ScaleType scale : kScales) {
    Space space{{Integer("n", 1, 40, scale)}};
    Encoding enc(space);
    ASSERT_EQ(enc.Levels(0), 40);
    double prev = -1;
    for (int k = 1; k <= 40; ++k) {
      std::vector<double> u = enc.Encode({{"n", double(k)}});
      EXPECT_GT(u[0], prev);
      prev = u[0];
      EXPECT_EQ(std::get<double>(enc.Decode(u).at("n")), k);
    }
    // Any unit value decodes to a member.
    for (double u = 0; u <= 1.0; u += 0.01) {
      double v = std::get<double>(enc.Decode({u}).at("n"));
      EXPECT_EQ(v, std::round(v));
      EXPECT_GE(v, 1);
      EXPECT_LE(v, 40);
    }
  }
}

TEST(EncodingTest, DiscreteRoundTripsAndSnapsToMembers) {
  for (ScaleType scale : kScales) {
    std::vector<double> values = {0.5, 1, 2, 8, 32, 128};
    Space space{{Discrete("b", values, scale)}};
    Encoding enc(space);
    for (double v : values) {
      EXPECT_EQ(std::get<double>(enc.Decode(enc.Encode({{"b", v}})).at("b")), v);
    }
    for (double u = 0; u <= 1.0; u += 0.013) {
      double v = std::get<double>(enc.Decode({u}).at("b"));
      EXPECT_NE(std::find(values.begin(), values.end(), v), values.end()) << v;
    }
  }
}

TEST(EncodingTest, CategoricalRoundTripsThroughItsIndex) {
  Space space{{Categorical("opt", {"sgd", "adam", "rmsprop"})}};
  Encoding enc(space);
  EXPECT_TRUE(enc.IsCategorical(0));
  for (const std::string c : {"sgd", "adam", "rmsprop"}) {
    EXPECT_EQ(std::get<std::string>(enc.Decode(enc.Encode({{"opt", c}})).at("opt")), c);
  }
  EXPECT_EQ(enc.Encode({{"opt", std::string("adam")}})[0], 1.0);
}

TEST(EncodingTest, InactiveChildrenAreMarkedAndLeftOutOfAssignments) {
  Parameter opt = Categorical("opt", {"sgd", "adam"});
  opt.children.push_back({Double("momentum", 0, 0.99, ScaleType::kLinear), {}, {"sgd"}});
  Parameter layers = Integer("layers", 1, 3, ScaleType::kLinear);
  layers.children.push_back({Integer("width", 8, 64, ScaleType::kLog), {2, 3}, {}});
  Space space{{opt, layers}};
  ASSERT_TRUE(ValidateSpace(space).ok()) << ValidateSpace(space).ToString();
  Encoding enc(space);
  ASSERT_EQ(enc.size(), 4);
  std::vector<double> u = enc.Encode(
      {{"opt", std::string("adam")}, {"momentum", 0.9}, {"layers", 1.0}, {"width", 16.0}});
  EXPECT_EQ(u[1], kInactive);
  EXPECT_EQ(u[3], kInactive);
  Assignment a = enc.Decode(u);
  EXPECT_EQ(a.count("momentum"), 0u);
  EXPECT_EQ(a.count("width"), 0u);
  u = enc.Encode(
      {{"opt", std::string("sgd")}, {"momentum", 0.9}, {"layers", 2.0}, {"width", 16.0}});
  a = enc.Decode(u);
  EXPECT_NEAR(std::get<double>(a.at("momentum")), 0.9, 1e-12);
  EXPECT_EQ(std::get<double>(a.at("width")), 16.0);
}

TEST(ValidateSpaceTest, RejectsBadSpacesNamingTheParameter) {
  Space log_zero{{Double("lr", 0, 1, ScaleType::kLog)}};
  Status s = ValidateSpace(log_zero);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lr"), std::string::npos);

  Space dup{{Double("x", 0, 1, ScaleType::kLinear), Integer("x", 0, 3, ScaleType::kLinear)}};
  EXPECT_FALSE(ValidateSpace(dup).ok());

  Space unsorted{{Discrete("b", {1, 3, 2}, ScaleType::kLinear)}};
  EXPECT_FALSE(ValidateSpace(unsorted).ok());

  Parameter parent = Double("x", 0, 1, ScaleType::kLinear);
  parent.children.push_back({Double("y", 0, 1, ScaleType::kLinear), {0.5}, {}});
  EXPECT_FALSE(ValidateSpace(Space{{parent}}).ok());

  Parameter cat = Categorical("opt", {"a", "b"});
  cat.children.push_back({Double("y", 0, 1, ScaleType::kLinear), {}, {"c"}});
  EXPECT_FALSE(ValidateSpace(Space{{cat}}).ok());

  // Same-named children are fine when their conditions are disjoint.
  Parameter ok = Categorical("opt", {"a", "b"});
  ok.children.push_back({Double("lr", 0.1, 1, ScaleType::kLog), {}, {"a"}});
  ok.children.push_back({Double("lr", 0.001, 0.1, ScaleType::kLog), {}, {"b"}});
  EXPECT_TRUE(ValidateSpace(Space{{ok}}).ok());
  ok.children[1].parent_categories = {"a"};
  EXPECT_FALSE(ValidateSpace(Space{{ok}}).ok());
}

TEST(KeyTest, EqualAssignmentsHaveEqualKeys) {
  Assignment a{{"x", 1.0}, {"c", std::string("a")}};
  Assignment b{{"c", std::string("a")}, {"x", 1.0}};
  EXPECT_EQ(Key(a), Key(b));
  b["x"] = 1.0000001;
  EXPECT_NE(Key(a), Key(b));
}

}  // namespace
}  // namespace stoker::tune
