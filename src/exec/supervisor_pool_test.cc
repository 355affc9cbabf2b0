#include "exec/supervisor_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

// A stand-in for stoker-run that says how it was started: a standby writes
// "standby" into the directory it read from stdin (or "empty" into the
// test's directory when the pipe ended without one, and dies at once when
// the file `die` exists); a cold start writes "cold" into its --replica-dir.
constexpr char kFakeRunner[] = R"(#!/bin/sh
here=$(dirname "$0")
if [ "$1" = --standby ]; then
  if [ -e "$here/die" ]; then echo $$ >> "$here/died"; exit 0; fi
  dir=$(cat)
  if [ -z "$dir" ]; then echo empty >> "$here/ended"; exit 0; fi
  echo standby > "$dir/started"
else
  echo cold > "$2/started"
fi
)";

class SupervisorPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);  // as in stokerd
    char tmpl[] = "/tmp/supervisor-pool-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    runner_ = tmp_ / "stoker-run";
    std::ofstream(runner_) << kFakeRunner;
    fs::permissions(runner_, fs::perms::owner_all);
  }
  void TearDown() override {
    // Every fake supervisor ends (the test's pool is gone, so its standbys
    // read an empty pipe) before its directory is removed.
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
    fs::remove_all(tmp_);
  }

  fs::path NewReplicaDir(const std::string& name) {
    fs::path dir = tmp_ / name;
    fs::create_directory(dir);
    return dir;
  }

  // What the file at `path` says once it exists (10 s at most).
  static std::string Await(const fs::path& path) {
    for (int i = 0; i < 1000; ++i) {
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      if (in && !text.str().empty()) return text.str();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "(no " + path.string() + ")";
  }

  fs::path tmp_, runner_;
};

TEST_F(SupervisorPoolTest, WithoutStandbysEachSupervisorStartsWithItsReplicaDir) {
  SupervisorPool pool(runner_, 0);
  pool.Refill();
  EXPECT_EQ(pool.Waiting(), 0u);
  fs::path dir = NewReplicaDir("r0");
  ASSERT_TRUE(pool.Start(dir).ok());
  EXPECT_EQ(Await(dir / "started"), "cold\n");
}

TEST_F(SupervisorPoolTest, AStandbyTakesTheReplicaDirAndRefillReplacesIt) {
  SupervisorPool pool(runner_, 2);
  pool.Refill();
  EXPECT_EQ(pool.Waiting(), 2u);
  fs::path a = NewReplicaDir("a"), b = NewReplicaDir("b"), c = NewReplicaDir("c");
  ASSERT_TRUE(pool.Start(a).ok());
  ASSERT_TRUE(pool.Start(b).ok());
  EXPECT_EQ(pool.Waiting(), 0u);
  ASSERT_TRUE(pool.Start(c).ok());  // none waits: the slow way
  EXPECT_EQ(Await(a / "started"), "standby\n");
  EXPECT_EQ(Await(b / "started"), "standby\n");
  EXPECT_EQ(Await(c / "started"), "cold\n");
  pool.Refill();
  EXPECT_EQ(pool.Waiting(), 2u);
}

TEST_F(SupervisorPoolTest, AStandbyThatDiedIsPassedOverAndNoReplicaIsLost) {
  std::ofstream(tmp_ / "die").put('\n');
  SupervisorPool pool(runner_, 1);
  pool.Refill();
  ASSERT_EQ(pool.Waiting(), 1u);
  // Its pipe has no reader once it exited.
  pid_t pid = std::stoi(Await(tmp_ / "died"));
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  fs::path dir = NewReplicaDir("r");
  ASSERT_TRUE(pool.Start(dir).ok());
  EXPECT_EQ(Await(dir / "started"), "cold\n");
}

TEST_F(SupervisorPoolTest, StandbysExitWhenThePoolGoes) {
  {
    SupervisorPool pool(runner_, 2);
    pool.Refill();
    ASSERT_EQ(pool.Waiting(), 2u);
  }
  // Two lines: both read an empty pipe.
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(tmp_ / "ended");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text == "empty\nempty\n") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "the standbys did not end when the pool did";
}

TEST_F(SupervisorPoolTest, ARunnerThatCannotStartIsAnErrorNamingIt) {
  SupervisorPool pool(tmp_ / "missing-stoker-run", 1);
  pool.Refill();  // logged, none waits
  EXPECT_EQ(pool.Waiting(), 0u);
  Status s = pool.Start(NewReplicaDir("r"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing-stoker-run"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace stoker::exec
