#include "exec/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "replica/launch.h"

extern char** environ;

namespace stoker::exec {
namespace {

int64_t MonoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What the intermediate process reports on the status pipe.
struct Report {
  int exec_errno = 0;  // the command could not be started
  int wait_status = 0;
};

}  // namespace

// The command runs as the grandchild: the child (our direct child, in its
// own process group) waits for it and writes how it ended into a pipe
// before exiting. The daemon's controller reaps every child of stokerd
// (waitpid(-1): it is the subreaper of detached supervisors), so the
// direct child's own exit status may be collected by another thread before
// we ask; what the pipe says cannot be. Between fork and exec only
// async-signal-safe calls are made.
Result<CommandResult> RunCommand(const std::vector<std::string>& args, double timeout_seconds,
                                 const std::string& start_hint) {
  if (args.empty()) return InvalidArgument("RunCommand: no command given");
  int out_pipe[2], err_pipe[2], status_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return Internal(std::string("pipe: ") + strerror(errno));
  }
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return Internal(std::string("pipe: ") + strerror(errno));
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* path = std::getenv("PATH");
  const std::vector<std::string> candidates = runner::ExecCandidates(args[0], path ? path : "");

  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    Report report;
    pid_t command = ::fork();
    if (command == 0) {
      if (null_fd >= 0) ::dup2(null_fd, 0);
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      int err = ENOENT;
      for (const std::string& c : candidates) {
        ::execve(c.c_str(), argv.data(), environ);
        if (errno != ENOENT && errno != ENOTDIR) err = errno;
      }
      report.exec_errno = err;
      (void)!::write(status_pipe[1], &report, sizeof report);
      ::_exit(127);
    }
    if (command < 0) {
      report.exec_errno = errno;
    } else {
      while (::waitpid(command, &report.wait_status, 0) < 0 && errno == EINTR) {
      }
    }
    // The command's own report (a failed exec) came first, if any.
    (void)!::write(status_pipe[1], &report, sizeof report);
    ::_exit(0);
  }
  for (int fd : {out_pipe[1], err_pipe[1], status_pipe[1], null_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (pid < 0) {
    for (int fd : {out_pipe[0], err_pipe[0], status_pipe[0]}) ::close(fd);
    return Internal(std::string("fork: ") + strerror(errno));
  }
  ::setpgid(pid, pid);  // also here, so that kill(-pid) works at once

  CommandResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  int64_t deadline = MonoMicros() + static_cast<int64_t>(timeout_seconds * 1e6);
  while (open_fds > 0) {
    int64_t left_ms = (deadline - MonoMicros()) / 1000;
    if (left_ms <= 0) {
      result.timed_out = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, got);
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (result.timed_out) ::kill(-pid, SIGKILL);
  // Whoever reaps the child, its report is in the pipe (or the pipe is
  // empty: killed before it could write).
  Report report;
  bool reported = false;
  Report r;
  ssize_t got;
  while ((got = ::read(status_pipe[0], &r, sizeof r)) == static_cast<ssize_t>(sizeof r) ||
         (got < 0 && errno == EINTR)) {
    if (got < 0) continue;
    if (!reported || r.exec_errno != 0) report = r;
    reported = true;
  }
  ::close(status_pipe[0]);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (reported && report.exec_errno != 0) {
    return FailedPrecondition("cannot run " + args[0] + ": " + std::strerror(report.exec_errno) +
                              start_hint);
  }
  if (!result.timed_out && reported && WIFEXITED(report.wait_status)) {
    result.exit_code = WEXITSTATUS(report.wait_status);
  }
  if (result.timed_out) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", timeout_seconds);
    result.err += std::string("(killed after ") + secs + "s)";
  }
  return result;
}

}  // namespace stoker::exec
