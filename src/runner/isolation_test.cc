// Tests of trainer isolation (isolation.h): the pure planning, then real
// namespaces and mounts in forked children (the test runs as root, as CI
// does, and also drops to `nobody` first to take the unprivileged path), then
// the real stoker-run binary.
#include "runner/isolation.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/in_child_for_test.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

// ---------------------------------------------------------------- parsing

TEST(ParseIsolationSpecTest, ReadsModeAndPaths) {
  auto spec = ParseIsolationSpec(json::parse(
      R"({"mode": "required", "hide": ["/d"], "keep": ["/d/jobs/1"], "keep_read_only": ["/d/e"]})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->mode, IsolationMode::kRequired);
  EXPECT_THAT(spec->hide, ElementsAre(fs::path("/d")));
  EXPECT_THAT(spec->keep, ElementsAre(fs::path("/d/jobs/1")));
  EXPECT_THAT(spec->keep_read_only, ElementsAre(fs::path("/d/e")));
}

TEST(ParseIsolationSpecTest, NullOrNoModeIsOff) {
  EXPECT_EQ(ParseIsolationSpec(json()).value().mode, IsolationMode::kOff);
  EXPECT_EQ(ParseIsolationSpec(json::object()).value().mode, IsolationMode::kOff);
  EXPECT_EQ(ParseIsolationSpec(json::parse(R"({"mode": null})")).value().mode, IsolationMode::kOff);
  EXPECT_EQ(ParseIsolationSpec(json::parse(R"({"mode": "auto"})")).value().mode,
            IsolationMode::kAuto);
}

TEST(ParseIsolationSpecTest, NamesTheBadField) {
  struct Case {
    const char* json;
    const char* field;
  } cases[] = {
      {R"([])", "launch.json: isolation: must be"},
      {R"({"mode": "strict"})", "isolation.mode"},
      // Not strings: refused with the allowed values, never a json exception.
      {R"({"mode": 3})", "launch.json: isolation.mode: must be off, auto or required, got 3"},
      {R"({"mode": true})", "launch.json: isolation.mode: must be off, auto or required, got true"},
      {R"({"mode": ["auto"]})", "isolation.mode"},
      {R"({"mode": "auto", "hide": "/d"})", "isolation.hide"},
      {R"({"mode": "auto", "hide": ["d"]})", "isolation.hide[0]"},
      {R"({"mode": "auto", "keep": ["/a", 3]})", "isolation.keep[1]"},
      {R"({"mode": "auto", "keep_read_only": [""]})", "isolation.keep_read_only[0]"},
  };
  for (const Case& c : cases) {
    auto spec = ParseIsolationSpec(json::parse(c.json));
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.field)) << c.json;
  }
}

// ---------------------------------------------------------------- a data dir

// A temp tree shaped like a data dir, readable by everyone on purpose: what
// the trainer cannot read below is hidden, not merely forbidden.
class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/isolation-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::permissions(root_, fs::perms(0755));
    data_ = root_ / "data";
    for (const char* d : {"jobs/1/workerpool0-0/work", "jobs/2/workerpool0-0/work",
                          "jobs/2/workerpool0-0/hypertune", "buckets/b", "envs/bin"}) {
      fs::create_directories(data_ / d);
    }
    Write(data_ / "token", "stk_secret\n");
    Write(data_ / "stoker.db", "SQLite format 3\n");
    Write(data_ / "jobs/1/workerpool0-0/output.log", "job one's log\n");
    Write(data_ / "buckets/b/object", "bucket data\n");
    Write(data_ / "envs/bin/python", "#!/bin/sh\n");
    Write(root_ / "outside.txt", "visible\n");
    // Every file readable and every directory open to all, and owned by
    // nobody where a nobody trainer writes.
    for (auto& e : fs::recursive_directory_iterator(root_)) {
      fs::permissions(e.path(), e.is_directory() ? fs::perms(0777) : fs::perms(0666));
      ASSERT_EQ(::chown(e.path().c_str(), kNobody, kNogroup), 0);
    }
    // Replica directories are stoker-run's own, as the executor makes them
    // (the trainer writes only in work/ and hypertune/, which stoker-run makes).
    for (const char* d : {"jobs/1/workerpool0-0", "jobs/2/workerpool0-0"}) {
      ASSERT_EQ(::chown((data_ / d).c_str(), ::geteuid(), ::getegid()), 0);
      fs::permissions(data_ / d, fs::perms(0755));
    }
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  static void Write(const fs::path& p, const std::string& text) {
    ASSERT_TRUE(WriteFileAtomic(p, text).ok()) << p;
  }

  // The spec stokerd writes for job `job`.
  IsolationSpec SpecFor(int job, IsolationMode mode = IsolationMode::kRequired) const {
    IsolationSpec spec;
    spec.mode = mode;
    spec.hide = {data_};
    fs::path replica = data_ / "jobs" / std::to_string(job) / "workerpool0-0";
    spec.keep = {replica / "work", replica / "hypertune", data_ / "buckets"};
    spec.keep_read_only = {data_ / "jobs" / std::to_string(job), data_ / "envs",
                           root_ / "not-there"};
    return spec;
  }

  fs::path root_, data_;
};

