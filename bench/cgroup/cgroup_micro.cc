// cgroup-micro: what a replica's cgroup costs its start and its end
// (replica/replica_cgroup.h), without a daemon, beside the same start
// without one.
//
//   cgroup-micro [--runs 200]
//
// Needs root and a cgroup hierarchy. Each run, alternately:
//   plain:  fork, the child execs /bin/true, reaped
//   cgroup: Create (mkdirs + the memory limit), OpenJoinFds, fork, the
//           child joins (JoinFromChild) and execs /bin/true, reaped;
//           KillAll (freeze, an empty kill pass, thaw) and Remove
// and prints p50/p90/p99 in ms of each phase, as a Markdown table.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lib/micro.h"
#include "replica/replica_cgroup.h"

using stoker::runner::CgroupLayout;
using stoker::runner::DetectCgroupLayout;
using stoker::runner::ReplicaCgroup;

namespace {

using stoker::bench::NowMs;

void Print(const char* what, const std::vector<double>& v) {
  stoker::bench::Percentiles p = stoker::bench::PercentilesOf(v);
  std::printf("| %s | %.3f | %.3f | %.3f |\n", what, p.p50, p.p90, p.p99);
}

// fork + exec /bin/true + reap; the child first joins `fds` when given.
bool RunTrue(const std::vector<int>& fds) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!ReplicaCgroup::JoinFromChild(fds)) ::_exit(120);
    ::execl("/bin/true", "true", nullptr);
    ::_exit(127);
  }
  int st = 0;
  return pid > 0 && ::waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::atoi(argv[++i]);
  }
  const CgroupLayout layout = DetectCgroupLayout();
  if (layout.kind == CgroupLayout::Kind::kNone) {
    std::fprintf(stderr, "cgroup-micro: no cgroup hierarchy: %s\n", layout.why_none.c_str());
    return 1;
  }
  std::vector<double> plain, create, start, end, total;
  for (int r = 0; r < runs; ++r) {
    double t0 = NowMs();
    if (!RunTrue({})) return 1;
    plain.push_back(NowMs() - t0);

    const std::string name = "r-bench-" + std::to_string(::getpid()) + "-" + std::to_string(r);
    double t1 = NowMs();
    auto cg = ReplicaCgroup::Create(layout, name, 1ull << 30);
    if (!cg.ok()) {
      std::fprintf(stderr, "cgroup-micro: %s\n", cg.status().ToString().c_str());
      return 1;
    }
    std::vector<int> fds = cg->OpenJoinFds();
    double t2 = NowMs();
    if (!RunTrue(fds)) return 1;
    for (int fd : fds) ::close(fd);
    double t3 = NowMs();
    if (cg->KillAll(5000) < 0 || !cg->Remove().ok()) return 1;
    double t4 = NowMs();
    create.push_back(t2 - t1);
    start.push_back(t3 - t2);
    end.push_back(t4 - t3);
    total.push_back(t4 - t1);
  }
  std::printf("%s, %d runs\n\n| phase | p50 ms | p90 ms | p99 ms |\n|---|---:|---:|---:|\n",
              layout.kind == CgroupLayout::Kind::kV2 ? "cgroup v2" : "cgroup v1", runs);
  Print("fork + exec /bin/true + reap, no cgroup", plain);
  Print("cgroup: create (mkdir per hierarchy, memory limit, join fds)", create);
  Print("cgroup: fork + join + exec /bin/true + reap", start);
  Print("cgroup: kill pass (freeze, thaw) + remove", end);
  Print("cgroup: all of the above", total);
  return 0;
}
