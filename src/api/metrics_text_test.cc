#include "api/metrics_text.h"

#include <gtest/gtest.h>

namespace stoker::api {
namespace {

TEST(MetricsTextTest, WritesFamiliesAndSamplesInTheTextFormat) {
  MetricsText m;
  m.Family("stoker_x_usd", "gauge", "A help line\\with a backslash");
  m.Sample({{"user", "a\"b\\c\nd"}, {"price", "vertex"}}, 0.25);
  m.Sample({}, 3);
  EXPECT_EQ(m.text(),
            "# HELP stoker_x_usd A help line\\\\with a backslash\n"
            "# TYPE stoker_x_usd gauge\n"
            "stoker_x_usd{user=\"a\\\"b\\\\c\\nd\",price=\"vertex\"} 0.25\n"
            "stoker_x_usd 3\n");
}

}  // namespace
}  // namespace stoker::api

namespace stoker::api {
namespace {

TEST(MetricsTextTest, WritesAHistogramAsCumulativeBucketsSumAndCount) {
  MetricsText m;
  m.Family("stoker_x_seconds", "histogram", "Durations.");
  m.Histogram({{"kind", "a"}}, {0.005, 1, 2.5}, {1, 3, 3, 4}, 12.75, 4);
  m.Histogram({}, {0.005}, {0, 0}, 0, 0);
  EXPECT_EQ(m.text(),
            "# HELP stoker_x_seconds Durations.\n"
            "# TYPE stoker_x_seconds histogram\n"
            "stoker_x_seconds_bucket{kind=\"a\",le=\"0.005\"} 1\n"
            "stoker_x_seconds_bucket{kind=\"a\",le=\"1\"} 3\n"
            "stoker_x_seconds_bucket{kind=\"a\",le=\"2.5\"} 3\n"
            "stoker_x_seconds_bucket{kind=\"a\",le=\"+Inf\"} 4\n"
            "stoker_x_seconds_sum{kind=\"a\"} 12.75\n"
            "stoker_x_seconds_count{kind=\"a\"} 4\n"
            "stoker_x_seconds_bucket{le=\"0.005\"} 0\n"
            "stoker_x_seconds_bucket{le=\"+Inf\"} 0\n"
            "stoker_x_seconds_sum 0\n"
            "stoker_x_seconds_count 0\n");
}

TEST(MetricsTextTest, FormatsNumbersShortestAndSpecialValuesAsTheFormatSpellsThem) {
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(1764000000.5), "1764000000.5");
  EXPECT_EQ(FormatMetricValue(85520809984.0), "85520809984");
  EXPECT_EQ(FormatMetricValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatMetricValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatMetricValue(0.0 / 0.0), "NaN");
}

}  // namespace
}  // namespace stoker::api
