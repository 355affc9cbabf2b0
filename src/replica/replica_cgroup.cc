#include "replica/replica_cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "common/fnv1a.h"
#include "common/time.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

constexpr const char* kV1Controllers[] = {"freezer", "pids", "memory", "cpuacct"};

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? s.npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// The directory of cgroup `own` (a path from /proc/self/cgroup) in a
// hierarchy mounted at `mount_point` whose root is `mount_root`; "" when
// the mount does not show it.
std::string DirIn(const std::string& mount_point, const std::string& mount_root,
                  const std::string& own) {
  std::string rel = own;
  if (mount_root != "/") {
    if (own.compare(0, mount_root.size(), mount_root) != 0) return "";
    rel = own.substr(mount_root.size());
  }
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  return mount_point + rel;
}

// Reads a small file whole; "" when it cannot be read.
std::string ReadSmall(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

bool WriteSmall(const fs::path& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

// "key N" from a flat-keyed file (memory.events, memory.oom_control, cpu.stat).
std::optional<uint64_t> KeyedValue(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return std::nullopt;
}

// `dir` and every cgroup directory below it, deepest first.
std::vector<fs::path> Subtree(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return a.native().size() > b.native().size();
  });
  out.push_back(dir);
  return out;
}

std::vector<pid_t> ProcsIn(const fs::path& dir) {
  std::vector<pid_t> out;
  std::istringstream in(ReadSmall(dir / "cgroup.procs"));
  pid_t p;
  while (in >> p) out.push_back(p);
  return out;
}

// mkdir that accepts an existing directory (not a link).
bool MakeDir(const fs::path& p) {
  if (::mkdir(p.c_str(), 0755) == 0) return true;
  struct stat st = {};
  return errno == EEXIST && ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

CgroupLayout ParseCgroupLayout(std::string_view proc_self_cgroup, std::string_view mountinfo) {
  std::map<std::string, std::string> own;  // controller ("" for v2) -> path
  for (const std::string& line : Split(proc_self_cgroup, '\n')) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controllers.empty()) {
      own[""] = path;
    } else {
      for (const std::string& c : Split(controllers, ',')) own[c] = path;
    }
  }
  CgroupLayout v1, v2;
  std::vector<fs::path> all_mounts;
  std::set<std::string> seen_hierarchies;  // major:minor of the mounts in all_mounts
  v1.kind = CgroupLayout::Kind::kV1;
  v2.kind = CgroupLayout::Kind::kV2;
  for (const std::string& line : Split(mountinfo, '\n')) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> pre = Split(line.substr(0, dash), ' ');
    std::vector<std::string> post = Split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const std::string& root = pre[3];
    const std::string& point = pre[4];
    if ((post[0] == "cgroup" || post[0] == "cgroup2") && root == "/" &&
        seen_hierarchies.insert(pre[2]).second) {
      all_mounts.push_back(point);
    }
    if (post[0] == "cgroup2") {
      auto it = own.find("");
      if (it == own.end() || v2.parents.count("unified")) continue;
      std::string dir = DirIn(point, root, it->second);
      if (!dir.empty()) {
        v2.parents["unified"] = dir + "/stoker";
        v2.relative_parent = it->second == "/" ? "/stoker" : it->second + "/stoker";
      }
      continue;
    }
    if (post[0] != "cgroup") continue;
    for (const std::string& opt : Split(post[2], ',')) {
      for (const char* c : kV1Controllers) {
        if (opt != c || v1.parents.count(c)) continue;
        auto it = own.find(c);
        if (it == own.end()) continue;
        std::string dir = DirIn(point, root, it->second);
        if (dir.empty()) continue;
        v1.parents[c] = dir + "/stoker";
        if (opt == "freezer") {
          v1.relative_parent = it->second == "/" ? "/stoker" : it->second + "/stoker";
        }
      }
    }
  }
  if (v1.parents.count("freezer")) {
    v1.mounts = all_mounts;
    return v1;
  }
  // A unified hierarchy beside v1 controllers (hybrid) has none of its own
  // worth using; only a pure v2 system is used as v2.
  if (v2.parents.count("unified") && v1.parents.empty()) {
    v2.mounts = all_mounts;
    return v2;
  }
  CgroupLayout none;
  none.why_none = v1.parents.empty() && !v2.parents.count("unified")
                      ? "no cgroup hierarchy is mounted"
                      : "cgroup v1 without a freezer hierarchy";
  return none;
}

