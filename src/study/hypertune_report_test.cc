// The one reader of hypertune report lines: what both the study driver and
// the training-metrics route see of a file as cloudml-hypertune writes it.
#include "study/hypertune_report.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stoker::study {
namespace {

TEST(HypertuneReportTest, ReadsStringAndNumberValuesAndSkipsTheBookkeepingKeys) {
  HypertuneReports r = ParseHypertuneReports(
      R"({"timestamp": 1700000000.5, "global_step": "12", "accuracy": "0.91", "loss": 0.3, "trial": "4", "checkpoint_path": "/tmp/x"})"
      "\n");
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(*r.reports[0].timestamp, 1700000000.5);
  EXPECT_EQ(r.reports[0].global_step, "12");
  ASSERT_EQ(r.reports[0].values.size(), 2u);
  EXPECT_EQ(r.reports[0].values[0].first, "accuracy");
  EXPECT_DOUBLE_EQ(r.reports[0].values[0].second, 0.91);
  EXPECT_EQ(r.reports[0].values[1].first, "loss");
  EXPECT_FALSE(r.skipped_nested);
}

TEST(HypertuneReportTest, ATornLineIsSkippedAndANumericStepKeepsItsText) {
  HypertuneReports r =
      ParseHypertuneReports("{\"global_step\": 7, \"acc\": \"x\"}\n{\"acc\": \"0.5\", \"glob");
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(r.reports[0].global_step, "7");
  EXPECT_TRUE(r.reports[0].values.empty());  // "x" is no number
  EXPECT_FALSE(r.reports[0].timestamp.has_value());
}

TEST(HypertuneReportTest, NonFiniteValuesAreKeptForTheCallerAndDeepNestingIsLeftOut) {
  HypertuneReports r = ParseHypertuneReports(
      "{\"loss\": \"nan\", \"acc\": \"inf\"}\n"
      "{\"a\": [[[[[[[[[[1]]]]]]]]]]}\n");
  ASSERT_EQ(r.reports.size(), 1u);
  ASSERT_EQ(r.reports[0].values.size(), 2u);
  // Keys come in the JSON object's (sorted) order.
  EXPECT_EQ(r.reports[0].values[0].first, "acc");
  EXPECT_TRUE(std::isinf(r.reports[0].values[0].second));
  EXPECT_EQ(r.reports[0].values[1].first, "loss");
  EXPECT_TRUE(std::isnan(r.reports[0].values[1].second));
  EXPECT_TRUE(r.skipped_nested);
}

}  // namespace
}  // namespace stoker::study