TEST_F(IsolationTest, PlansTheHiddenDirectoryAndTheBindsUnderIt) {
  IsolationSpec spec = SpecFor(2);
  spec.keep.push_back(root_ / "outside.txt");  // outside what is hidden: visible anyway
  Isolation isolation(spec, false);
  std::string d = fs::canonical(data_).string();
  // Parents first: the writable work/ and hypertune/ go on top of the job's
  // read-only directory.
  EXPECT_THAT(isolation.Describe(),
              ElementsAre("hide " + d, "rw " + d + "/buckets", "ro " + d + "/envs",
                          "ro " + d + "/jobs/2", "rw " + d + "/jobs/2/workerpool0-0/hypertune",
                          "rw " + d + "/jobs/2/workerpool0-0/work"));
}

TEST_F(IsolationTest, AKeptPathHoldingAHiddenOneWins) {
  IsolationSpec spec;
  spec.mode = IsolationMode::kAuto;
  spec.hide = {data_ / "jobs/1", root_ / "missing"};
  spec.keep = {data_};
  Isolation isolation(spec, false);
  EXPECT_THAT(isolation.Describe(), IsEmpty());
}

// What a child process may observe, check by check: "ok" or the errno name.
using Observations = std::map<std::string, std::string>;

std::string Outcome(int rc) { return rc == 0 ? "ok" : strerrorname_np(errno); }

std::string TryRead(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return strerrorname_np(errno);
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  int err = errno;
  ::close(fd);
  return n > 0 ? "ok" : n == 0 ? "empty" : strerrorname_np(err);
}

std::string TryWrite(const fs::path& p) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return strerrorname_np(errno);
  ssize_t n = ::write(fd, "x\n", 2);
  ::close(fd);
  return n == 2 ? "ok" : "short write";
}

std::string TryList(const fs::path& p) {
  DIR* d = ::opendir(p.c_str());
  if (!d) return strerrorname_np(errno);
  ::closedir(d);
  return "ok";
}

// Runs `body` in a forked child, which reports what it saw as "key=value"
// lines; returns them (and "exit" = the child's exit code).
Observations InChild(const std::function<void(Observations&)>& body) {
  ChildReport report = RunInChild([&] {
    Observations seen;
    body(seen);
    std::string out;
    for (const auto& [k, v] : seen) out += k + "=" + v + "\n";
    return out;
  });
  int status = report.status;
  Observations seen;
  std::istringstream in(report.text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    seen[line.substr(0, eq)] = line.substr(eq + 1);
  }
  seen["exit"] = WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "signaled";
  return seen;
}

// Drops to nobody as the supervisor does for run_as (groups, gid, uid).
bool BecomeNobody() {
  gid_t groups[] = {kNogroup};
  return ::setgroups(1, groups) == 0 && ::setgid(kNogroup) == 0 && ::setuid(kNobody) == 0;
}

// A stoker-run started as nobody: as above, and dumpable again as after an
// exec (dropping root made /proc/self/* root's, uid_map included).
bool StartAsNobody() { return BecomeNobody() && ::prctl(PR_SET_DUMPABLE, 1) == 0; }

// What execve does to a process whose uid is not 0: no capabilities left
// (Enter leaves the caller every capability in its new user namespace).
bool DropCapabilities() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  return ::syscall(SYS_capset, &header, data) == 0;
}

