// Unit tests for the launch/status formats, and tests of the real stoker-run
// binary driving real trainer processes in temp dirs.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "replica/launch.h"
#include "replica/replica_cgroup.h"
#include "replica/replica_processes.h"
#include "runner/in_child_for_test.h"
#include "runner/log_rotation.h"
#include "runner/supervisor.h"

extern char** environ;

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// Whether stoker-run makes replica cgroups here (root, a hierarchy).
bool ReplicaCgroupsHere() {
  return ::geteuid() == 0 && DetectCgroupLayout().kind != CgroupLayout::Kind::kNone;
}
using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// ---------------------------------------------------------------- pure parts

TEST(ParseLaunchSpecTest, ReadsAllFields) {
  auto spec = ParseLaunchSpec(R"({"argv": ["python3", "-m", "trainer.task"],
    "env": {"A": "1", "PATH": "/bin"}, "packages": ["/p/a.tar.gz"],
    "timeout_seconds": 3600, "grace_seconds": 2.5, "future_field": true})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT(spec->argv, ElementsAre("python3", "-m", "trainer.task"));
  EXPECT_EQ(spec->env.at("A"), "1");
  EXPECT_EQ(spec->env.at("PATH"), "/bin");
  EXPECT_THAT(spec->packages, ElementsAre(fs::path("/p/a.tar.gz")));
  EXPECT_EQ(spec->timeout_seconds, 3600);
  EXPECT_EQ(spec->grace_seconds, 2.5);
}

TEST(ParseLaunchSpecTest, DefaultsToNoTimeoutAndTenSecondGrace) {
  auto spec = ParseLaunchSpec(R"({"argv": ["true"]})");
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->env.empty());
  EXPECT_TRUE(spec->packages.empty());
  EXPECT_EQ(spec->timeout_seconds, 0);
  EXPECT_EQ(spec->grace_seconds, 10);
}

TEST(ParseLaunchSpecTest, NamesTheBadField) {
  struct Case {
    const char* json;
    const char* field;
  } cases[] = {
      {"not json", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {R"({})", "argv"},
      {R"({"argv": []})", "argv"},
      {R"({"argv": ["a", 1]})", "argv[1]"},
      {R"({"argv": [""]})", "argv[0]"},
      {R"({"argv": ["a\u0000b"]})", "argv[0]"},
      {R"({"argv": ["a"], "env": {"A": 1}})", "env.A"},
      {R"({"argv": ["a"], "env": {"A=B": "x"}})", "env.A=B"},
      {R"({"argv": ["a"], "env": []})", "env"},
      {R"({"argv": ["a"], "packages": ["rel/p.tar.gz"]})", "packages[0]"},
      {R"({"argv": ["a"], "timeout_seconds": "1h"})", "timeout_seconds"},
      {R"({"argv": ["a"], "grace_seconds": -1})", "grace_seconds"},
      {R"({"argv": ["a"], "isolation": {"mode": 3}})", "isolation.mode"},
      {R"({"argv": ["a"], "isolation": {"mode": false}})", "isolation.mode"},
  };
  for (const auto& c : cases) {
    auto spec = ParseLaunchSpec(c.json);
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr(c.field)) << c.json;
  }
}

TEST(BuildTrainerEnvTest, UsesExactlyTheGivenEnvironment) {
  EXPECT_THAT(BuildTrainerEnv({{"B", "2"}, {"A", "1"}}, {}), ElementsAre("A=1", "B=2"));
}

TEST(BuildTrainerEnvTest, PutsPackageRootsBeforeTheGivenPythonPath) {
  EXPECT_THAT(BuildTrainerEnv({{"PYTHONPATH", "/mine"}}, {"/r/p0/a-1.0", "/r/p1/b-2.0"}),
              ElementsAre("PYTHONPATH=/r/p0/a-1.0:/r/p1/b-2.0:/mine"));
  EXPECT_THAT(BuildTrainerEnv({{"X", "y"}}, {"/r/p0/a-1.0"}),
              ElementsAre("PYTHONPATH=/r/p0/a-1.0", "X=y"));
  EXPECT_THAT(BuildTrainerEnv({{"PYTHONPATH", ""}}, {"/r"}), ElementsAre("PYTHONPATH=/r"));
}

TEST(ContainerRunArgvTest, RunsTheImageWithTheAccountMountsAndGpus) {
  ContainerSpec c{"/usr/bin/podman",
                  "gcr.io/p/t:v1",
                  "stoker-7-0-workerpool0-0",
                  std::vector<std::string>{"python3", "-m", "t"},
                  {"--lr", "0.1"},
                  {"/data/buckets"},
                  {"/data/jobs/7"}};
  c.binds = {{"/data/buckets", "/gcs"}, {"/srv/sets", "/gcs/sets"}};
  ContainerRun run;
  run.container = &c;
  run.run_as = RunAs{"alice", 1001, 1002, {50}, ""};
  run.env_file = "/data/jobs/7/workerpool0-0/container.env";
  run.env_inline = {"NOTE=a\nb"};
  run.ulimits = {"--ulimit=nofile=1024:20000"};
  run.gpus = {2, 3};
  run.gpu_passing = GpuPassing::kCdi;
  EXPECT_THAT(
      ContainerRunArgv(run),
      ElementsAre(
          "/usr/bin/podman", "run", "--rm", "--name", "stoker-7-0-workerpool0-0", "--network=host",
          "--pull=never", "--log-driver=passthrough", "--ulimit=nofile=1024:20000",
          "--env-file=/data/jobs/7/workerpool0-0/container.env", "--env", "NOTE=a\nb",
          "--user=1001:1002", "--group-add=50", "--cap-drop=all",
          "--security-opt=no-new-privileges", "--volume=/data/buckets:/data/buckets",
          "--volume=/data/jobs/7:/data/jobs/7:ro", "--volume=/data/buckets:/gcs",
          "--volume=/srv/sets:/gcs/sets", "--device=nvidia.com/gpu=2", "--device=nvidia.com/gpu=3",
          R"(--entrypoint=["python3","-m","t"])", "--", "gcr.io/p/t:v1", "--lr", "0.1"));
}

