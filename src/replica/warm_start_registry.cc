#include "replica/warm_start_registry.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/time.h"
#include "replica/replica_processes.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kRecordSuffix[] = ".json";

// Least recently used first.
std::vector<const ZygoteRecord*> IdleByAge(const std::vector<ZygoteRecord>& live,
                                           const std::string* user) {
  std::vector<const ZygoteRecord*> out;
  for (const ZygoteRecord& r : live) {
    if (r.idle && (user == nullptr || r.user == *user)) out.push_back(&r);
  }
  std::stable_sort(out.begin(), out.end(), [](const ZygoteRecord* a, const ZygoteRecord* b) {
    return a->last_use_us < b->last_use_us;
  });
  return out;
}

std::string UserName(const std::string& user) { return user.empty() ? "the local user" : user; }

// True when the process has a child: a trainer forked from it still runs
// (or its zombie is not reaped yet).
bool HasChildren(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  Result<std::string> text = ReadFile(path);
  if (text.ok()) return text->find_first_not_of(" \n") != std::string::npos;
  // No /proc/PID/task/PID/children on this kernel: look for its children.
  Result<std::vector<pid_t>> pids = ListPids();
  if (!pids.ok()) return true;  // unknown: never end it
  for (pid_t p : *pids) {
    std::optional<ProcStat> st = ReadProcStat(p);
    if (st && st->ppid == pid) return true;
  }
  return false;
}

}  // namespace

std::string FormatZygoteRecord(const ZygoteRecord& r) {
  return json{{"key", r.key},
              {"user", r.user},
              {"pid", r.pid},
              {"start_ticks", r.start_ticks},
              {"spawner", r.spawner}}
             .dump() +
         "\n";
}

Result<ZygoteRecord> ParseZygoteRecord(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("key") || !j["key"].is_string() || !j.contains("pid") ||
      !j["pid"].is_number_integer()) {
    return InvalidArgument("a warm interpreter record must be {\"key\", \"user\", \"pid\", ...}");
  }
  ZygoteRecord r;
  r.key = j["key"].get<std::string>();
  r.user = j.value("user", "");
  r.pid = j["pid"].get<pid_t>();
  r.start_ticks = j.value("start_ticks", uint64_t{0});
  r.spawner = j.value("spawner", pid_t{0});
  return r;
}

SpawnPlan PlanZygoteSpawn(const std::vector<ZygoteRecord>& live, const std::string& user,
                          int max_per_user, int max_total) {
  SpawnPlan plan;
  size_t mine = 0;
  for (const ZygoteRecord& r : live) mine += r.user == user ? 1 : 0;
  // Room for one more of `user`'s: end the oldest idle ones of theirs.
  if (mine + 1 > static_cast<size_t>(max_per_user)) {
    size_t need = mine + 1 - static_cast<size_t>(max_per_user);
    std::vector<const ZygoteRecord*> idle = IdleByAge(live, &user);
    if (idle.size() < need) {
      plan.refusal = UserName(user) + " already has " + std::to_string(mine) +
                     " warm interpreters, none idle (warm_start_max_per_user: " +
                     std::to_string(max_per_user) + ")";
      return plan;
    }
    for (size_t i = 0; i < need; ++i) plan.end.push_back(idle[i]->key);
  }
  // Then room for one more in all.
  size_t total = live.size() - plan.end.size();
  if (total + 1 > static_cast<size_t>(max_total)) {
    size_t need = total + 1 - static_cast<size_t>(max_total);
    std::vector<const ZygoteRecord*> idle;
    for (const ZygoteRecord* r : IdleByAge(live, nullptr)) {
      if (std::find(plan.end.begin(), plan.end.end(), r->key) == plan.end.end()) idle.push_back(r);
    }
    if (idle.size() < need) {
      plan.end.clear();
      plan.refusal =
          "this node already has " + std::to_string(live.size()) +
          " warm interpreters, none idle (warm_start_max_total: " + std::to_string(max_total) + ")";
      return plan;
    }
    for (size_t i = 0; i < need; ++i) plan.end.push_back(idle[i]->key);
  }
  return plan;
}

int LockWarmFile(const fs::path& path, int64_t timeout_ms) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  const int64_t deadline = MonotonicMs() + timeout_ms;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || MonotonicMs() > deadline) {
      ::close(fd);
      return -1;
    }
    ::usleep(20'000);
  }
  return fd;
}

uint64_t ProcessStartTicks(pid_t pid) {
  Result<std::string> stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return 0;
  size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return 0;
  // Fields 3.. follow the comm; starttime is field 22.
  const char* p = stat->c_str() + paren + 1;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p + 1, ' ');
    if (p == nullptr) return 0;
  }
  return std::strtoull(p + 1, nullptr, 10);
}

std::vector<ZygoteRecord> ListLiveZygotes(const fs::path& dir, DeadRecords dead) {
  std::vector<ZygoteRecord> live;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path& path = entry.path();
    if (path.extension() != kRecordSuffix) continue;
    struct stat st = {};
    Result<std::string> text = ReadOwnFileNoFollow(dir, path.filename(), 4096);
    std::optional<ZygoteRecord> r;
    if (text.ok() && ::lstat(path.c_str(), &st) == 0) {
      if (Result<ZygoteRecord> parsed = ParseZygoteRecord(*text); parsed.ok()) r = *parsed;
    }
    bool alive = false;
    if (r && r->pid > 0) {
      std::optional<ProcStat> ps = ReadProcStat(r->pid);
      alive =
          ps && ps->state != 'Z' && ps->state != 'X' && ProcessStartTicks(r->pid) == r->start_ticks;
      if (alive) {
        r->idle = !HasChildren(r->pid);
        r->rss_bytes = ps->rss_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      }
    } else if (r && r->spawner > 0) {
      alive = ::kill(r->spawner, 0) == 0 || errno == EPERM;  // still being started
    }
    if (!alive) {
      if (dead == DeadRecords::kRemove) {
        fs::remove(path, ec);
        if (r) fs::remove(dir / (r->key + ".sock"), ec);
      }
      continue;
    }
    r->last_use_us =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000 + st.st_mtim.tv_nsec / 1000;
    live.push_back(*r);
  }
  return live;
}

void EndZygote(const fs::path& dir, const ZygoteRecord& record) {
  std::error_code ec;
  fs::remove(dir / (record.key + ".sock"), ec);
  fs::remove(dir / (record.key + kRecordSuffix), ec);
  if (record.pid > 0 && ProcessStartTicks(record.pid) == record.start_ticks) {
    ::kill(record.pid, SIGTERM);
  }
}

void TouchZygote(const fs::path& dir, const std::string& key) {
  ::utimensat(AT_FDCWD, (dir / (key + kRecordSuffix)).c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

}  // namespace stoker::runner
