// Test helper shared by the runner's tests: run code in a forked child (to
// change its ids, limits or namespaces without touching the test process)
// and get back what it reports.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace stoker::runner {

struct ChildReport {
  std::string text;  // what `body` returned; empty if the child died first
  int status = 0;    // waitpid's status: exit code 0 when the report was sent whole
};

// Forks; the child runs `body`, writes its result to a pipe and _exits (0,
// or 3 when the write fell short) without running the parent's destructors;
// the parent reads the result and reaps the child.
inline ChildReport RunInChild(const std::function<std::string()>& body) {
  ChildReport report;
  int p[2];
  if (::pipe(p) != 0) {
    report.status = -1;
    return report;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string out = body();
    ssize_t n = ::write(p[1], out.data(), out.size());
    ::_exit(n == static_cast<ssize_t>(out.size()) ? 0 : 3);
  }
  ::close(p[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) report.text.append(buf, n);
  ::close(p[0]);
  ::waitpid(pid, &report.status, 0);
  return report;
}

}  // namespace stoker::runner