TEST(ContainerRunArgvTest, InAUserNamespaceTheImagesRootIsTheAccountAndNothingElseIsMapped) {
  ContainerSpec c{"/usr/bin/podman", "gcr.io/p/t:v1", "n", std::nullopt, {}, {}, {}};
  ContainerRun run;
  run.container = &c;
  run.run_as = RunAs{"alice", 1001, 1002, {50}, ""};
  run.user_namespace = true;
  EXPECT_THAT(ContainerRunArgv(run),
              ElementsAre("/usr/bin/podman", "run", "--rm", "--name", "n", "--network=host",
                          "--pull=never", "--log-driver=passthrough", "--uidmap=0:1001:1",
                          "--gidmap=0:1002:1", "--user=0:0", "--cap-drop=all",
                          "--security-opt=no-new-privileges", "--", "gcr.io/p/t:v1"));
  EXPECT_THAT(ContainerRunArgv(run), Not(Contains("--group-add=50")));  // cannot be held
  // Without an account (a root daemon's root trainers) there is no map.
  run.run_as.reset();
  EXPECT_THAT(ContainerRunArgv(run), Not(Contains(HasSubstr("--uidmap"))));
}

TEST(ContainerRunArgvTest, WithoutAnEntrypointTheImagesOwnRunsAndDockerGetsGpusItsWay) {
  ContainerSpec c{"/usr/bin/docker", "t:1", "n", std::nullopt, {}, {}, {}};
  ContainerRun run;
  run.container = &c;
  run.env_file = "/e";
  run.gpus = {0};
  run.gpu_passing = GpuPassing::kDockerGpus;
  EXPECT_THAT(ContainerRunArgv(run),
              ElementsAre("/usr/bin/docker", "run", "--rm", "--name", "n", "--network=host",
                          "--pull=never", "--env-file=/e", R"(--gpus="device=0")", "--", "t:1"));
}

TEST(ContainerPullArgvTest, PodmanSkipsTlsOnlyForAnInsecureRegistryDockerNever) {
  ContainerSpec c{"/usr/bin/podman", "localhost:5000/t:1", "n", std::nullopt, {}, {}, {}};
  EXPECT_THAT(ContainerPullArgv(c),
              ElementsAre("/usr/bin/podman", "pull", "--", "localhost:5000/t:1"));
  c.tls_verify = false;
  EXPECT_THAT(ContainerPullArgv(c), ElementsAre("/usr/bin/podman", "pull", "--tls-verify=false",
                                                "--", "localhost:5000/t:1"));
  c.engine = "/usr/bin/docker";  // its daemon's config decides
  EXPECT_THAT(ContainerPullArgv(c),
              ElementsAre("/usr/bin/docker", "pull", "--", "localhost:5000/t:1"));
}

TEST(EngineOnThisNodeTest, TheDaemonsChoiceThenTheSameEngineThenTheOther) {
  auto only = [](std::set<std::string> present) {
    return [present](const std::string& p) { return present.count(p) > 0; };
  };
  EXPECT_EQ(EngineOnThisNode("/opt/p/podman", only({"/opt/p/podman", "/usr/bin/podman"})),
            "/opt/p/podman");
  EXPECT_EQ(EngineOnThisNode("/opt/p/podman", only({"/usr/bin/docker", "/usr/bin/podman"})),
            "/usr/bin/podman");
  EXPECT_EQ(EngineOnThisNode("/usr/bin/podman", only({"/usr/local/bin/docker"})),
            "/usr/local/bin/docker");
  EXPECT_EQ(EngineOnThisNode("/usr/bin/docker", only({"/bin/podman"})), "/bin/podman");
  EXPECT_EQ(EngineOnThisNode("/usr/bin/podman", only({})), "");
}

TEST(ContainerRunArgvTest, WithPullsOnAnImageGoneFromTheStoreIsPulledByTheEngine) {
  ContainerSpec c{"/usr/bin/podman", "localhost:5000/t:1", "n", std::nullopt, {}, {}, {}};
  c.pull_if_missing = true;
  c.tls_verify = false;
  ContainerRun run;
  run.container = &c;
  EXPECT_THAT(ContainerRunArgv(run),
              ElementsAre("/usr/bin/podman", "run", "--rm", "--name", "n", "--network=host",
                          "--pull=missing", "--tls-verify=false", "--log-driver=passthrough", "--",
                          "localhost:5000/t:1"));
}

