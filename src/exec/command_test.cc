#include "exec/command.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace stoker::exec {
namespace {

TEST(RunCommandTest, CollectsOutputErrorAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(RunCommandTest, GivesNoStdinAndKillsACommandPastItsTimeout) {
  auto start = std::chrono::steady_clock::now();
  auto r = RunCommand({"sh", "-c", "cat; exec sleep 30"}, 0.3);  // cat ends at once: /dev/null
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_NE(r->err.find("killed after 0.3s"), std::string::npos) << r->err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(RunCommandTest, ACommandThatCannotStartIsFailedPreconditionWithTheHint) {
  auto r = RunCommand({"/nonexistent/stoker-no-such-tool"}, 10, " (install it)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("(install it)"), std::string::npos);
}

// stokerd's controller reaps every child (waitpid(-1)) while other threads
// run commands: the exit code must survive that (it once read as 0).
TEST(RunCommandTest, TheExitCodeSurvivesAnotherThreadReapingEveryChild) {
  std::atomic<bool> stop{false};
  std::thread reaper([&] {
    while (!stop) {
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  int wrong = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = RunCommand({"sh", "-c", "exit 3"}, 10);
    if (!r.ok() || r->exit_code != 3) ++wrong;
  }
  stop = true;
  reaper.join();
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace stoker::exec
