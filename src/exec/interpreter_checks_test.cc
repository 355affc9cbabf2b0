#include "exec/interpreter_checks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

class InterpreterChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(python_) << "#!/bin/sh\n";
    fs::permissions(python_, fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A runner that counts its calls and says yes to "torch" only.
  InterpreterChecks::Runner Counting() {
    return [this](const std::string&, const std::string& module, ModuleCheck) {
      ++runs_;
      return module == "torch";
    };
  }

  fs::path dir_ =
      fs::temp_directory_path() / ("interpreter_checks_test_" + std::to_string(getpid()));
  fs::path python_ = dir_ / "python3";
  fs::path cache_ = dir_ / "cache" / "interpreters.json";
  int runs_ = 0;
};

TEST_F(InterpreterChecksTest, AnAnswerIsAskedOnceAndAYesSurvivesARestart) {
  {
    InterpreterChecks checks(cache_, Counting());
    EXPECT_EQ(checks.Cached(python_, "torch", ModuleCheck::kImport), std::nullopt);
    EXPECT_TRUE(checks.Check(python_, "torch", ModuleCheck::kImport));
    EXPECT_FALSE(checks.Check(python_, "tensorflow", ModuleCheck::kImport));
    EXPECT_TRUE(checks.Check(python_, "torch", ModuleCheck::kImport));
    EXPECT_EQ(runs_, 2);
    // Finding is another question than importing.
    EXPECT_EQ(checks.Cached(python_, "torch", ModuleCheck::kFind), std::nullopt);
  }
  // Yes survives a restart; no is asked again (the module may have been
  // installed since).
  InterpreterChecks again(cache_, Counting());
  EXPECT_EQ(again.Cached(python_, "torch", ModuleCheck::kImport), true);
  EXPECT_EQ(again.Cached(python_, "tensorflow", ModuleCheck::kImport), std::nullopt);
  EXPECT_FALSE(again.Check(python_, "tensorflow", ModuleCheck::kImport));
  EXPECT_EQ(runs_, 3);
}

TEST_F(InterpreterChecksTest, AChangedInterpreterIsAskedAgain) {
  InterpreterChecks checks(cache_, Counting());
  EXPECT_TRUE(checks.Check(python_, "torch", ModuleCheck::kImport));
  // Reinstalled: same size, another modification time.
  fs::last_write_time(python_, fs::last_write_time(python_) - std::chrono::hours(1));
  EXPECT_EQ(checks.Cached(python_, "torch", ModuleCheck::kImport), std::nullopt);
  EXPECT_TRUE(checks.Check(python_, "torch", ModuleCheck::kImport));
  EXPECT_EQ(runs_, 2);
  // A link to it (a virtual environment's python3) is asked of its own:
  // it finds other packages.
  fs::create_directories(dir_ / "venv" / "bin");
  fs::create_symlink(python_, dir_ / "venv" / "bin" / "python3");
  EXPECT_EQ(
      checks.Cached((dir_ / "venv" / "bin" / "python3").string(), "torch", ModuleCheck::kImport),
      std::nullopt);
}

TEST_F(InterpreterChecksTest, AMissingInterpreterIsNoWithoutRunningIt) {
  InterpreterChecks checks(cache_, Counting());
  EXPECT_EQ(checks.Cached((dir_ / "none").string(), "torch", ModuleCheck::kImport), false);
  EXPECT_FALSE(checks.Check((dir_ / "none").string(), "torch", ModuleCheck::kImport));
  EXPECT_EQ(runs_, 0);
}

TEST_F(InterpreterChecksTest, ADamagedCacheIsIgnored) {
  fs::create_directories(cache_.parent_path());
  std::ofstream(cache_) << "{not json";
  InterpreterChecks checks(cache_, Counting());
  EXPECT_EQ(checks.Cached(python_, "torch", ModuleCheck::kImport), std::nullopt);
  EXPECT_TRUE(checks.Check(python_, "torch", ModuleCheck::kImport));
}

TEST_F(InterpreterChecksTest, ACheckOfAPairBeingCheckedWaitsForItsAnswer) {
  // The runner blocks until the test lets it go, so that a second Check
  // comes while the first is running.
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false;
  InterpreterChecks checks(cache_, [&](const std::string&, const std::string&, ModuleCheck) {
    std::unique_lock<std::mutex> lock(mu);
    ++runs_;
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return true;
  });
  std::thread first([&] { EXPECT_TRUE(checks.Check(python_, "torch", ModuleCheck::kImport)); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  // Mostly the second Check starts before the release below and must wait;
  // should it start after, it finds the answer: one run either way.
  bool second = false;
  std::thread waiter([&] { second = checks.Check(python_, "torch", ModuleCheck::kImport); });
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  first.join();
  waiter.join();
  EXPECT_TRUE(second);
  EXPECT_EQ(runs_, 1);
}

TEST_F(InterpreterChecksTest, BackgroundChecksAnswerLaterLookups) {
  InterpreterChecks checks(cache_, Counting());
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  checks.CheckInBackground({{python_, "torch"}, {python_, "jax"}}, [&] {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done; }));
  EXPECT_EQ(checks.Cached(python_, "torch", ModuleCheck::kImport), true);
  EXPECT_EQ(checks.Cached(python_, "jax", ModuleCheck::kImport), false);
  EXPECT_EQ(runs_, 2);
}

}  // namespace
}  // namespace stoker::exec