TEST(ContainerRunArgvTest, NoEnvFileMeansNoFlag) {
  ContainerSpec c{"/usr/bin/podman", "t:1", "n", std::nullopt, {}, {}, {}};
  ContainerRun run;
  run.container = &c;
  run.env_inline = {"A=b"};
  EXPECT_THAT(ContainerRunArgv(run),
              ElementsAre("/usr/bin/podman", "run", "--rm", "--name", "n", "--network=host",
                          "--pull=never", "--log-driver=passthrough", "--env", "A=b", "--", "t:1"));
}

TEST(ContainerEnvFileTest, PutsValuesWithNewlinesInline) {
  std::vector<std::string> inline_pairs;
  EXPECT_EQ(ContainerEnvFile({{"B", " spaced "}, {"A", "x=y"}, {"C", "two\nlines"}}, &inline_pairs),
            "A=x=y\nB= spaced \n");
  EXPECT_THAT(inline_pairs, ElementsAre("C=two\nlines"));
}

TEST(ExecCandidatesTest, SearchesPathOnlyForBareNames) {
  EXPECT_THAT(ExecCandidates("./run.sh", "/usr/bin"), ElementsAre("./run.sh"));
  EXPECT_THAT(ExecCandidates("/bin/sh", "/usr/bin"), ElementsAre("/bin/sh"));
  EXPECT_THAT(ExecCandidates("python3", "/venv/bin::/usr/bin"),
              ElementsAre("/venv/bin/python3", "./python3", "/usr/bin/python3"));
  EXPECT_THAT(ExecCandidates("sh", ""), ElementsAre("/usr/local/bin/sh", "/usr/bin/sh", "/bin/sh"));
}

TEST(DescribeOutcomeTest, SaysHowTheTrainerEnded) {
  Outcome o;
  o.state = EndState::kExited;
  o.exit_code = 3;
  EXPECT_EQ(DescribeOutcome(o), "exited with code 3");
  o = {};
  o.state = EndState::kSignaled;
  o.signal = 9;
  EXPECT_EQ(DescribeOutcome(o), "killed by signal 9 (SIGKILL)");
  o = {};
  o.state = EndState::kTimeout;
  o.stop_signal = SIGTERM;
  o.timeout_seconds = 5;
  EXPECT_EQ(DescribeOutcome(o), "timed out after 5s; stopped with SIGTERM");
  o.state = EndState::kCancelled;
  o.stop_signal = SIGKILL;
  o.grace_seconds = 10;
  EXPECT_EQ(DescribeOutcome(o), "cancelled; stopped with SIGKILL after 10s grace");
  o.stop_signal = 0;
  EXPECT_EQ(DescribeOutcome(o), "cancelled before the trainer started");
  o = {};
  o.state = EndState::kLaunchFailed;
  o.message = "launch.json: argv: must be a non-empty array of strings";
  EXPECT_EQ(DescribeOutcome(o),
            "launch failed: launch.json: argv: must be a non-empty array of strings");
  EXPECT_EQ(SignalName(15), "SIGTERM");
}

TEST(FormatStatusJsonTest, WritesNullForMissingCodeAndSignal) {
  Outcome o;
  o.state = EndState::kExited;
  o.exit_code = 0;
  o.start_time_us = 10;
  o.end_time_us = 20;
  json doc = json::parse(FormatStatusJson(o));
  EXPECT_EQ(doc["state"], "exited");
  EXPECT_EQ(doc["exit_code"], 0);
  EXPECT_TRUE(doc["signal"].is_null());
  EXPECT_EQ(doc["start_time_us"], 10);
  EXPECT_EQ(doc["end_time_us"], 20);
  EXPECT_EQ(doc["message"], "exited with code 0");
}

// ------------------------------------------------------- the real binary

using Clock = std::chrono::steady_clock;

// The stoker-run binary built with this test (CMake passes its path).
std::string StokerRun() { return STOKER_RUN_PATH; }

// Polls `pred` (every few ms) until it holds or `seconds` pass.
bool WaitFor(const std::function<bool()>& pred, double seconds = 20) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string Slurp(const fs::path& p) {
  auto r = ReadFile(p);
  return r.ok() ? *r : "";
}

// True while `pid` exists and is not a zombie.
bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren == std::string::npos || stat.substr(paren + 2, 1) != "Z";
}

// Every live process whose process group is `pgid`.
std::vector<pid_t> GroupMembers(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = Slurp(e.path() / "stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream in(stat.substr(paren + 2));
    char state;
    long ppid, pg;
    if ((in >> state >> ppid >> pg) && pg == pgid && state != 'Z') out.push_back(std::stoi(name));
  }
  return out;
}

class StokerRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_runner_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
  }
  void TearDown() override {
    // Never leave a supervisor or trainer behind, even when a test failed:
    // cancel what is still running and let it clean up.
    for (pid_t pid : unwaited_) {
      ::kill(pid, SIGTERM);
      if (!WaitFor([pid] { return ::waitpid(pid, nullptr, WNOHANG) != 0; })) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    json runner = ReadJson("runner.json");
    if (runner.contains("pid") && !fs::exists(dir_ / "status.json")) {
      ::kill(runner["pid"].get<pid_t>(), SIGTERM);  // a detached supervisor
      WaitForFile("status.json");
    }
    fs::remove_all(dir_);
  }

  json ReadJson(const std::string& name) {
    std::string text = Slurp(dir_ / name);
    if (text.empty()) return json::object();
    return json::parse(text, nullptr, false);
  }

  void WriteLaunch(json launch) {
    if (!launch.contains("env")) launch["env"] = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
    ASSERT_TRUE(WriteFileAtomic(dir_ / "launch.json", launch.dump()).ok());
  }

  // Starts stoker-run with `args` and returns its pid.
  pid_t Spawn(std::vector<std::string> args) {
    args.insert(args.begin(), StokerRun());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    EXPECT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    unwaited_.push_back(pid);
    return pid;
  }
  pid_t SpawnSupervisor() { return Spawn({"--replica-dir", dir_.string()}); }

  // Starts `argv` (argv[0] an absolute path or in /bin) with exactly `env`
  // in dir_; returns its pid. The caller reaps it.
  pid_t SpawnWithEnv(std::vector<std::string> argv, std::vector<std::string> env) {
    if (argv[0].find('/') == std::string::npos) argv[0] = "/bin/" + argv[0];
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    pid_t pid = -1;
    EXPECT_EQ(::posix_spawn(&pid, a[0], nullptr, nullptr, a.data(), e.data()), 0);
    return pid;
  }

  // Exit code of `pid`, -1 if it did not exit normally.
  int Wait(pid_t pid) {
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    std::erase(unwaited_, pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Runs a foreground supervisor to the end; returns status.json.
  json RunToEnd() {
    EXPECT_EQ(Wait(SpawnSupervisor()), 0);
    return ReadJson("status.json");
  }

  bool WaitForFile(const std::string& name) {
    return WaitFor([&] { return fs::exists(dir_ / name); });
  }

  fs::path dir_;
  std::vector<pid_t> unwaited_;  // spawned stoker-run processes not yet reaped
};

TEST_F(StokerRunTest, RecordsTheExitCodeAndBothOutputStreams) {
  WriteLaunch({{"argv", {"sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"}}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "exited");
  EXPECT_EQ(status["exit_code"], 3);
  EXPECT_TRUE(status["signal"].is_null());
  EXPECT_EQ(status["message"], "exited with code 3");
  EXPECT_GT(status["end_time_us"].get<int64_t>(), 0);
  EXPECT_GE(status["end_time_us"].get<int64_t>(), status["start_time_us"].get<int64_t>());
  EXPECT_EQ(Slurp(dir_ / "output.log"), "to-stdout\nto-stderr\n");

  json trainer = ReadJson("trainer.json");
  EXPECT_EQ(trainer["pid"], trainer["pgid"]);
  EXPECT_EQ(trainer["start_time_us"], status["start_time_us"]);
  EXPECT_TRUE(ReadJson("runner.json").contains("pid"));
  EXPECT_TRUE(fs::exists(dir_ / "claim"));
}

TEST_F(StokerRunTest, RecordsExitCodeZero) {
  WriteLaunch({{"argv", {"true"}}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "exited");
  EXPECT_EQ(status["exit_code"], 0);
}

TEST_F(StokerRunTest, RecordsAKillingSignal) {
  WriteLaunch({{"argv", {"sh", "-c", "kill -9 $$"}}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "signaled");
  EXPECT_TRUE(status["exit_code"].is_null());
  EXPECT_EQ(status["signal"], 9);
  EXPECT_EQ(status["message"], "killed by signal 9 (SIGKILL)");
}

TEST_F(StokerRunTest, GivesTheTrainerExactlyTheGivenEnvironmentInItsWorkDir) {
  // Plus the replica's cookie, over any value launch.json gives it.
  WriteLaunch({{"argv", {"env"}},
               {"env", {{"PATH", "/usr/bin:/bin"}, {"ZED", "a b=c"}, {"STOKER_REPLICA", "mine"}}}});
  RunToEnd();
  EXPECT_EQ(Slurp(dir_ / "output.log"),
            "PATH=/usr/bin:/bin\nSTOKER_REPLICA=" + dir_.string() + "\nZED=a b=c\n");

  fs::remove(dir_ / "claim");
  fs::remove(dir_ / "output.log");
  WriteLaunch({{"argv", {"pwd", "-P"}}});
  RunToEnd();
  EXPECT_EQ(Slurp(dir_ / "output.log"), (dir_ / "work").string() + "\n");
}

// The daemon believes what the supervisor writes in DIR only because no
// other account may write there: a DIR that others may write is refused
// before launch.json is read or the trainer starts.
TEST_F(StokerRunTest, RefusesAReplicaDirThatOthersMayWrite) {
  WriteLaunch({{"argv", {"sh", "-c", "echo RAN > ran"}}});
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "launch_failed");
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("that no other account may write"));
  EXPECT_FALSE(fs::exists(dir_ / "work"));
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
  // A launch.json that another account could have written is not believed.
  fs::remove(dir_ / "claim");
  fs::remove(dir_ / "status.json");
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir_ / "launch.json").c_str(), 0666), 0);
  status = RunToEnd();
  EXPECT_EQ(status["state"], "launch_failed");
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("not believed"));
}

TEST_F(StokerRunTest, NeverRunsTheTrainerTwiceForOneReplica) {
  WriteLaunch({{"argv", {"sh", "-c", "echo ran >> runs.txt"}}});
  json first = RunToEnd();
  EXPECT_EQ(first["state"], "exited");
  EXPECT_EQ(Wait(SpawnSupervisor()), 0);
  EXPECT_EQ(ReadJson("status.json"), first);
  EXPECT_EQ(Slurp(dir_ / "work/runs.txt"), "ran\n");
}

