// The recovery side of the replica directory contract: what stokerd does
// with a replica whose supervisor died without a status.
#include "exec/replica_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "replica/replica_contract.h"
#include "replica/replica_processes.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

// True while `pid` exists and is not a zombie.
bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = stat.rfind(')');
  return paren == std::string::npos || stat.substr(paren + 2, 1) != "Z";
}

class ReplicaFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_replica_files_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl) / "jobs" / "7" / "workerpool0-0";
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t p : children_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    fs::remove_all(dir_.parent_path().parent_path().parent_path());
  }

  // A `sleep` that carries `cookie` in its environment, as every process of
  // a replica does, wherever it went (here: not in the trainer's group).
  pid_t SleeperWithCookie(const std::string& cookie) {
    std::string var = std::string(runner::kReplicaCookieVar) + "=" + cookie;
    char* argv[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("1000"), nullptr};
    char* envp[] = {var.data(), nullptr};
    pid_t pid = -1;
    EXPECT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, envp), 0);
    children_.push_back(pid);
    // posix_spawn returns once the child exists, perhaps before its exec.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (runner::FindReplicaProcesses(cookie).empty() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pid;
  }

  // The files of a replica whose supervisor claimed it, started the trainer
  // and died (runner.lock free, no status.json).
  void SupervisorDied() {
    std::ofstream(dir_ / "claim").close();
    std::ofstream(dir_ / "runner.lock").close();
    std::ofstream(dir_ / "trainer.json") << R"({"pid": 0, "pgid": 0, "start_time_us": 5})";
  }

  fs::path dir_;
  std::vector<pid_t> children_;
};

// launch.json reads back as the contract says, and is replaced whole when
// written again (recovery), with no temp file left beside it.
TEST_F(ReplicaFilesTest, LaunchJsonIsReplacedWholeWhenWrittenAgain) {
  ReplicaLaunch r;
  r.name = "workerpool0-0";
  r.argv = {"python3", "-m", "trainer.task"};
  ASSERT_TRUE(WriteLaunchFile(dir_, r).ok());
  auto first = replica::ParseLaunchSpec(ReadFile(dir_ / "launch.json").value());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->argv, r.argv);
  r.argv = {"python3", "-m", "trainer.other"};
  ASSERT_TRUE(WriteLaunchFile(dir_, r).ok());
  auto second = replica::ParseLaunchSpec(ReadFile(dir_ / "launch.json").value());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->argv, r.argv);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename(), "launch.json");  // no temp file left
  }
}

TEST_F(ReplicaFilesTest, TrainerJsonIsReadThroughTheContractAndOnlyAsTheSupervisorsOwn) {
  EXPECT_FALSE(ReadTrainerInfo(dir_).has_value());  // none yet
  std::ofstream(dir_ / "trainer.json")
      << replica::FormatTrainerInfo({.pid = 42, .pgid = 42, .start_time_us = 5, .start_note = "n"});
  std::optional<replica::TrainerInfo> t = ReadTrainerInfo(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->pid, 42);
  EXPECT_EQ(t->start_note, "n");
  std::ofstream(dir_ / "trainer.json") << "[1, 2]";  // not the contract's object
  EXPECT_FALSE(ReadTrainerInfo(dir_).has_value());
  fs::remove(dir_ / "trainer.json");  // a trainer's link in its place is not followed
  fs::create_symlink("/etc/hostname", dir_ / "trainer.json");
  EXPECT_FALSE(ReadTrainerInfo(dir_).has_value());
  fs::remove(dir_ / "trainer.json");
}

TEST_F(ReplicaFilesTest, ALostReplicaTakesEveryProcessWithItsCookieAlong) {
  SupervisorDied();
  pid_t escaped = SleeperWithCookie(dir_.string());
  pid_t neighbour = SleeperWithCookie((dir_.parent_path() / "workerpool0-1").string());
  ASSERT_TRUE(Alive(escaped));
  // The cookie does not depend on how the directory is spelled.
  ReplicaStatus st = ReadReplicaStatus(dir_ / "." / "", "workerpool0-0");
  EXPECT_EQ(st.phase, ReplicaPhase::kLost);
  EXPECT_EQ(st.message,
            "the replica supervisor (stoker-run) died without reporting an exit status");
  // Gone by the time the status is returned, not merely signalled.
  EXPECT_FALSE(Alive(escaped));
  EXPECT_TRUE(Alive(neighbour));
}

TEST_F(ReplicaFilesTest, KillsNothingWhenAskedNotTo) {
  SupervisorDied();
  pid_t escaped = SleeperWithCookie(dir_.string());
  ReplicaStatus st = ReadReplicaStatus(dir_, "workerpool0-0", {.kill_orphans = false});
  EXPECT_EQ(st.phase, ReplicaPhase::kLost);
  EXPECT_TRUE(Alive(escaped));
}

TEST_F(ReplicaFilesTest, AnEndedReplicaIsLeftAlone) {
  SupervisorDied();
  std::ofstream(dir_ / "status.json")
      << R"({"state": "exited", "exit_code": 0, "signal": null, "message": "exited with code 0"})";
  pid_t p = SleeperWithCookie(dir_.string());
  EXPECT_EQ(ReadReplicaStatus(dir_, "workerpool0-0").phase, ReplicaPhase::kEnded);
  EXPECT_TRUE(Alive(p));
}

TEST_F(ReplicaFilesTest, AClaimedReplicaInstallingRequirementsIsPreparingAndSaysWhat) {
  std::ofstream(dir_ / "claim").close();
  int lock = ::open((dir_ / "runner.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);  // a live supervisor (this process)
  ReplicaStatus st = ReadReplicaStatus(dir_, "workerpool0-0");
  EXPECT_EQ(st.phase, ReplicaPhase::kStarting);
  EXPECT_FALSE(st.preparing);
  std::ofstream(dir_ / "preparing.json")
      << R"j({"note": "installing requirements [a] (environment 3f2a9c1b4d5e)", "since_us": 1})j";
  st = ReadReplicaStatus(dir_, "workerpool0-0");
  EXPECT_EQ(st.phase, ReplicaPhase::kStarting);
  EXPECT_TRUE(st.preparing);
  EXPECT_EQ(st.message, "workerpool0-0: installing requirements [a] (environment 3f2a9c1b4d5e)");
  ::close(lock);
}

}  // namespace
}  // namespace stoker::exec
