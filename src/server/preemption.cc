#include "server/preemption.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace stoker::server {

bool IsPreemptible(const spec::CustomJob& job, const config::PreemptionConfig& config) {
  auto label = job.labels.find("stoker-preemptible");
  if (label != job.labels.end()) return label->second == "true";
  const spec::Scheduling& s = job.job_spec.scheduling;
  if (s.strategy == "SPOT") return true;
  return config.preemptible_below && s.priority < *config.preemptible_below;
}

namespace {

int64_t ChangeUs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
}

// Opens the directory `name` in `parent` without following a link.
int OpenDirAt(int parent, const char* name) {
  return ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Visits the entries of the open directory `fd` (closing it), at most
// `budget` of them (decremented), with their lstat; `visit` returns whether
// to descend into that entry (a directory, never a link).
template <typename Visit>
void ForEachEntry(int fd, int& budget, Visit&& visit) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  while (budget > 0) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    --budget;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    visit(::dirfd(d), e->d_name, st);
  }
  ::closedir(d);
}

}  // namespace

int64_t NewestChangeUs(const std::filesystem::path& root, const std::filesystem::path& relative,
                       int max_entries) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const std::filesystem::path& part : relative) {
    if (fd < 0) return 0;
    const std::string name = part.string();
    if (name.empty() || name == "." || name == "..") continue;
    int next = OpenDirAt(fd, name.c_str());
    ::close(fd);
    fd = next;
  }
  if (fd < 0) return 0;
  int64_t newest = 0;
  int budget = max_entries;
  ForEachEntry(fd, budget, [&](int dir, const char* name, const struct stat& st) {
    newest = std::max(newest, ChangeUs(st));
    if (!S_ISDIR(st.st_mode)) return;
    int sub = OpenDirAt(dir, name);
    if (sub < 0) return;
    ForEachEntry(sub, budget, [&](int, const char*, const struct stat& inner) {
      newest = std::max(newest, ChangeUs(inner));
    });
  });
  return newest;
}

}  // namespace stoker::server