TEST_F(StokerRunTest, ConcurrentSupervisorsStartOneTrainer) {
  WriteLaunch({{"argv", {"sh", "-c", "echo ran >> runs.txt"}}});
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i) pids.push_back(SpawnSupervisor());
  for (pid_t p : pids) EXPECT_EQ(Wait(p), 0);
  EXPECT_EQ(ReadJson("status.json")["state"], "exited");
  EXPECT_EQ(Slurp(dir_ / "work/runs.txt"), "ran\n");
}

TEST_F(StokerRunTest, HoldsTheLockWhileAlive) {
  WriteLaunch({{"argv", {"sleep", "1000"}}});
  pid_t sup = SpawnSupervisor();
  ASSERT_TRUE(WaitForFile("trainer.json"));
  int fd = ::open((dir_ / "runner.lock").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_SH | LOCK_NB), 0);  // the daemon's liveness test
  ::kill(sup, SIGTERM);
  EXPECT_EQ(Wait(sup), 0);
  EXPECT_EQ(::flock(fd, LOCK_SH | LOCK_NB), 0);
  ::close(fd);
}

TEST_F(StokerRunTest, DetachReturnsAtOnceAndTheSupervisorOwnsItsSession) {
  WriteLaunch({{"argv", {"sleep", "1000"}}});
  auto t0 = Clock::now();
  EXPECT_EQ(Wait(Spawn({"--detach", "--replica-dir", dir_.string()})), 0);
  auto took = Clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  EXPECT_FALSE(fs::exists(dir_ / "status.json"));

  ASSERT_TRUE(WaitForFile("trainer.json"));
  ASSERT_TRUE(WaitForFile("runner.json"));
  pid_t sup = ReadJson("runner.json")["pid"];
  pid_t trainer = ReadJson("trainer.json")["pid"];
  EXPECT_TRUE(Alive(trainer));
  // Double fork: in a new session (led by the vanished middle process), not
  // in ours, and not our child.
  EXPECT_NE(::getsid(sup), ::getsid(0));
  EXPECT_NE(::getsid(sup), sup);
  EXPECT_EQ(::waitpid(sup, nullptr, WNOHANG), -1);

  ::kill(sup, SIGTERM);
  ASSERT_TRUE(WaitForFile("status.json"));
  EXPECT_EQ(ReadJson("status.json")["state"], "cancelled");
  EXPECT_FALSE(Alive(trainer));
  EXPECT_TRUE(fs::exists(dir_ / "runner.log"));
}

TEST_F(StokerRunTest, CancelStopsTheWholeProcessGroup) {
  WriteLaunch({{"argv", {"sh", "-c", "sleep 1000 & sleep 1000 & touch ready; wait"}}});
  pid_t sup = SpawnSupervisor();
  // The trainer may run before trainer.json is written: wait for both.
  ASSERT_TRUE(WaitForFile("work/ready"));
  ASSERT_TRUE(WaitForFile("trainer.json"));
  pid_t pgid = ReadJson("trainer.json")["pgid"];
  // sh and its two sleeps (touch may still be on its way out).
  EXPECT_TRUE(WaitFor([&] { return GroupMembers(pgid).size() == 3; }));
  ::kill(sup, SIGTERM);
  EXPECT_EQ(Wait(sup), 0);
  json status = ReadJson("status.json");
  EXPECT_EQ(status["state"], "cancelled");
  EXPECT_EQ(status["signal"], SIGTERM);
  EXPECT_EQ(status["message"], "cancelled; stopped with SIGTERM");
  EXPECT_TRUE(GroupMembers(pgid).empty());
  EXPECT_EQ(::kill(-pgid, 0), -1);
}

TEST_F(StokerRunTest, StopsTheTrainerWhenItsReplicaDirectoryIsDeleted) {
  WriteLaunch({{"argv", {"sh", "-c", "sleep 1000 & touch ready; wait"}}});
  pid_t sup = SpawnSupervisor();
  ASSERT_TRUE(WaitForFile("work/ready"));
  ASSERT_TRUE(WaitForFile("trainer.json"));
  pid_t pgid = ReadJson("trainer.json")["pgid"];
  // The supervisor may still be writing its files (its state, the log) while
  // we delete: a file made between listing and rmdir leaves the directory
  // "not empty", so delete until it is gone.
  std::error_code ec;
  for (int i = 0; i < 500 && fs::exists(dir_); ++i) fs::remove_all(dir_, ec);
  ASSERT_FALSE(fs::exists(dir_)) << ec.message();
  // Nobody could see or cancel the replica any more: it stops on its own,
  // and with no directory to report to, says so in its exit code.
  EXPECT_EQ(Wait(sup), 1);
  EXPECT_TRUE(GroupMembers(pgid).empty());
}

TEST_F(StokerRunTest, KillsATrainerThatIgnoresSigtermAfterTheGrace) {
  WriteLaunch(
      {{"argv", {"sh", "-c", "trap '' TERM; touch ready; exec sleep 1000"}}, {"grace_seconds", 1}});
  pid_t sup = SpawnSupervisor();
  ASSERT_TRUE(WaitForFile("work/ready"));
  auto t0 = Clock::now();
  ::kill(sup, SIGTERM);
  EXPECT_EQ(Wait(sup), 0);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(950));
  json status = ReadJson("status.json");
  EXPECT_EQ(status["state"], "cancelled");
  EXPECT_EQ(status["signal"], SIGKILL);
  EXPECT_EQ(status["message"], "cancelled; stopped with SIGKILL after 1s grace");
}

