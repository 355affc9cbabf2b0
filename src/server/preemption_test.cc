#include "server/preemption.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stoker::server {
namespace {

namespace fs = std::filesystem;

spec::CustomJob JobWith(const std::string& strategy, int priority,
                        std::map<std::string, std::string> labels = {}) {
  spec::CustomJob job;
  job.job_spec.scheduling.strategy = strategy;
  job.job_spec.scheduling.priority = priority;
  job.labels = std::move(labels);
  return job;
}

TEST(IsPreemptibleTest, TheLabelWinsThenSpotThenTheBand) {
  config::PreemptionConfig band;
  band.preemptible_below = 0;
  EXPECT_FALSE(IsPreemptible(JobWith("STANDARD", 0), {}));
  EXPECT_TRUE(IsPreemptible(JobWith("SPOT", 500), {}));
  EXPECT_TRUE(IsPreemptible(JobWith("STANDARD", -1), band));
  EXPECT_FALSE(IsPreemptible(JobWith("STANDARD", 0), band));
  EXPECT_FALSE(IsPreemptible(JobWith("SPOT", -5, {{"stoker-preemptible", "false"}}), band));
  EXPECT_TRUE(IsPreemptible(JobWith("STANDARD", 9, {{"stoker-preemptible", "true"}}), {}));
}

class NewestChangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(root_);
    fs::create_directories(root_ / "out" / "checkpoints" / "step-2");
  }
  void TearDown() override { fs::remove_all(root_); }
  // Writes `path` (a file unless it exists) with modification time `s` seconds.
  void Touch(const fs::path& path, int64_t s, bool link = false) {
    if (!fs::exists(path) && !link) std::ofstream(path) << "x";
    struct timespec t[2] = {{s, 0}, {s, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, link ? AT_SYMLINK_NOFOLLOW : 0), 0);
  }
  fs::path root_ = fs::temp_directory_path() / ("newest_change_" + std::to_string(getpid()));
};

TEST_F(NewestChangeTest, TheNewestEntryOfTheDirectoryAndOneLevelBelow) {
  const fs::path dir = root_ / "out" / "checkpoints";
  Touch(dir / "a.ckpt", 1000);
  Touch(dir / "step-2" / "model.pt", 3000);
  Touch(dir / "step-2", 2000);
  EXPECT_EQ(NewestChangeUs(root_, "out/checkpoints"), 3000LL * 1000000);
  EXPECT_EQ(NewestChangeUs(root_, "out/missing"), 0);
  // The bound: one entry looked at, whichever the directory lists first.
  EXPECT_LE(NewestChangeUs(root_, "out/checkpoints", 1), 2000LL * 1000000);
}

TEST_F(NewestChangeTest, NoLinkBelowTheRootIsFollowed) {
  const fs::path elsewhere = root_ / "elsewhere";
  fs::create_directories(elsewhere / "sub");
  Touch(elsewhere / "secret", 9000);
  Touch(elsewhere / "sub" / "deeper", 9000);
  const fs::path dir = root_ / "out" / "checkpoints";
  Touch(dir / "a.ckpt", 1000);
  Touch(dir / "step-2", 1000);
  // A link as an entry counts with its own time; its target is not entered.
  fs::create_directory_symlink(elsewhere, dir / "link");
  Touch(dir / "link", 1500, /*link=*/true);
  EXPECT_EQ(NewestChangeUs(root_, "out/checkpoints"), 1500LL * 1000000);
  // A link in place of the directory, or of a component above it: nothing.
  fs::create_directory_symlink(elsewhere, root_ / "out" / "swapped");
  EXPECT_EQ(NewestChangeUs(root_, "out/swapped"), 0);
  fs::rename(root_ / "out", root_ / "real-out");
  fs::create_directory_symlink(root_ / "real-out", root_ / "out");
  EXPECT_EQ(NewestChangeUs(root_, "out/checkpoints"), 0);
}

}  // namespace
}  // namespace stoker::server