// A stand-in for job 1's trainer: isolated (as root would), then nobody,
// then waiting. Returns its pid; it dies with the test process.
pid_t StartOtherJobsTrainer(const IsolationSpec& spec) {
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  Isolation isolation(spec, false);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    // Dumpable again, as after the exec of a real trainer.
    bool ok = isolation.Enter(-1) == nullptr && StartAsNobody();
    ssize_t n = ::write(ready[1], ok ? "1" : "0", 1);
    (void)n;
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  EXPECT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(c, '1') << "the other job's stand-in could not isolate itself";
  return pid;
}

// What job 2's trainer tries, once isolated and no longer root.
void Probe(const fs::path& root, const fs::path& data, pid_t other, pid_t parent,
           Observations& seen) {
  seen["read token"] = TryRead(data / "token");
  seen["read stoker.db"] = TryRead(data / "stoker.db");
  seen["read job 1 log"] = TryRead(data / "jobs/1/workerpool0-0/output.log");
  seen["list data dir"] = TryList(data);
  seen["list jobs"] = TryList(data / "jobs");
  seen["create in data dir"] = TryWrite(data / "new-file");
  seen["write own job"] = TryWrite(data / "jobs/2/workerpool0-0/work/model.txt");
  seen["write own control file"] = TryWrite(data / "jobs/2/workerpool0-0/status.json");
  seen["list own job"] = TryList(data / "jobs/2");
  seen["read bucket"] = TryRead(data / "buckets/b/object");
  seen["write bucket"] = TryWrite(data / "buckets/b/new-object");
  seen["read envs"] = TryRead(data / "envs/bin/python");
  seen["write envs"] = TryWrite(data / "envs/bin/planted");
  seen["read outside"] = TryRead(root / "outside.txt");
  seen["unmount"] = Outcome(::umount2(data.c_str(), MNT_DETACH));
  std::string proc = "/proc/" + std::to_string(other) + "/root";
  seen["other trainer's view"] =
      TryRead(proc + (data / "jobs/1/workerpool0-0/output.log").string());
  proc = "/proc/" + std::to_string(parent) + "/root";
  seen["parent's view"] = TryRead(proc + (data / "token").string());
}

void ExpectIsolated(const Observations& seen) {
  for (const char* hidden : {"read token", "read stoker.db", "read job 1 log"}) {
    EXPECT_EQ(seen.at(hidden), "ENOENT") << hidden;
  }
  EXPECT_EQ(seen.at("list data dir"), "EACCES");
  EXPECT_EQ(seen.at("list jobs"), "EACCES");
  EXPECT_EQ(seen.at("create in data dir"), "EROFS");
  EXPECT_EQ(seen.at("unmount"), "EPERM");
  // The kernel keeps a process out of another user namespace's processes.
  EXPECT_EQ(seen.at("other trainer's view"), "EACCES");
  EXPECT_EQ(seen.at("parent's view"), "EACCES");
  for (const char* works : {"write own job", "list own job", "read bucket", "write bucket",
                            "read envs", "read outside"}) {
    EXPECT_EQ(seen.at(works), "ok") << works;
  }
  EXPECT_EQ(seen.at("write envs"), "EROFS");
  // The supervisor's files beside the work dir stay read-only, even for a
  // trainer of the daemon's own account.
  EXPECT_EQ(seen.at("write own control file"), "EROFS");
  EXPECT_EQ(seen.at("exit"), "0");
}

TEST_F(IsolationTest, AsRootHidesTheDataDirButTheJobsOwnFiles) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "the root path needs root (the unprivileged one runs below)";
  pid_t other = StartOtherJobsTrainer(SpecFor(1));
  Isolation isolation(SpecFor(2), false);
  const pid_t parent = ::getpid();
  Observations seen = InChild([&](Observations& seen) {
    const char* error = isolation.Enter(-1);
    seen["enter"] = error ? error : "ok";
    seen["drop"] = BecomeNobody() ? "ok" : strerrorname_np(errno);
    Probe(root_, data_, other, parent, seen);
  });
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
  ASSERT_EQ(seen["enter"], "ok");
  ASSERT_EQ(seen["drop"], "ok");
  ExpectIsolated(seen);
  // Nothing changed outside.
  EXPECT_TRUE(fs::exists(data_ / "token"));
  EXPECT_TRUE(fs::exists(data_ / "jobs/2/workerpool0-0/work/model.txt"));
  EXPECT_FALSE(fs::exists(data_ / "envs/bin/planted"));
}