TEST_F(StokerRunTest, LeavesNoDescendantBehindEvenInItsOwnSession) {
  // The grandchild leaves the trainer's group and session, and the trainer
  // exits at once, orphaning it.
  WriteLaunch({{"argv",
                {"sh", "-c",
                 "setsid sh -c 'echo $$ > gc.tmp; mv gc.tmp gc.pid; exec sleep 1000' & "
                 "while [ ! -f gc.pid ]; do sleep 0.01; done"}}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "exited");
  EXPECT_EQ(status["exit_code"], 0);
  pid_t gc = std::stoi(Slurp(dir_ / "work/gc.pid"));
  EXPECT_FALSE(Alive(gc));
}

// A process that left the replica's tree altogether (here: started by
// someone else, as a service manager would, with the trainer's environment)
// is found by its cookie and stopped before status.json is written.
TEST_F(StokerRunTest, StopsProcessesOutsideItsTreeThatCarryTheCookie) {
  pid_t outside = SpawnWithEnv({"sleep", "1000"}, {"STOKER_REPLICA=" + dir_.string()});
  pid_t other = SpawnWithEnv({"sleep", "1000"}, {"STOKER_REPLICA=" + dir_.string() + "-other"});
  ASSERT_TRUE(WaitFor([&] { return FindReplicaProcesses(dir_.string()).size() == 1; }));
  WriteLaunch({{"argv", {"true"}}});
  EXPECT_EQ(RunToEnd()["exit_code"], 0);
  if (ReplicaCgroupsHere()) {
    // With a cgroup the replica's processes are its members (decision
    // 0034): a process it did not start is left alone, whatever its
    // environment says (anyone can set the variable).
    EXPECT_TRUE(Alive(outside));
  } else {
    EXPECT_FALSE(Alive(outside));
  }
  EXPECT_TRUE(Alive(other));  // another replica's cookie, a prefix of ours: not ours
  for (pid_t p : {outside, other}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
}

// The gap the cookie closes: a supervisor killed with SIGKILL takes its
// trainer along (PR_SET_PDEATHSIG) but not a grandchild that called
// setsid(); whoever cleans up after it (stokerd) finds it by its cookie.
TEST_F(StokerRunTest, AGrandchildThatEscapedAKilledSupervisorIsFoundByItsCookie) {
  WriteLaunch({{"argv",
                {"sh", "-c",
                 "setsid sh -c 'echo $$ > gc.tmp; mv gc.tmp gc.pid; exec sleep 1000' & "
                 "exec sleep 1000"}}});
  pid_t sup = SpawnSupervisor();
  ASSERT_TRUE(WaitForFile("work/gc.pid"));
  ASSERT_TRUE(WaitForFile("trainer.json"));
  pid_t trainer = ReadJson("trainer.json")["pid"];
  pid_t gc = std::stoi(Slurp(dir_ / "work/gc.pid"));
  ::kill(sup, SIGKILL);
  EXPECT_EQ(Wait(sup), -1);
  EXPECT_TRUE(WaitFor([&] { return !Alive(trainer); }));
  EXPECT_TRUE(Alive(gc)) << "the grandchild should have outlived its supervisor";
  if (auto cg = ReplicaCgroup::Open(DetectCgroupLayout(), ReplicaCgroupName(ReplicaCookie(dir_)))) {
    // What stokerd does first (exec/replica_files.cc): the replica's cgroup.
    EXPECT_EQ(cg->Pids(), std::vector<pid_t>{gc});
    EXPECT_EQ(cg->KillAll(5000), 1);
    EXPECT_FALSE(Alive(gc));
    EXPECT_TRUE(cg->Remove().ok());
    fs::remove(dir_ / "runner.json");
    return;
  }
  EXPECT_EQ(FindReplicaProcesses(ReplicaCookie(dir_)), std::vector<pid_t>{gc});
  EXPECT_EQ(KillReplicaProcesses(ReplicaCookie(dir_), 5000), 1);
  EXPECT_FALSE(Alive(gc));
  EXPECT_TRUE(FindReplicaProcesses(ReplicaCookie(dir_)).empty());
  EXPECT_EQ(KillReplicaProcesses(ReplicaCookie(dir_), 5000), 0);
  fs::remove(dir_ / "runner.json");  // no supervisor left for TearDown to stop
}

// RunSupervisor in a forked child (it blocks signals and becomes a
// subreaper); returns its exit code.
int RunSupervisorInChild(const fs::path& dir, const SupervisorHooks& hooks) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(RunSupervisor(dir, hooks));
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// stoker-run --slurm: a stop while the tasks exchange ports ends the replica
// as cancelled, and no trainer starts.
TEST_F(StokerRunTest, ACancelledEnvRewriteEndsTheReplicaCancelledWithoutATrainer) {
  WriteLaunch({{"argv", {"sh", "-c", "echo started > started.txt"}}});
  SupervisorHooks hooks;
  hooks.rewrite = [](LaunchSpec&) -> Status {
    return Status(Code::kCancelled, "stopped while waiting for the ports of the other tasks");
  };
  hooks.before_fork = [this] { (void)WriteFileAtomic(dir_ / "forked", ""); };
  EXPECT_EQ(RunSupervisorInChild(dir_, hooks), 0);
  json status = ReadJson("status.json");
  EXPECT_EQ(status["state"], "cancelled") << status.dump();
  EXPECT_FALSE(fs::exists(dir_ / "work/started.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "forked"));
}

// The port the rewrite reserved is let go of right before the fork, after
// everything slow (packages), not when the rewrite returns.
TEST_F(StokerRunTest, ReleasesWhatTheRewriteHeldRightBeforeTheTrainerStarts) {
  WriteLaunch({{"argv", {"sh", "-c", "cat ../order.txt; echo \"trainer X=$X\""}}});
  SupervisorHooks hooks;
  hooks.rewrite = [this](LaunchSpec& spec) -> Status {
    (void)AppendLine(dir_ / "order.txt", "rewrite");
    spec.env["X"] = "1";
    return OkStatus();
  };
  // (Hooks run in the child: they report through the file, not EXPECTs.)
  hooks.before_fork = [this] {
    bool log_open = fs::exists(dir_ / "output.log");
    (void)AppendLine(dir_ / "order.txt", log_open ? "before_fork" : "before_fork, no log yet");
  };
  EXPECT_EQ(RunSupervisorInChild(dir_, hooks), 0);
  EXPECT_EQ(ReadJson("status.json")["exit_code"], 0);
  EXPECT_EQ(Slurp(dir_ / "output.log"), "rewrite\nbefore_fork\ntrainer X=1\n");
}

// More processes than the sweep has file descriptors for (a trainer that
// forked a thousand workers, RLIMIT_NOFILE 1024): EMFILE is neither "gone"
// nor "none left". Every process carrying the cookie dies, and the count
// says so.
TEST(ProcessSweepTest, KillsEveryProcessEvenWhenOutOfFileDescriptors) {
  const std::string cookie = "/nonexistent/stoker-sweep-" + std::to_string(::getpid());
  constexpr int kProcesses = 48;
  ChildReport report = RunInChild([&]() -> std::string {
    std::string var = "STOKER_REPLICA=" + cookie;
    char* argv[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("1000"), nullptr};
    char* envp[] = {var.data(), nullptr};
    for (int i = 0; i < kProcesses; ++i) {
      pid_t pid;
      if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, envp) != 0) ::_exit(2);
    }
    // Each has exec'd (and so carries the cookie) once the scan lists it.
    for (int i = 0; i < 5000 && FindReplicaProcesses(cookie).size() < kProcesses; ++i) {
      ::usleep(1000);
    }
    int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::close(lowest_free);
    rlimit lim;
    ::getrlimit(RLIMIT_NOFILE, &lim);
    const rlim_t hard = lim.rlim_max;
    lim.rlim_cur = static_cast<rlim_t>(lowest_free + 12);
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(4);
    // No descriptor at all: the pass can neither list /proc nor open a
    // pidfd, and must say that its 0 proves nothing.
    std::vector<int> fillers;
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
    ProcessSweep blind(cookie);
    int blind_signalled = blind.KillPass();
    bool blind_complete = blind.complete();
    for (int fd : fillers) ::close(fd);
    // Room for a few pidfds only; the rest of the victims wait their turn.
    int killed = KillReplicaProcesses(cookie, 20000);
    lim.rlim_cur = hard;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    return std::to_string(blind_signalled) + " " + std::to_string(blind_complete) + " " +
           std::to_string(killed) + " " + std::to_string(FindReplicaProcesses(cookie).size());
  });
  int status = report.status;
  const std::string& got = report.text;
  int left_after = static_cast<int>(FindReplicaProcesses(cookie).size());
  KillReplicaProcesses(cookie, 5000);  // whatever a failure left behind
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(got, "0 0 " + std::to_string(kProcesses) + " 0")
      << "signalled without descriptors, complete, killed, left";
  EXPECT_EQ(left_after, 0);
}

TEST(ReplicaCookieTest, IsTheNormalisedAbsolutePath) {
  fs::path tmp = fs::canonical(fs::temp_directory_path());
  EXPECT_EQ(ReplicaCookie(tmp / "x" / ".." / "jobs" / "1" / "workerpool0-0" / ""),
            (tmp / "jobs" / "1" / "workerpool0-0").string());
  EXPECT_EQ(ReplicaCookie("/"), "/");
}

TEST_F(StokerRunTest, StopsTheTrainerAtTheTimeout) {
  WriteLaunch({{"argv", {"sleep", "1000"}}, {"timeout_seconds", 1}});
  auto t0 = Clock::now();
  json status = RunToEnd();
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(950));
  EXPECT_EQ(status["state"], "timeout");
  EXPECT_EQ(status["signal"], SIGTERM);
  EXPECT_EQ(status["message"], "timed out after 1s; stopped with SIGTERM");
}

TEST_F(StokerRunTest, RotatesTheTrainersLogAndKeepsItsEnd) {
  WriteLaunch({{"argv", {"sh", "-c", "seq 1 20000; echo done >&2"}},
               {"log_max_bytes", 4096},
               {"log_max_files", 2}});
  json status = RunToEnd();
  EXPECT_EQ(status["exit_code"], 0);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("output.log", 0) != 0) continue;
    ++files;
    EXPECT_LE(fs::file_size(e.path()), 4096u) << e.path();
  }
  EXPECT_EQ(files, 3);
  EXPECT_THAT(replica::ReadLogTail(dir_, 100), ::testing::EndsWith("19999\n20000\ndone\n"));
}