CgroupLayout DetectCgroupLayout() {
  return ParseCgroupLayout(ReadSmall("/proc/self/cgroup"), ReadSmall("/proc/self/mountinfo"));
}

const CgroupLayout& ThisProcessCgroupLayout() {
  static const CgroupLayout layout = DetectCgroupLayout();
  return layout;
}

std::string ReplicaCgroupName(std::string_view cookie) {
  const std::string hex = Fnv1aHex(cookie);
  std::string last = fs::path(std::string(cookie)).filename().string();
  std::string tail;
  for (char c : last) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') tail += c;
  }
  if (tail.size() > 44) tail.resize(44);
  return std::string("r-") + hex + (tail.empty() ? "" : "-" + tail);
}

std::string StandbyCgroupName(pid_t pid) { return "s-" + std::to_string(pid); }

void RemoveStaleStandbyCgroups(const CgroupLayout& layout) {
  const std::string main = layout.kind == CgroupLayout::Kind::kV2 ? "unified" : "freezer";
  auto parent = layout.parents.find(main);
  if (parent == layout.parents.end()) return;
  std::error_code ec;
  for (fs::directory_iterator it(parent->second, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("s-", 0) != 0 || name.size() < 3 ||
        name.find_first_not_of("0123456789", 2) != std::string::npos || name.size() > 12) {
      continue;
    }
    pid_t pid = static_cast<pid_t>(std::stol(name.substr(2)));
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    if (auto cg = ReplicaCgroup::Open(layout, name)) (void)cg->Remove();
  }
}

std::string MemoryAmount(uint64_t bytes) {
  double gib = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  char buf[32];
  if (gib >= 10 || gib == static_cast<double>(static_cast<uint64_t>(gib))) {
    std::snprintf(buf, sizeof buf, "%.0f GB", gib);
  } else if (gib >= 1) {
    std::snprintf(buf, sizeof buf, "%.1f GB", gib);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f MB", static_cast<double>(bytes) / (1024.0 * 1024));
  }
  return buf;
}

Result<ReplicaCgroup> ReplicaCgroup::Create(const CgroupLayout& layout, const std::string& name,
                                            uint64_t memory_limit_bytes) {
  if (layout.kind == CgroupLayout::Kind::kNone) return FailedPrecondition(layout.why_none);
  ReplicaCgroup cg;
  cg.layout_ = layout;
  cg.name_ = name;
  const std::string main = layout.kind == CgroupLayout::Kind::kV2 ? "unified" : "freezer";
  for (const auto& [controller, parent] : layout.parents) {
    fs::path dir = parent / name;
    if (!MakeDir(parent) || !MakeDir(dir)) {
      if (controller == main) {
        return FailedPrecondition("cannot make the replica's cgroup " + dir.string() + ": " +
                                  std::strerror(errno));
      }
      continue;  // an optional controller: no limit or accounting from it
    }
    cg.dirs_[controller] = dir;
  }
  if (layout.kind == CgroupLayout::Kind::kV2) {
    // Controllers for the replica: enabled where the parent allows it (a
    // cgroup with processes of its own cannot hand them down).
    fs::path parent = layout.parents.at("unified");
    WriteSmall(parent.parent_path() / "cgroup.subtree_control", "+memory +pids");
    WriteSmall(parent / "cgroup.subtree_control", "+memory +pids");
  }
  cg.SetMemoryLimit(memory_limit_bytes);
  return cg;
}

void ReplicaCgroup::SetMemoryLimit(uint64_t bytes) {
  if (bytes == 0) return;
  const std::string limit = std::to_string(bytes);
  bool set = false;
  if (auto it = dirs_.find("memory"); it != dirs_.end()) {
    set = WriteSmall(it->second / "memory.limit_in_bytes", limit);
    // No swapping past the limit (the file exists with swap accounting).
    if (set && fs::exists(it->second / "memory.memsw.limit_in_bytes")) {
      WriteSmall(it->second / "memory.memsw.limit_in_bytes", limit);
    }
  } else if (auto u = dirs_.find("unified"); u != dirs_.end()) {
    set = WriteSmall(u->second / "memory.max", limit);
    if (set) WriteSmall(u->second / "memory.swap.max", "0");
  }
  if (set) memory_limit_ = bytes;
}

