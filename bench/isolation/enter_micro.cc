// isolation-micro: what isolating one trainer costs, without a daemon.
//
//   isolation-micro DATA_DIR [--as-nobody] [--runs 200]
//
// DATA_DIR needs jobs/2, buckets and envs (run.sh makes them). Per run: the
// supervisor's side (the Isolation constructor: plan, and as root the user
// namespace), the child's side (Isolation::Enter, up to where it would drop
// privileges and exec), and fork to reaped child, exit and namespace
// teardown included. --as-nobody drops to nobody first: the path of a
// stokerd that is not root.
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lib/micro.h"
#include "runner/isolation.h"

using stoker::runner::Isolation;
using stoker::runner::IsolationMode;
using stoker::runner::IsolationSpec;

namespace {

using stoker::bench::NowMs;

void Print(const char* who, const char* what, const std::vector<double>& v) {
  stoker::bench::Percentiles p = stoker::bench::PercentilesOf(v);
  std::printf("| %s | %s | %.2f | %.2f | %.2f |\n", who, what, p.p50, p.p90, p.p99);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: isolation-micro DATA_DIR [--as-nobody] [--runs N]\n");
    return 2;
  }
  std::filesystem::path data = argv[1];
  bool nobody = false;
  int runs = 200;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--as-nobody") == 0) nobody = true;
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::atoi(argv[++i]);
  }
  if (nobody) {
    gid_t g = 65534;
    if (::setgroups(1, &g) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      std::perror("isolation-micro: cannot become nobody");
      return 1;
    }
    ::prctl(PR_SET_DUMPABLE, 1);  // as after an exec: /proc/self/uid_map is ours again
  }
  IsolationSpec spec;
  spec.mode = IsolationMode::kRequired;
  spec.hide = {data};
  spec.keep = {data / "jobs/2", data / "buckets"};
  spec.keep_read_only = {data / "envs"};
  std::vector<double> plan, enter, whole;
  for (int i = 0; i < runs; ++i) {
    int p[2];
    if (::pipe(p) != 0) return 1;
    double a = NowMs();
    double b, r[2] = {0, 0};
    int status = 0;
    {
      Isolation isolation(spec, false);
      b = NowMs();
      pid_t pid = ::fork();
      if (pid == 0) {
        double c = NowMs();
        const char* error = isolation.Enter(-1);
        double d[2] = {c, NowMs()};
        ssize_t n = ::write(p[1], d, sizeof d);
        if (error) ::write(2, error, std::strlen(error));
        ::_exit(error || n != sizeof d ? 1 : 0);
      }
      if (::read(p[0], r, sizeof r) != sizeof r) return 1;
      ::waitpid(pid, &status, 0);
    }
    ::close(p[0]);
    ::close(p[1]);
    if (status != 0) {
      std::fprintf(stderr, "\nisolation-micro: the child could not isolate itself\n");
      return 1;
    }
    plan.push_back(b - a);
    enter.push_back(r[1] - r[0]);
    whole.push_back(NowMs() - a);
  }
  const char* who = nobody ? "nobody" : "root";
  Print(who, "supervisor: Isolation(spec)", plan);
  Print(who, "child: Enter()", enter);
  Print(who, "fork to reaped child (exit, teardown)", whole);
  return 0;
}
