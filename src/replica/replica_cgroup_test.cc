#include "replica/replica_cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/time.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// What a Debian host with the hybrid (v1 + unified) layout shows.
constexpr const char* kHybridCgroup =
    "9:name=systemd:/\n8:pids:/system.slice/stokerd.service\n6:freezer:/\n"
    "4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";
constexpr const char* kHybridMounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupLayoutTest, HybridHostsUseTheV1ControllersUnderTheirOwnCgroups) {
  CgroupLayout l = ParseCgroupLayout(kHybridCgroup, kHybridMounts);
  ASSERT_EQ(l.kind, CgroupLayout::Kind::kV1);
  EXPECT_EQ(l.parents.at("freezer"), "/sys/fs/cgroup/freezer/stoker");
  EXPECT_EQ(l.parents.at("pids"), "/sys/fs/cgroup/pids/system.slice/stokerd.service/stoker");
  EXPECT_EQ(l.parents.at("memory"), "/sys/fs/cgroup/memory/process_api/abc/stoker");
  EXPECT_EQ(l.parents.at("cpuacct"), "/sys/fs/cgroup/cpuacct/stoker");
  EXPECT_EQ(l.parents.count("unified"), 0u);
  EXPECT_EQ(l.relative_parent, "/stoker");
  // Every hierarchy, also those Stoker makes no cgroup in: podman makes a
  // container's cgroups in all of them.
  EXPECT_EQ(l.mounts, (std::vector<fs::path>{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct",
                                             "/sys/fs/cgroup/memory", "/sys/fs/cgroup/freezer",
                                             "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"}));
}

TEST(CgroupLayoutTest, AHierarchyMountedTwiceIsListedOnce) {
  CgroupLayout l =
      ParseCgroupLayout("6:freezer:/\n3:name=systemd:/\n",
                        "37 31 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n"
                        "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
                        "90 80 0:37 / /run/elsewhere/systemd rw - cgroup cgroup rw,name=systemd\n"
                        "91 80 0:34 /sub /run/elsewhere/freezer rw - cgroup cgroup rw,freezer\n");
  ASSERT_EQ(l.kind, CgroupLayout::Kind::kV1);
  EXPECT_EQ(l.mounts, (std::vector<fs::path>{"/sys/fs/cgroup/freezer", "/sys/fs/cgroup/systemd"}));
}