TEST_F(IsolationTest, WithoutRootUsesAnUnprivilegedUserNamespace) {
  // stoker-run as an ordinary account (a stokerd that is not root): the
  // child becomes nobody first, then isolates itself.
  pid_t other = -1;
  if (::geteuid() == 0) other = StartOtherJobsTrainer(SpecFor(1));
  const pid_t parent = ::getpid();
  Observations seen = InChild([&](Observations& seen) {
    if (::geteuid() == 0 && !StartAsNobody()) {
      seen["enter"] = "cannot become nobody";
      return;
    }
    Isolation isolation(SpecFor(2), false);
    const char* error = isolation.Enter(-1);
    seen["enter"] = error ? error : "ok";
    if (!error && !DropCapabilities()) seen["enter"] = "capset failed";
    if (!error) Probe(root_, data_, other, parent, seen);
  });
  if (other > 0) {
    ::kill(other, SIGKILL);
    ::waitpid(other, nullptr, 0);
  }
  if (seen["enter"].find("unshare(CLONE_NEWUSER") != std::string::npos) {
    GTEST_SKIP() << "this kernel forbids unprivileged user namespaces: " << seen["enter"];
  }
  ASSERT_EQ(seen["enter"], "ok");
  if (other < 0) seen["other trainer's view"] = "EACCES";  // no stand-in without root
  ExpectIsolated(seen);
}

TEST_F(IsolationTest, ShowsADirectoryAtASecondPathOnlyWhereThatPathExists) {
  // The buckets at a stand-in for /gcs, an override bucket inside it (its
  // mount point is in the buckets' root), and a target that exists nowhere.
  fs::create_directories(root_ / "gcs");
  fs::create_directories(root_ / "datasets");
  fs::create_directories(data_ / "buckets/datasets");
  Write(root_ / "datasets/train.txt", "train");
  IsolationSpec spec = SpecFor(2);
  spec.bind = {{root_ / "datasets", root_ / "gcs/datasets"},
               {data_ / "buckets", root_ / "gcs"},
               {data_ / "buckets", root_ / "no-such-dir"}};
  Isolation planned(spec, false);
  std::vector<std::string> plan = planned.Describe();
  std::string d = fs::canonical(data_).string(), r = fs::canonical(root_).string();
  ASSERT_GE(plan.size(), 2u);
  EXPECT_EQ(plan[plan.size() - 2], "rw " + (root_ / "gcs").string() + " <- " + d + "/buckets");
  EXPECT_EQ(plan.back(), "rw " + (root_ / "gcs/datasets").string() + " <- " + r + "/datasets");
  if (::geteuid() != 0) GTEST_SKIP() << "mounting needs root here";
  Observations seen = InChild([&](Observations& seen) {
    Isolation isolation(spec, false);
    const char* error = isolation.Enter(-1);
    seen["enter"] = error ? error : "ok";
    std::error_code ec;
    seen["bucket"] = fs::is_directory(root_ / "gcs/b", ec) ? "ok" : "missing";
    std::ifstream in(root_ / "gcs/datasets/train.txt");
    std::string text;
    std::getline(in, text);
    seen["override"] = text;
  });
  ASSERT_EQ(seen["enter"], "ok");
  EXPECT_EQ(seen["bucket"], "ok");
  EXPECT_EQ(seen["override"], "train");
  EXPECT_TRUE(fs::is_empty(root_ / "gcs"));  // nothing changed outside the view
}

TEST_F(IsolationTest, HidesAFileOutsideTheHiddenDirectory) {
  IsolationSpec spec = SpecFor(2);
  spec.hide.push_back(root_ / "outside.txt");  // e.g. the TLS key
  Isolation isolation(spec, false);
  Observations seen = InChild([&](Observations& seen) {
    const char* error = isolation.Enter(-1);
    seen["enter"] = error ? error : "ok";
    if (::geteuid() == 0) BecomeNobody();
    seen["read key"] = TryRead(root_ / "outside.txt");
    seen["write key"] = TryWrite(root_ / "outside.txt");
  });
  if (seen["enter"].find("unshare(CLONE_NEWUSER") != std::string::npos) {
    GTEST_SKIP() << seen["enter"];
  }
  ASSERT_EQ(seen["enter"], "ok");
  EXPECT_EQ(seen["read key"], "EACCES");  // /dev/null on a nodev mount
  EXPECT_THAT(seen["write key"], ::testing::AnyOf("EACCES", "EROFS"));
  EXPECT_EQ(ReadFile(root_ / "outside.txt").value(), "visible\n");
}