Status ReplicaCgroup::Rename(const std::string& name, uint64_t memory_limit_bytes) {
  std::map<std::string, fs::path> renamed;
  for (const auto& [controller, dir] : dirs_) {
    fs::path to = dir.parent_path() / name;
    if (::rename(dir.c_str(), to.c_str()) != 0) {
      std::string why = std::strerror(errno);
      for (const auto& [c, done] : renamed) (void)::rename(done.c_str(), dirs_.at(c).c_str());
      return Internal("cannot rename cgroup " + dir.string() + " to " + to.string() + ": " + why);
    }
    renamed[controller] = to;
  }
  dirs_ = std::move(renamed);
  name_ = name;
  SetMemoryLimit(memory_limit_bytes);
  return OkStatus();
}

std::optional<ReplicaCgroup> ReplicaCgroup::Open(const CgroupLayout& layout,
                                                 const std::string& name) {
  if (layout.kind == CgroupLayout::Kind::kNone) return std::nullopt;
  ReplicaCgroup cg;
  cg.layout_ = layout;
  cg.name_ = name;
  for (const auto& [controller, parent] : layout.parents) {
    std::error_code ec;
    if (fs::is_directory(parent / name, ec)) cg.dirs_[controller] = parent / name;
  }
  if (cg.dirs_.empty()) return std::nullopt;
  return cg;
}

std::vector<int> ReplicaCgroup::OpenJoinFds() const {
  std::vector<int> fds;
  for (const auto& [controller, dir] : dirs_) {
    int fd = ::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) fds.push_back(fd);
  }
  return fds;
}

bool ReplicaCgroup::JoinFromChild(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (::write(fd, "0", 1) != 1) return false;
  }
  return true;
}

Status ReplicaCgroup::Add(pid_t pid) const {
  const std::string text = std::to_string(pid);
  for (const auto& [controller, dir] : dirs_) {
    if (!WriteSmall(dir / "cgroup.procs", text)) {
      return Internal("cannot move process " + text + " into " + dir.string() + ": " +
                      std::strerror(errno));
    }
  }
  return OkStatus();
}

std::vector<pid_t> ReplicaCgroup::Pids() const {
  const std::string main = layout_.kind == CgroupLayout::Kind::kV2 ? "unified" : "freezer";
  auto it = dirs_.find(main);
  if (it == dirs_.end()) return {};
  std::set<pid_t> all;
  for (const fs::path& d : Subtree(it->second)) {
    for (pid_t p : ProcsIn(d)) all.insert(p);
  }
  return {all.begin(), all.end()};
}

int ReplicaCgroup::KillAll(int64_t timeout_ms) const {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  const pid_t self = ::getpid();
  std::set<pid_t> killed;
  auto kill_listed = [&] {
    for (pid_t p : Pids()) {
      if (p == self || p <= 1) continue;
      if (::kill(p, SIGKILL) == 0) killed.insert(p);
    }
  };
  if (auto u = dirs_.find("unified"); u != dirs_.end()) {
    for (pid_t p : Pids()) killed.insert(p);
    if (!WriteSmall(u->second / "cgroup.kill", "1")) {
      // Before Linux 5.14: freeze, kill each, thaw.
      WriteSmall(u->second / "cgroup.freeze", "1");
      kill_listed();
      WriteSmall(u->second / "cgroup.freeze", "0");
    }
  } else if (auto f = dirs_.find("freezer"); f != dirs_.end()) {
    // Frozen, no member can fork a process the kill would miss. A member in
    // uninterruptible sleep may keep the state at FREEZING: kill anyway.
    WriteSmall(f->second / "freezer.state", "FROZEN");
    for (int i = 0; i < 100 && ReadSmall(f->second / "freezer.state").rfind("FROZEN", 0) != 0;
         ++i) {
      ::usleep(1000);
    }
    kill_listed();
    WriteSmall(f->second / "freezer.state", "THAWED");
  }
  // Killed processes leave the cgroup as they exit; a process forked in the
  // moment before the freeze shows up in the next look.
  while (true) {
    std::vector<pid_t> left = Pids();
    std::erase(left, self);
    if (left.empty()) return static_cast<int>(killed.size());
    if (MonotonicMs() >= deadline) return -1;
    for (pid_t p : left) {
      if (::kill(p, SIGKILL) == 0) killed.insert(p);
    }
    ::usleep(2000);
  }
}

