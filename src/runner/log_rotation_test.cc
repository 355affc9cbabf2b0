// Rotation of the replica log: the pure write plan, the rotating file, the
// pump from a real pipe, and reading the stream back across files.
#include "runner/log_rotation.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <future>
#include <string>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// The reader half (replica/log_stream.h), read back after the writer.
using replica::ParseLogState;
using replica::ReadLogMarks;
using replica::ReadLogStream;
using replica::ReadLogTail;

TEST(PlanWriteTest, WritesEverythingThatFits) {
  WriteStep s = PlanWrite(10, "abc\n", 100);
  EXPECT_FALSE(s.rotate);
  EXPECT_EQ(s.write, 4u);
  EXPECT_EQ(PlanWrite(96, "abc\n", 100).write, 4u);  // exactly full is fine
}

TEST(PlanWriteTest, NeverRotatesWithoutALimit) {
  EXPECT_EQ(PlanWrite(1u << 30, std::string(5000, 'x'), 0).write, 5000u);
}

TEST(PlanWriteTest, CutsAtTheLastLineEndThatFits) {
  WriteStep s = PlanWrite(90, "line1\nline2\nline3\n", 100);  // room for 10
  EXPECT_FALSE(s.rotate);
  EXPECT_EQ(s.write, 6u);  // "line1\n"
}

TEST(PlanWriteTest, RotatesRatherThanSplitALine) {
  WriteStep s = PlanWrite(90, "a-long-line-of-text\n", 100);
  EXPECT_TRUE(s.rotate);
  EXPECT_EQ(s.write, 0u);
  EXPECT_TRUE(PlanWrite(100, "x\n", 100).rotate);  // full
  EXPECT_TRUE(PlanWrite(150, "x\n", 100).rotate);  // over (a lowered limit)
}

TEST(PlanWriteTest, SplitsOnlyALineLongerThanAWholeFile) {
  WriteStep s = PlanWrite(0, std::string(250, 'x') + "\n", 100);
  EXPECT_FALSE(s.rotate);
  EXPECT_EQ(s.write, 100u);
}

class RotatingLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_log_rotation_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Slurp(const std::string& name) {
    auto r = ReadFile(dir_ / name);
    return r.ok() ? *r : "<missing>";
  }
  // The whole stream as a reader sees it, chunk by chunk from 0.
  std::string ReadAll(uint64_t* skipped = nullptr) {
    std::string all;
    uint64_t offset = 0;
    while (true) {
      auto r = ReadLogStream(dir_, offset, 7);
      EXPECT_TRUE(r.ok());
      if (!r.ok() || r->data.empty()) break;
      if (skipped) *skipped += r->skipped;
      all += r->data;
      offset = r->next_offset;
    }
    return all;
  }
  fs::path dir_;
};

TEST_F(RotatingLogTest, ShiftsFilesAndDeletesTheOldest) {
  RotatingLog log(dir_, {.max_bytes = 12, .max_files = 2});
  ASSERT_TRUE(log.Open().ok());
  for (const char* line : {"one\n", "two\n", "three\n", "four\n", "five\n", "six\n"}) {
    ASSERT_TRUE(log.Write(line).ok());
  }
  // one two | three four | five six -> the first file was deleted.
  EXPECT_EQ(Slurp("output.log"), "five\nsix\n");
  EXPECT_EQ(Slurp("output.log.1"), "three\nfour\n");
  EXPECT_EQ(Slurp("output.log.2"), "one\ntwo\n");
  ASSERT_TRUE(log.Write("seven\n").ok());
  EXPECT_EQ(Slurp("output.log"), "seven\n");
  EXPECT_EQ(Slurp("output.log.1"), "five\nsix\n");
  EXPECT_EQ(Slurp("output.log.2"), "three\nfour\n");
  EXPECT_FALSE(fs::exists(dir_ / "output.log.3"));
}

// A settable clock for the marks of output.times.
struct FakeMicros {
  int64_t now = 1'700'000'000'000'000;
  std::function<int64_t()> Clock() {
    return [this] { return now; };
  }
};

