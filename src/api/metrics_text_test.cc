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
