// --timestamps: lines stamped with the latest mark at or before their start.
#include "cli/log_stamper.h"

#include "gtest/gtest.h"

namespace stoker::cli {
namespace {

using nlohmann::json;

constexpr int64_t kT = 1'795'703'462'123'456;  // 2026-11-26T14:31:02.123456Z

TEST(FormatLogTimeTest, IsRfc3339UtcWithMilliseconds) {
  EXPECT_EQ(FormatLogTime(kT), "2026-11-26T14:31:02.123Z");
  EXPECT_EQ(FormatLogTime(kT + 876'544), "2026-11-26T14:31:03.000Z");
}

TEST(LineStamperTest, StampsEachLineWithTheLatestMarkAtOrBeforeIt) {
  LineStamper s;
  // "one\n" at kT; "two\n" shares the mark; "three\n" has its own.
  std::string out = s.Add("one\ntwo\nthree\n", json::array({{0, kT}, {8, kT + 1'200'000}}));
  EXPECT_EQ(out,
            "2026-11-26T14:31:02.123Z one\n"
            "2026-11-26T14:31:02.123Z two\n"
            "2026-11-26T14:31:03.323Z three\n");
}

TEST(LineStamperTest, KeepsTheReplicaPrefixAfterTheTime) {
  LineStamper s("workerpool0-0: ");
  EXPECT_EQ(s.Add("epoch 1\n", json::array({{0, kT}})),
            "2026-11-26T14:31:02.123Z workerpool0-0: epoch 1\n");
}

TEST(LineStamperTest, DatesALineSplitAcrossChunksByItsStart) {
  LineStamper s;
  EXPECT_EQ(s.Add("par", json::array({{0, kT}})), "");
  // The next chunk is dated by the mark before it (index 0), not a new one.
  EXPECT_EQ(s.Add("tial\nnext\n", json::array({{0, kT}, {5, kT + 2'000'000}})),
            "2026-11-26T14:31:02.123Z partial\n"
            "2026-11-26T14:31:04.123Z next\n");
  EXPECT_EQ(s.Add("no end", json::array({{0, kT + 2'000'000}})), "");
  EXPECT_EQ(s.Flush(), "2026-11-26T14:31:04.123Z no end\n");
  EXPECT_EQ(s.Flush(), "");
}

TEST(LineStamperTest, LeavesLinesWithoutAMarkUndated) {
  LineStamper s("w: ");
  EXPECT_EQ(s.Add("notice\n", json()), "w: notice\n");  // an older daemon: no "times"
}

}  // namespace
}  // namespace stoker::cli
