// stoker-run: the replica supervisor. See README.md and supervisor.h.
//
//   stoker-run [--detach] --replica-dir DIR
//
// With --detach the command returns as soon as the supervisor process exists
// (double fork + setsid, supervisor reparented to init in its own session,
// its stdout/stderr appended to DIR/runner.log). Nothing slow happens before
// the forks: the launching daemon waits only for the short-lived middle
// process.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "runner/supervisor.h"

namespace {

constexpr char kUsage[] = "usage: stoker-run [--detach] --replica-dir DIR\n";

// Turns the calling process into the detached supervisor; returns only in
// the grandchild. The original process exits 0 once the grandchild is forked.
void Detach(const std::string& dir) {
  pid_t middle = ::fork();
  if (middle < 0) {
    std::perror("stoker-run: fork");
    std::exit(1);
  }
  if (middle > 0) {
    int status = 0;
    while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  ::setsid();
  pid_t supervisor = ::fork();
  if (supervisor < 0) ::_exit(1);
  if (supervisor > 0) ::_exit(0);

  // The supervisor: nothing inherited from the launcher but what it needs.
  ::close_range(3, ~0U, 0);
  int in = ::open("/dev/null", O_RDONLY);
  std::string log = dir + "/runner.log";
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in < 0 || out < 0) ::_exit(1);
  ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  if (in > STDERR_FILENO) ::close(in);
  if (out > STDERR_FILENO) ::close(out);
}

}  // namespace

int main(int argc, char** argv) {
  bool detach = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--detach") {
      detach = true;
    } else if (a == "--replica-dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a.rfind("--replica-dir=", 0) == 0) {
      dir = a.substr(std::strlen("--replica-dir="));
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "stoker-run: unexpected argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "stoker-run: --replica-dir is required\n%s", kUsage);
    return 2;
  }
  if (detach) {
    Detach(dir);
    // A daemon should not pin the launcher's working directory.
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(dir, ec);
    if (!ec && ::chdir("/") == 0) dir = abs.string();
  } else {
    // Descriptors leaked by whoever started us (stokerd's listening socket,
    // its database) must neither reach the trainer nor be held open by us.
    ::close_range(3, ~0U, 0);
  }
  return stoker::runner::RunSupervisor(dir);
}