TEST_F(RotatingLogTest, MarksTheFirstLineThenAtMostOneLinePerInterval) {
  FakeMicros clock;
  const int64_t t0 = clock.now;
  RotatingLog log(dir_, {.max_bytes = 0}, clock.Clock());
  ASSERT_TRUE(log.Open().ok());
  ASSERT_TRUE(log.Write("the first line, long\n").ok());  // 0..21
  clock.now += 10'000;                                    // inside the interval
  ASSERT_TRUE(log.Write("second\n").ok());                // 21..28: shares the mark
  clock.now += 50'000;
  ASSERT_TRUE(log.Write("third\nfourth\n").ok());  // 28: a mark; 34 shares it
  clock.now += 1'000'000;
  ASSERT_TRUE(log.Write("fifth\n").ok());  // 41: a mark
  ASSERT_TRUE(log.Write("part").ok());     // 47: inside the interval
  clock.now += 1'000'000;
  ASSERT_TRUE(log.Write("ial\nsixth\n").ok());  // 47..55 ends "partial"; 55: a mark
  std::vector<LogMark> want = {
      {0, t0}, {28, t0 + 60'000}, {41, t0 + 1'060'000}, {55, t0 + 2'060'000}};
  EXPECT_EQ(ReadLogMarks(dir_, 0, 1000), want);
  EXPECT_EQ(fs::file_size(dir_ / "output.times"), 4 * kLogMarkBytes);
  // A range gets the mark that dates its first byte, then its own.
  EXPECT_EQ(ReadLogMarks(dir_, 30, 40), (std::vector<LogMark>{want[1]}));
  EXPECT_EQ(ReadLogMarks(dir_, 28, 56), (std::vector<LogMark>{want[1], want[2], want[3]}));
  EXPECT_EQ(ReadLogMarks(dir_, 21, 28), (std::vector<LogMark>{want[0]}));
}

// The times file is made at the first line, not at Open: for a trainer's
// log that is after its fork (one file creation fewer before it starts).
TEST_F(RotatingLogTest, MakesTheTimesFileAtTheFirstLine) {
  FakeMicros clock;
  RotatingLog log(dir_, {.max_bytes = 0}, clock.Clock());
  ASSERT_TRUE(log.Open().ok());
  EXPECT_TRUE(fs::exists(dir_ / "output.log"));
  EXPECT_FALSE(fs::exists(dir_ / "output.times"));
  EXPECT_TRUE(ReadLogMarks(dir_, 0, 100).empty());
  ASSERT_TRUE(log.Write("first\n").ok());
  EXPECT_EQ(ReadLogMarks(dir_, 0, 100), (std::vector<LogMark>{{0, clock.now}}));
}

TEST_F(RotatingLogTest, KeepsTheTimesWithinTheLogsSizePlusTheSlack) {
  FakeMicros clock;
  RotatingLog log(dir_, {.max_bytes = 0}, clock.Clock());
  ASSERT_TRUE(log.Open().ok());
  for (int i = 0; i < 2000; ++i) {  // tiny lines, each in an interval of its own
    clock.now += 1'000'000;
    ASSERT_TRUE(log.Write("x\n").ok());
  }
  uint64_t times = fs::file_size(dir_ / "output.times");
  EXPECT_LE(times, fs::file_size(dir_ / "output.log") + kLogMarkSlackBytes);
  EXPECT_GT(times, kLogMarkSlackBytes);  // the log pays for more as it grows
}

TEST_F(RotatingLogTest, RotatesTheTimesWithTheLog) {
  FakeMicros clock;
  RotatingLog log(dir_, {.max_bytes = 12, .max_files = 1}, clock.Clock());
  ASSERT_TRUE(log.Open().ok());
  // one two | three four | five six: the first file and its times go.
  for (const char* line : {"one\n", "two\n", "three\n", "four\n", "five\n", "six\n"}) {
    clock.now += 1'000'000;
    ASSERT_TRUE(log.Write(line).ok());
  }
  EXPECT_EQ(Slurp("output.log.1"), "three\nfour\n");
  EXPECT_FALSE(fs::exists(dir_ / "output.times.2"));
  EXPECT_EQ(fs::file_size(dir_ / "output.times.1"), 2 * kLogMarkBytes);
  int64_t t = FakeMicros().now;
  EXPECT_EQ(
      ReadLogMarks(dir_, 0, 100),
      (std::vector<LogMark>{
          {8, t + 3'000'000}, {14, t + 4'000'000}, {19, t + 5'000'000}, {24, t + 6'000'000}}));
}

TEST_F(RotatingLogTest, ReadsNoMarksWithoutAnIndex) {
  EXPECT_TRUE(ReadLogMarks(dir_, 0, 100).empty());
  EXPECT_TRUE(ReadLogMarks(dir_ / "missing", 0, 100).empty());
}

// stoker-run writes output.log as root in a directory the trainer's account
// owns: a link planted there must not make it write anywhere else.
TEST_F(RotatingLogTest, RefusesALinkPlantedAsTheLog) {
  fs::path victim = dir_ / "victim";
  ASSERT_TRUE(WriteFileAtomic(victim, "root's file\n").ok());
  fs::create_symlink(victim, dir_ / "output.log");
  RotatingLog via_symlink(dir_, {});
  EXPECT_FALSE(via_symlink.Open().ok());
  fs::remove(dir_ / "output.log");
  fs::create_hard_link(victim, dir_ / "output.log");
  RotatingLog via_hard_link(dir_, {});
  Status s = via_hard_link.Open();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("not a link"));
  EXPECT_FALSE(via_hard_link.Write("planted\n").ok());
  EXPECT_EQ(Slurp("victim"), "root's file\n");
}

TEST_F(RotatingLogTest, KeepsEveryFileWithinTheLimitAndLinesWhole) {
  RotatingLog log(dir_, {.max_bytes = 64, .max_files = 3});
  ASSERT_TRUE(log.Open().ok());
  std::string all;
  for (int i = 0; i < 200; ++i) {
    std::string line = "line " + std::to_string(i) + std::string(i % 17, '.') + "\n";
    all += line;
    ASSERT_TRUE(log.Write(line).ok());
  }
  for (const char* name : {"output.log", "output.log.1", "output.log.2", "output.log.3"}) {
    std::string text = Slurp(name);
    EXPECT_LE(text.size(), 64u) << name;
    EXPECT_EQ(text.back(), '\n') << name;
    EXPECT_EQ(text.rfind("line ", 0), 0u) << name << " starts mid-line: " << text;
  }
  // The stream reads back as the tail of everything written, after a gap.
  uint64_t skipped = 0;
  std::string read = ReadAll(&skipped);
  EXPECT_EQ(skipped + read.size(), all.size());
  EXPECT_EQ(read, all.substr(all.size() - read.size()));
}

TEST_F(RotatingLogTest, TailReadsThePreviousFileRightAfterARotation) {
  RotatingLog log(dir_, {.max_bytes = 20, .max_files = 1});
  ASSERT_TRUE(log.Open().ok());
  ASSERT_TRUE(log.Write("first line\nerror: x\n").ok());
  ASSERT_TRUE(log.Write("y\n").ok());  // rotates: output.log holds only "y\n"
  EXPECT_EQ(Slurp("output.log"), "y\n");
  EXPECT_EQ(ReadLogTail(dir_, 11), "error: x\ny\n");
  EXPECT_EQ(ReadLogTail(dir_, 1000), "first line\nerror: x\ny\n");
}

TEST_F(RotatingLogTest, AMissingLogIsAnEmptyStream) {
  auto r = ReadLogStream(dir_, 0, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->size, 0u);
  EXPECT_EQ(ReadLogTail(dir_, 100), "");
}

TEST_F(RotatingLogTest, OffsetsStayValidAcrossRotations) {
  RotatingLog log(dir_, {.max_bytes = 10, .max_files = 5});
  ASSERT_TRUE(log.Open().ok());
  ASSERT_TRUE(log.Write("aaaa\nbbbb\n").ok());
  auto first = ReadLogStream(dir_, 0, 100);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->data, "aaaa\nbbbb\n");
  ASSERT_TRUE(log.Write("cccc\n").ok());  // rotates
  auto next = ReadLogStream(dir_, first->next_offset, 100);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->data, "cccc\n");
  EXPECT_EQ(next->offset, 10u);
  EXPECT_EQ(next->size, 15u);
}