TEST_F(StokerRunTest, AMissingProgramExitsWith127AndSaysWhy) {
  WriteLaunch({{"argv", {"no-such-trainer-program", "--x"}}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "exited");
  EXPECT_EQ(status["exit_code"], 127);
  EXPECT_EQ(Slurp(dir_ / "output.log"),
            "stoker-run: cannot execute 'no-such-trainer-program': No such file or directory\n");
}

TEST_F(StokerRunTest, ABadLaunchFileIsALaunchFailure) {
  WriteLaunch({{"argv", json::array()}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "launch_failed");
  EXPECT_TRUE(status["exit_code"].is_null());
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("argv"));
  EXPECT_THAT(Slurp(dir_ / "output.log"), HasSubstr("launch.json: argv"));
  EXPECT_FALSE(fs::exists(dir_ / "trainer.json"));
}

TEST_F(StokerRunTest, AMissingLaunchFileIsALaunchFailure) {
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "launch_failed");
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("launch.json"));
}

TEST_F(StokerRunTest, StartsTheTrainerQuickly) {
  WriteLaunch({{"argv", {"true"}}});
  RunToEnd();
  int64_t supervisor = ReadJson("runner.json")["start_time_us"];
  int64_t trainer = ReadJson("trainer.json")["start_time_us"];
  std::printf("supervisor start to trainer fork: %lld us\n",
              static_cast<long long>(trainer - supervisor));
  // Dominated by the fsync of the claim (0.2 ms without it; 4-10 ms on a busy
  // ext4 disk); generous against loaded CI machines.
  EXPECT_LT(trainer - supervisor, 100000);
}