TEST(CgroupLayoutTest, PureV2HostsUseTheUnifiedHierarchy) {
  CgroupLayout l =
      ParseCgroupLayout("0::/system.slice/stokerd.service\n",
                        "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  ASSERT_EQ(l.kind, CgroupLayout::Kind::kV2);
  EXPECT_EQ(l.parents.at("unified"), "/sys/fs/cgroup/system.slice/stokerd.service/stoker");
  EXPECT_EQ(l.relative_parent, "/system.slice/stokerd.service/stoker");
}

TEST(CgroupLayoutTest, AMountOfAnotherCgroupsSubtreeIsNotUsed) {
  // The freezer mount shows only /other: this process's /mine is not in it.
  CgroupLayout l =
      ParseCgroupLayout("6:freezer:/mine\n",
                        "37 31 0:34 /other /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n");
  EXPECT_EQ(l.kind, CgroupLayout::Kind::kNone);
  EXPECT_FALSE(l.why_none.empty());
  EXPECT_EQ(ParseCgroupLayout("", "").kind, CgroupLayout::Kind::kNone);
}

TEST(ReplicaCgroupNameTest, IsStableShortAndSafe) {
  std::string a = ReplicaCgroupName("/var/lib/stoker/jobs/42/attempt-2/workerpool0-1");
  EXPECT_EQ(a, ReplicaCgroupName("/var/lib/stoker/jobs/42/attempt-2/workerpool0-1"));
  EXPECT_NE(a, ReplicaCgroupName("/home/u/.local/share/stoker/jobs/42/attempt-2/workerpool0-1"));
  EXPECT_EQ(a.rfind("r-", 0), 0u);
  EXPECT_NE(a.find("-workerpool0-1"), std::string::npos);
  std::string odd = ReplicaCgroupName("/x/../a b/\n" + std::string(200, 'z'));
  EXPECT_LE(odd.size(), 64u);
  EXPECT_EQ(
      odd.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."),
      std::string::npos);
}

TEST(MemoryAmountTest, SaysGigabytesAsMachineTypesDo) {
  EXPECT_EQ(MemoryAmount(15ull << 30), "15 GB");
  EXPECT_EQ(MemoryAmount(3840ull << 20), "3.8 GB");
  EXPECT_EQ(MemoryAmount(64ull << 20), "64 MB");
}

// The real thing: root on a machine with cgroups (CI's is v1 hybrid).
class RealCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = DetectCgroupLayout();
    const bool must = std::getenv("STOKER_TEST_REQUIRE_ALL") != nullptr;
    if (::geteuid() != 0 || layout_.kind == CgroupLayout::Kind::kNone) {
      if (must) FAIL() << "cgroups are needed: " << layout_.why_none;
      GTEST_SKIP() << "needs root and a cgroup hierarchy: " << layout_.why_none;
    }
    name_ = ReplicaCgroupName("/test/" + std::to_string(::getpid()) + "/" +
                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  CgroupLayout layout_;
  std::string name_;
};

// Forks a child that joins `cg` and runs `sh -c script` (stdout to `out`).
pid_t StartIn(const ReplicaCgroup& cg, const std::string& script) {
  std::vector<int> fds = cg.OpenJoinFds();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!ReplicaCgroup::JoinFromChild(fds)) ::_exit(120);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    ::_exit(127);
  }
  for (int fd : fds) ::close(fd);
  return pid;
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST_F(RealCgroupTest, AnEscapedEmptyEnvGrandchildDiesWithTheCgroup) {
  auto cg = ReplicaCgroup::Create(layout_, name_, 0);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  fs::path pidfile = fs::temp_directory_path() / (name_ + ".pid");
  // setsid, fork twice, exec with an empty environment: what escaped every
  // earlier clean up (no process group, no parent link, no cookie).
  pid_t child = StartIn(
      *cg, "setsid sh -c 'env -i /bin/sleep 300 & echo $! > " + pidfile.string() + "' & wait");
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    std::ifstream(pidfile) >> grandchild;
    if (grandchild == 0) ::usleep(10000);
  }
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(Alive(grandchild));
  std::vector<pid_t> in = cg->Pids();
  EXPECT_NE(std::find(in.begin(), in.end(), grandchild), in.end());
  const int64_t t0 = MonotonicMs();
  EXPECT_GE(cg->KillAll(5000), 1);
  EXPECT_LT(MonotonicMs() - t0, 1000);
  // Not our child: gone, or a zombie of init's about to be reaped.
  std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
  std::string line;
  std::getline(stat, line);
  EXPECT_TRUE(line.empty() || line.find(") Z") != std::string::npos) << line;
  EXPECT_TRUE(cg->Pids().empty());
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(ReplicaCgroup::Open(layout_, name_).has_value());
  fs::remove(pidfile);
}

TEST_F(RealCgroupTest, AMemoryHogIsKilledAndTheKernelSaysItWasMemory) {
  if (!layout_.parents.count("memory") && !layout_.parents.count("unified")) {
    GTEST_SKIP() << "no memory controller";
  }
  auto cg = ReplicaCgroup::Create(layout_, name_, 64ull << 20);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  ASSERT_EQ(cg->memory_limit(), 64ull << 20);
  EXPECT_FALSE(cg->OomKilled());
  // 256 MiB touched page by page.
  pid_t child = StartIn(*cg, "exec /usr/bin/python3 -c 'b = bytearray(256 << 20); print(len(b))'");
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  EXPECT_TRUE(cg->OomKilled());
  EXPECT_GE(cg->KillAll(5000), 0);
  EXPECT_TRUE(cg->Remove().ok());
}

// podman (cgroupfs manager) puts a container's conmon and the container at
// --cgroup-parent in every hierarchy, also those the replica has no cgroup
// in (cpu, cpuset, blkio, devices, name=systemd): Remove takes them too, or
// each container job would leave a cgroup behind in each of them.
TEST_F(RealCgroupTest, RemoveTakesWhatAContainerEngineMadeInEveryHierarchy) {
  auto cg = ReplicaCgroup::Create(layout_, name_, 0);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  std::vector<fs::path> made;
  for (const fs::path& mount : layout_.mounts) {
    fs::path conmon = mount.string() + cg->ContainerParent() + "/conmon";
    std::error_code ec;
    fs::create_directories(conmon, ec);
    if (!ec) made.push_back(conmon);
  }
  ASSERT_GT(made.size(), layout_.parents.size()) << "no hierarchy beyond the replica's own";
  EXPECT_TRUE(cg->Remove().ok());
  for (const fs::path& conmon : made) {
    EXPECT_FALSE(fs::exists(conmon.parent_path())) << conmon.parent_path();
  }
}