// A kept read-only path on a file system mounted noatime or strictatime: in
// the trainer's user namespace its atime flags are locked (MNT_LOCK_ATIME),
// so the read-only remount must keep them. The kernel keeps a mount's atime
// flags on a remount that names none (Linux >= 3.17), which is what Mount
// relies on; this test guards it.
TEST_F(IsolationTest, KeepsReadOnlyPathsOnNoatimeAndStrictatimeMounts) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting the noatime tmpfs needs root";
  const unsigned long kAtimes[] = {MS_NOATIME, MS_STRICTATIME, MS_NOATIME | MS_NODIRATIME};
  for (unsigned long atime : kAtimes) {
    Observations seen = InChild([&](Observations& seen) {
      // A private mount namespace of the initial user namespace, as the
      // host's: what the trainer's namespace then copies with locks.
      if (::unshare(CLONE_NEWNS) != 0 ||
          ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount("atime-test", (data_ / "envs").c_str(), "tmpfs", atime, "mode=0755") != 0) {
        seen["setup"] = strerrorname_np(errno);
        return;
      }
      std::error_code ec;
      fs::create_directories(data_ / "envs/bin", ec);
      Write(data_ / "envs/bin/python", "#!/bin/sh\n");
      Isolation isolation(SpecFor(2), false);
      const char* error = isolation.Enter(-1);
      seen["enter"] = error ? error : "ok";
      BecomeNobody();
      seen["read envs"] = TryRead(data_ / "envs/bin/python");
      seen["write envs"] = TryWrite(data_ / "envs/bin/planted");
    });
    SCOPED_TRACE("atime flags " + std::to_string(atime));
    ASSERT_EQ(seen["setup"], "");
    EXPECT_EQ(seen["enter"], "ok");
    EXPECT_EQ(seen["read envs"], "ok");
    EXPECT_EQ(seen["write envs"], "EROFS");
  }
}

// A process with a second thread cannot make namespaces (EINVAL): a stand-in
// for a kernel that refuses them.
void StartAThread() {
  static std::thread* idle = new std::thread([] { ::pause(); });
  (void)idle;
}

// Runs `body` in a child that is stoker-run as nobody, on a kernel that
// refuses it namespaces; returns what it saw and the note it wrote.
std::pair<Observations, std::string> WithoutNamespaces(
    const std::function<void(int note_fd, Observations&)>& body) {
  int note[2];
  EXPECT_EQ(::pipe(note), 0);
  Observations seen = InChild([&](Observations& seen) {
    if (::geteuid() == 0 && !StartAsNobody()) seen["nobody"] = "failed";
    StartAThread();
    body(note[1], seen);
  });
  ::close(note[1]);
  std::string text;
  char buf[2048];
  ssize_t n;
  while ((n = ::read(note[0], buf, sizeof buf)) > 0) text.append(buf, n);
  ::close(note[0]);
  return {seen, text};
}

TEST_F(IsolationTest, AutoRunsUnisolatedAndSaysWhyWhenTheKernelRefuses) {
  auto [seen, note] = WithoutNamespaces([&](int note_fd, Observations& seen) {
    Isolation isolation(SpecFor(2, IsolationMode::kAuto), false);
    const char* error = isolation.Enter(note_fd);
    seen["enter"] = error ? error : "ok";
    seen["read other job"] = TryRead(data_ / "jobs/1/workerpool0-0/output.log");
  });
  EXPECT_EQ(seen["enter"], "ok");
  EXPECT_EQ(seen["read other job"], "ok");  // nothing hidden: the account's own view
  EXPECT_THAT(note, HasSubstr("job_isolation is auto"));
  EXPECT_THAT(note, HasSubstr("unshare(CLONE_NEWUSER | CLONE_NEWNS): Invalid argument"));
  EXPECT_EQ(std::count(note.begin(), note.end(), '\n'), 1) << "one line: " << note;
}