TEST_F(RotatingLogTest, PumpCopiesAPipeAndFinishesAtItsEnd) {
  RotatingLog log(dir_, {.max_bytes = 1000, .max_files = 3});
  ASSERT_TRUE(log.Open().ok());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string expected;
  {
    LogPump pump(fds[0], [&log](std::string_view d) { return log.Write(d); });
    for (int i = 0; i < 500; ++i) {
      std::string line = "message number " + std::to_string(i) + "\n";
      expected += line;
      ASSERT_EQ(::write(fds[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
    }
    ASSERT_EQ(::write(fds[1], "no newline", 10), 10);
    expected += "no newline";
    ::close(fds[1]);
    pump.Finish(5000);
  }
  uint64_t skipped = 0;
  std::string read = ReadAll(&skipped);
  EXPECT_EQ(skipped + read.size(), expected.size());
  EXPECT_EQ(read, expected.substr(expected.size() - read.size()));
  EXPECT_THAT(read, ::testing::EndsWith("message number 499\nno newline"));
}

TEST_F(RotatingLogTest, PumpStopsEvenWhenSomeoneKeepsThePipeOpen) {
  RotatingLog log(dir_, {});
  ASSERT_TRUE(log.Open().ok());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  LogPump pump(fds[0], [&log](std::string_view d) { return log.Write(d); });
  ASSERT_EQ(::write(fds[1], "last words\n", 11), 11);
  pump.Finish(50);  // fds[1] is still open: no end of file
  EXPECT_EQ(Slurp("output.log"), "last words\n");
  ::close(fds[1]);
}

TEST(LogPumpTest, NeverHoldsUpTheWriterBehindASlowSinkAndDropsTheOldestSayingSo) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::promise<void> unblock;
  std::shared_future<void> unblocked = unblock.get_future().share();
  std::string written;
  LogPump pump(
      fds[0],
      [&](std::string_view d) {
        unblocked.wait();  // a disk that hangs until the test lets it go
        written += d;
        return OkStatus();
      },
      /*buffer_limit=*/1000);
  // 1 MB into a 64 KiB pipe: this would block forever if the pump waited on the sink.
  std::string line(99, 'x');
  line += '\n';
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(::write(fds[1], line.data(), line.size()), 100);
  }
  ASSERT_EQ(::write(fds[1], "the end\n", 8), 8);
  ::close(fds[1]);
  unblock.set_value();
  pump.Finish(5000);
  EXPECT_THAT(written,
              ::testing::HasSubstr(" bytes of output dropped here: the disk did not keep up\n"));
  EXPECT_LT(written.size(), 10000u * 100);
  EXPECT_LT(written.find("dropped here"), written.find("the end"));  // the gap where it was
  EXPECT_THAT(written, ::testing::EndsWith("the end\n"));  // the newest output is never dropped
}

}  // namespace
}  // namespace stoker::runner