TEST_F(StokerRunTest, UnpacksPackagesOntoThePythonPath) {
  fs::path src = dir_ / "src";
  fs::create_directories(src / "mypkg-0.1" / "mypkg");
  std::ofstream(src / "mypkg-0.1" / "mypkg" / "__init__.py") << "VALUE = 42\n";
  fs::path archive = dir_ / "mypkg-0.1.tar.gz";
  std::string cmd = "tar -czf " + archive.string() + " -C " + src.string() + " mypkg-0.1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  WriteLaunch({{"argv",
                {"python3", "-c",
                 "import mypkg, os; print(mypkg.VALUE); "
                 "print(os.environ['PYTHONPATH'])"}},
               {"env", {{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", "/mine"}}},
               {"packages", {archive.string()}}});
  json status = RunToEnd();
#if STOKER_RUNNER_HAVE_STORAGE
  EXPECT_EQ(status["state"], "exited") << status.dump();
  EXPECT_EQ(status["exit_code"], 0) << Slurp(dir_ / "output.log");
  EXPECT_EQ(Slurp(dir_ / "output.log"),
            "42\n" + (dir_ / "packages" / "0" / "mypkg-0.1").string() + ":/mine\n");
#else
  EXPECT_EQ(status["state"], "launch_failed");
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("without package support"));
#endif
}

}  // namespace
}  // namespace stoker::runner

namespace stoker::runner {
namespace {

TEST(ParseLaunchSpecTest, ReadsRunAsAndNamesItsBadFields) {
  auto spec = ParseLaunchSpec(
      R"({"argv": ["true"], "run_as": {"user": "nobody", "uid": 65534, "gid": 65534}})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->run_as.has_value());
  EXPECT_EQ(spec->run_as->user, "nobody");
  EXPECT_EQ(spec->run_as->uid, 65534u);
  EXPECT_FALSE(ParseLaunchSpec(R"({"argv": ["true"]})")->run_as.has_value());
  auto bad = ParseLaunchSpec(R"({"argv": ["true"], "run_as": {"user": "x", "uid": -1, "gid": 1}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("run_as.uid"), std::string::npos);
  EXPECT_FALSE(ParseLaunchSpec(R"({"argv": ["true"], "run_as": {"uid": 1, "gid": 1}})").ok());
}

// As root, the trainer runs as the given account with its groups, and
// cannot become root again.
TEST_F(StokerRunTest, DropsToTheGivenAccountBeforeExec) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch accounts";
  ASSERT_EQ(::chmod(dir_.c_str(), 0711), 0);  // the trainer enters work/ below it
  WriteLaunch({{"argv", {"sh", "-c", "id -u; id -g; id -G; cat /proc/self/status | grep CapEff"}},
               {"run_as", {{"user", "nobody"}, {"uid", 65534}, {"gid", 65534}}}});
  json status = RunToEnd();
  EXPECT_EQ(status["exit_code"], 0) << Slurp(dir_ / "output.log");
  EXPECT_EQ(Slurp(dir_ / "output.log"), "65534\n65534\n65534\nCapEff:\t0000000000000000\n");
}

TEST_F(StokerRunTest, FailsTheLaunchWhenItCannotSwitchAccounts) {
  if (::geteuid() == 0) GTEST_SKIP() << "as root the switch succeeds";
  WriteLaunch(
      {{"argv", {"true"}}, {"run_as", {{"user", "nobody"}, {"uid", 65534}, {"gid", 65534}}}});
  json status = RunToEnd();
  EXPECT_EQ(status["state"], "launch_failed");
  EXPECT_NE(status["message"].get<std::string>().find("not root"), std::string::npos);
}

}  // namespace
}  // namespace stoker::runner