TEST_F(IsolationTest, RequiredRefusesWithAMessageNamingTheKey) {
  auto [seen, note] = WithoutNamespaces([&](int note_fd, Observations& seen) {
    Isolation isolation(SpecFor(2, IsolationMode::kRequired), false);
    const char* error = isolation.Enter(note_fd);
    seen["enter"] = error ? error : "ok";
  });
  EXPECT_THAT(seen["enter"], HasSubstr("job_isolation is required"));
  EXPECT_THAT(seen["enter"], HasSubstr("unshare"));
  EXPECT_THAT(seen["enter"], HasSubstr("unprivileged user namespaces"));
  EXPECT_EQ(note, "");
}

TEST_F(IsolationTest, RootWithoutUserNamespacesStillHidesPathsInAuto) {
  // Root may make a mount namespace where it may not make a user namespace
  // (here: a second thread forbids only the latter).
  if (::geteuid() != 0) GTEST_SKIP() << "the root path needs root";
  int note[2];
  ASSERT_EQ(::pipe(note), 0);
  Isolation auto_mode(SpecFor(2, IsolationMode::kAuto), false);
  Isolation required(SpecFor(2, IsolationMode::kRequired), false);
  Observations seen = InChild([&](Observations& seen) {
    StartAThread();
    const char* error = required.Enter(-1);
    seen["required"] = error ? error : "ok";
    error = auto_mode.Enter(note[1]);
    seen["auto"] = error ? error : "ok";
    BecomeNobody();
    seen["read token"] = TryRead(data_ / "token");
    seen["write own job"] = TryWrite(data_ / "jobs/2/workerpool0-0/work/model.txt");
  });
  ::close(note[1]);
  char buf[2048] = {};
  ASSERT_GT(::read(note[0], buf, sizeof buf - 1), 0);
  ::close(note[0]);
  EXPECT_THAT(seen["required"], HasSubstr("no user namespace"));
  EXPECT_EQ(seen["auto"], "ok");
  EXPECT_EQ(seen["read token"], "ENOENT");
  EXPECT_EQ(seen["write own job"], "ok");
  EXPECT_THAT(std::string(buf), HasSubstr("has no user namespace"));
  EXPECT_THAT(std::string(buf), HasSubstr("setns(CLONE_NEWUSER): Invalid argument"));
}

TEST_F(IsolationTest, RootTrainersAreNotIsolated) {
  Isolation auto_mode(SpecFor(2, IsolationMode::kAuto), /*trainer_is_root=*/true);
  Isolation required(SpecFor(2, IsolationMode::kRequired), /*trainer_is_root=*/true);
  Observations seen = InChild([&](Observations& seen) {
    const char* error = auto_mode.Enter(-1);
    seen["auto"] = error ? error : "ok";
    seen["read token"] = TryRead(data_ / "token");
    error = required.Enter(-1);
    seen["required"] = error ? error : "ok";
  });
  EXPECT_EQ(seen["auto"], "ok");
  EXPECT_EQ(seen["read token"], "ok");
  EXPECT_THAT(seen["required"], HasSubstr("runs as root"));
  EXPECT_THAT(seen["required"], HasSubstr("unix_user"));
}

TEST_F(IsolationTest, OffChangesNothing) {
  Isolation isolation(SpecFor(2, IsolationMode::kOff), false);
  Observations seen = InChild([&](Observations& seen) {
    const char* error = isolation.Enter(-1);
    seen["enter"] = error ? error : "ok";
    seen["read token"] = TryRead(data_ / "token");
  });
  EXPECT_EQ(seen["enter"], "ok");
  EXPECT_EQ(seen["read token"], "ok");
}

TEST_F(IsolationTest, ProbeSaysWhetherIsolationWorksHere) {
  Observations seen = InChild([&](Observations& seen) {
    Status s = ProbeIsolation(data_);
    seen["probe"] = s.ok() ? "ok" : s.message();
  });
  EXPECT_EQ(seen["probe"], "ok");
  Observations threaded = InChild([&](Observations& seen) {
    StartAThread();
    Status s = ProbeIsolation(data_);
    seen["probe"] = s.ok() ? "ok" : s.message();
  });
  EXPECT_THAT(threaded["probe"], HasSubstr("job_isolation is required"));
}

// ---------------------------------------------------------------- stoker-run