Status ReplicaCgroup::Remove() const {
  std::string left;
  std::vector<fs::path> roots = ContainerDirs();
  for (const auto& [controller, dir] : dirs_) roots.push_back(dir);
  for (const fs::path& root : roots) {
    for (const fs::path& d : Subtree(root)) {
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT) {
        left += (left.empty() ? "" : ", ") + d.string() + " (" + std::strerror(errno) + ")";
      }
    }
  }
  if (left.empty()) return OkStatus();
  return Internal("cannot remove cgroup(s) " + left);
}

std::vector<fs::path> ReplicaCgroup::ContainerDirs() const {
  std::vector<fs::path> out;
  const std::string parent = ContainerParent();
  if (parent.empty()) return out;
  for (const fs::path& mount : layout_.mounts) {
    fs::path dir = mount.string() + parent;
    bool own = std::any_of(dirs_.begin(), dirs_.end(),
                           [&](const auto& entry) { return entry.second == dir; });
    std::error_code ec;
    if (!own && fs::is_directory(dir, ec)) out.push_back(dir);
  }
  return out;
}

bool ReplicaCgroup::OomKilled() const {
  if (auto m = dirs_.find("memory"); m != dirs_.end()) {
    std::vector<fs::path> roots = {m->second};
    for (const fs::path& c : ContainerDirs()) {
      if (fs::exists(c / "memory.oom_control")) roots.push_back(c);
    }
    for (const fs::path& root : roots) {
      for (const fs::path& d : Subtree(root)) {
        if (KeyedValue(ReadSmall(d / "memory.oom_control"), "oom_kill").value_or(0) > 0) {
          return true;
        }
      }
    }
    return false;
  }
  if (auto u = dirs_.find("unified"); u != dirs_.end()) {
    return KeyedValue(ReadSmall(u->second / "memory.events"), "oom_kill").value_or(0) > 0;
  }
  return false;
}

uint64_t ReplicaCgroup::MemoryBytes() const {
  if (auto m = dirs_.find("memory"); m != dirs_.end()) {
    // Resident memory of the members (rss + mapped files), not the page
    // cache that usage_in_bytes also counts.
    std::string stat = ReadSmall(m->second / "memory.stat");
    return KeyedValue(stat, "total_rss").value_or(0) +
           KeyedValue(stat, "total_mapped_file").value_or(0);
  }
  if (auto u = dirs_.find("unified"); u != dirs_.end()) {
    std::string stat = ReadSmall(u->second / "memory.stat");
    return KeyedValue(stat, "anon").value_or(0) + KeyedValue(stat, "file_mapped").value_or(0);
  }
  return 0;
}

std::optional<uint64_t> ReplicaCgroup::CpuNanos() const {
  if (auto c = dirs_.find("cpuacct"); c != dirs_.end()) {
    std::string text = ReadSmall(c->second / "cpuacct.usage");
    char* end = nullptr;
    unsigned long long ns = std::strtoull(text.c_str(), &end, 10);
    if (end == text.c_str()) return std::nullopt;
    return ns;
  }
  if (auto u = dirs_.find("unified"); u != dirs_.end()) {
    if (auto us = KeyedValue(ReadSmall(u->second / "cpu.stat"), "usage_usec")) return *us * 1000;
  }
  return std::nullopt;
}

std::string ReplicaCgroup::ContainerParent() const {
  if (layout_.relative_parent.empty()) return "";
  return layout_.relative_parent + "/" + name_;
}

}  // namespace stoker::runner