// A standby supervisor makes its cgroup before it knows its replica; at the
// replica's start a rename gives it the replica's name and its limit, and it
// contains what runs in it like one made then.
TEST_F(RealCgroupTest, ACgroupMadeAheadBecomesTheReplicasByARename) {
  const std::string ahead_name = StandbyCgroupName(::getpid());
  auto cg = ReplicaCgroup::Create(layout_, ahead_name, 0);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  ASSERT_TRUE(cg->Rename(name_, 96ull << 20).ok());
  EXPECT_EQ(cg->name(), name_);
  EXPECT_FALSE(ReplicaCgroup::Open(layout_, ahead_name).has_value());
  for (const auto& [controller, parent] : layout_.parents) {
    EXPECT_TRUE(fs::is_directory(parent / name_)) << controller;
    EXPECT_FALSE(fs::exists(parent / ahead_name)) << controller;
  }
  if (layout_.parents.count("memory")) {
    std::ifstream limit(layout_.parents.at("memory") / name_ / "memory.limit_in_bytes");
    uint64_t bytes = 0;
    limit >> bytes;
    EXPECT_EQ(bytes, 96ull << 20);
    EXPECT_EQ(cg->memory_limit(), 96ull << 20);
  }
  pid_t child = StartIn(*cg, "exec /bin/sleep 300");
  for (int i = 0; i < 200 && cg->Pids().empty(); ++i) ::usleep(5000);
  std::vector<pid_t> in = cg->Pids();
  EXPECT_NE(std::find(in.begin(), in.end(), child), in.end());
  EXPECT_GE(cg->KillAll(5000), 1);
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(ReplicaCgroup::Open(layout_, name_).has_value());
}

TEST_F(RealCgroupTest, ARenameToANameInUseFailsAndKeepsTheOldNameEverywhere) {
  const std::string ahead_name = StandbyCgroupName(::getpid());
  auto taken = ReplicaCgroup::Create(layout_, name_, 0);
  auto cg = ReplicaCgroup::Create(layout_, ahead_name, 0);
  ASSERT_TRUE(taken.ok() && cg.ok());
  EXPECT_FALSE(cg->Rename(name_, 0).ok());
  EXPECT_EQ(cg->name(), ahead_name);
  for (const auto& [controller, parent] : layout_.parents) {
    EXPECT_TRUE(fs::is_directory(parent / ahead_name)) << controller;
  }
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_TRUE(taken->Remove().ok());
}

TEST_F(RealCgroupTest, TheCgroupsOfStandbysThatAreGoneAreRemovedAndALiveOnesKept) {
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  int st = 0;
  ASSERT_EQ(::waitpid(gone, &st, 0), gone);
  auto left = ReplicaCgroup::Create(layout_, StandbyCgroupName(gone), 0);
  auto mine = ReplicaCgroup::Create(layout_, StandbyCgroupName(::getpid()), 0);
  ASSERT_TRUE(left.ok() && mine.ok());
  RemoveStaleStandbyCgroups(layout_);
  EXPECT_FALSE(ReplicaCgroup::Open(layout_, StandbyCgroupName(gone)).has_value());
  EXPECT_TRUE(ReplicaCgroup::Open(layout_, StandbyCgroupName(::getpid())).has_value());
  EXPECT_TRUE(mine->Remove().ok());
}

TEST_F(RealCgroupTest, CountsTheMembersMemoryAndCpu) {
  auto cg = ReplicaCgroup::Create(layout_, name_, 0);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  pid_t child = StartIn(*cg,
                        "exec /usr/bin/python3 -c 'import time\nb = bytearray(64 << 20)\n"
                        "t = time.time()\nwhile time.time() - t < 0.3: pass\ntime.sleep(30)'");
  uint64_t mem = 0;
  for (int i = 0; i < 300 && mem < (64ull << 20); ++i) {
    mem = cg->MemoryBytes();
    ::usleep(10000);
  }
  if (layout_.parents.count("memory") || layout_.parents.count("unified")) {
    EXPECT_GE(mem, 64ull << 20);
  }
  if (auto cpu = cg->CpuNanos()) {
    EXPECT_GT(*cpu, 0u);
  }
  EXPECT_EQ(cg->KillAll(5000), 1);
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_TRUE(cg->Remove().ok());
}

}  // namespace
}  // namespace stoker::runner