#ifdef STOKER_RUN_PATH
TEST_F(IsolationTest, StokerRunIsolatesItsTrainer) {
  fs::path dir = data_ / "jobs/2/workerpool0-0";
  std::string script = "cat " + (data_ / "token").string() + " || echo NO-TOKEN; ls " +
                       data_.string() + " || echo NO-LIST; cat " +
                       (data_ / "jobs/1/workerpool0-0/output.log").string() +
                       " || echo NO-SIBLING; echo model > model.txt && echo WROTE; pwd; " +
                       "echo '{}' > ../status.json || echo NO-CONTROL";
  // The plan stokerd writes: the job's directory read-only, the replica's
  // work/ and hypertune/ writable.
  json launch = {{"argv", {"/bin/sh", "-c", script}},
                 {"env", {{"PATH", "/usr/bin:/bin"}}},
                 {"isolation",
                  {{"mode", "required"},
                   {"hide", {data_.string()}},
                   {"keep_read_only", {(data_ / "jobs/2").string()}},
                   {"keep", {(dir / "work").string(), (dir / "hypertune").string()}}}}};
  if (::geteuid() == 0)
    launch["run_as"] = {{"user", "nobody"}, {"uid", kNobody}, {"gid", kNogroup}};
  Write(dir / "launch.json", launch.dump());
  std::string cmd = std::string(STOKER_RUN_PATH) + " --replica-dir " + dir.string() + " 2>" +
                    (dir / "runner.log").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string log = ReadFile(dir / "output.log").value();
  if (log.find("unshare(CLONE_NEWUSER") != std::string::npos) GTEST_SKIP() << log;
  EXPECT_THAT(log, HasSubstr("NO-TOKEN"));
  EXPECT_THAT(log, HasSubstr("NO-LIST"));
  EXPECT_THAT(log, HasSubstr("NO-SIBLING"));
  EXPECT_THAT(log, HasSubstr("WROTE"));
  EXPECT_THAT(log, HasSubstr((dir / "work").string()));  // the same path inside
  // Even as the daemon's own account (a stokerd that is not root), the
  // trainer cannot write the supervisor's files beside its work dir.
  EXPECT_THAT(log, HasSubstr("NO-CONTROL"));
  EXPECT_EQ(ReadFile(dir / "work/model.txt").value(), "model\n");
  auto status = json::parse(ReadFile(dir / "status.json").value());
  EXPECT_EQ(status["exit_code"], 0) << status.dump();
}

TEST_F(IsolationTest, StokerRunFailsARequiredIsolationItCannotGive) {
  // A trainer that would run as root cannot be isolated: with "required"
  // it does not start, and its log says which key to change.
  fs::path dir = data_ / "jobs/2/workerpool0-0";
  json launch = {{"argv", {"/bin/echo", "RAN"}},
                 {"isolation", {{"mode", "required"}, {"hide", {data_.string()}}}}};
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start a root trainer";
  launch["run_as"] = {{"user", "root"}, {"uid", 0}, {"gid", 0}};
  Write(dir / "launch.json", launch.dump());
  std::string cmd = std::string(STOKER_RUN_PATH) + " --replica-dir " + dir.string() + " 2>" +
                    (dir / "runner.log").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string log = ReadFile(dir / "output.log").value();
  EXPECT_THAT(log, Not(HasSubstr("RAN")));
  EXPECT_THAT(log, HasSubstr("job_isolation is required"));
  auto status = json::parse(ReadFile(dir / "status.json").value());
  EXPECT_EQ(status["exit_code"], 127) << status.dump();
}

TEST_F(IsolationTest, StokerRunNotesInRunnerLogWhenAutoCannotIsolate) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start a root trainer";
  fs::path dir = data_ / "jobs/2/workerpool0-0";
  json launch = {{"argv", {"/bin/echo", "RAN"}},
                 {"run_as", {{"user", "root"}, {"uid", 0}, {"gid", 0}}},
                 {"isolation", {{"mode", "auto"}, {"hide", {data_.string()}}}}};
  Write(dir / "launch.json", launch.dump());
  std::string cmd = std::string(STOKER_RUN_PATH) + " --replica-dir " + dir.string() + " 2>" +
                    (dir / "runner.log").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_THAT(ReadFile(dir / "output.log").value(), HasSubstr("RAN"));
  EXPECT_THAT(ReadFile(dir / "runner.log").value(), HasSubstr("job_isolation is auto"));
}
#endif

}  // namespace
}  // namespace stoker::runner
