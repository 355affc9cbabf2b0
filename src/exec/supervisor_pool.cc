#include "exec/supervisor_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

extern char** environ;

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

constexpr char kRunnerHint[] = " (check --runner or that stoker-run sits beside stokerd)";

// posix_spawn of `argv` in a session of its own with no signal blocked;
// `files` says what fds 0-2 are.
int SpawnInSession(std::vector<char*>& argv, posix_spawn_file_actions_t* files) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], files, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// `stoker-run --replica-dir DIR`, its output in DIR/runner.log.
Status SpawnCold(const fs::path& runner, const fs::path& dir) {
  std::string runner_s = runner.string(), dir_s = dir.string();
  std::string log = (dir / "runner.log").string();
  std::vector<char*> argv = {runner_s.data(), const_cast<char*>("--replica-dir"), dir_s.data(),
                             nullptr};
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  int rc = SpawnInSession(argv, &files);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) return Internal("cannot start " + runner_s + ": " + std::strerror(rc) + kRunnerHint);
  return OkStatus();
}

// `stoker-run --standby` reading a pipe; returns the pipe's write end.
Result<int> SpawnStandby(const fs::path& runner) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Internal(std::string("pipe2: ") + std::strerror(errno));
  std::string runner_s = runner.string();
  // Room for the standby to show `--replica-dir DIR` as its arguments once
  // it has DIR (stoker-run's ShowReplicaDirInArgv): DIR is under PIPE_BUF.
  std::string room(PIPE_BUF + 16, ' ');
  std::vector<char*> argv = {runner_s.data(), const_cast<char*>("--standby"), room.data(), nullptr};
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, p[0], 0);  // dup2 clears O_CLOEXEC on 0
  posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  int rc = SpawnInSession(argv, &files);
  posix_spawn_file_actions_destroy(&files);
  ::close(p[0]);
  if (rc != 0) {
    ::close(p[1]);
    return Internal("cannot start " + runner_s + " --standby: " + std::strerror(rc) + kRunnerHint);
  }
  return p[1];
}

// Writes the whole path and closes the pipe; false when the standby is
// gone (EPIPE: SIGPIPE is ignored in stokerd) and nothing was handed over.
bool HandOver(int fd, const std::string& path) {
  // Under PIPE_BUF bytes, so one write: all of it or nothing.
  ssize_t n;
  do {
    n = ::write(fd, path.data(), path.size());
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  return n == static_cast<ssize_t>(path.size());
}

}  // namespace

SupervisorPool::SupervisorPool(fs::path runner, size_t size)
    : runner_(std::move(runner)), size_(size) {}

SupervisorPool::~SupervisorPool() {
  for (int fd : standbys_) ::close(fd);
}

Status SupervisorPool::Start(const fs::path& dir) {
  std::string path = dir.string();
  // Anything else goes the slow way, whose argv takes any path.
  bool handable = dir.is_absolute() && path.size() < PIPE_BUF;
  while (handable) {
    int fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (standbys_.empty()) break;
      fd = standbys_.back();
      standbys_.pop_back();
    }
    if (HandOver(fd, path)) return OkStatus();
    spdlog::warn("a standby stoker-run had gone; trying the next for {}", path);
  }
  return SpawnCold(runner_, dir);
}

void SupervisorPool::Refill() {
  std::lock_guard<std::mutex> lock(mu_);
  while (standbys_.size() < size_) {
    Result<int> fd = SpawnStandby(runner_);
    if (!fd.ok()) {
      spdlog::warn("{}", fd.status().message());
      return;
    }
    standbys_.push_back(*fd);
  }
}

size_t SupervisorPool::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return standbys_.size();
}

}  // namespace stoker::exec
