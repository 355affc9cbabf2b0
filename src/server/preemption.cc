#include "server/preemption.h"

#include <sys/stat.h>

#include <system_error>

namespace stoker::server {

bool IsPreemptible(const spec::CustomJob& job, const PreemptionConfig& config) {
  auto label = job.labels.find("stoker-preemptible");
  if (label != job.labels.end()) return label->second == "true";
  const spec::Scheduling& s = job.job_spec.scheduling;
  if (s.strategy == "SPOT") return true;
  return config.preemptible_below && s.priority < *config.preemptible_below;
}

namespace {

int64_t ChangeUs(const std::filesystem::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
}

}  // namespace

int64_t NewestChangeUs(const std::filesystem::path& dir, int max_entries) {
  int64_t newest = 0;
  int seen = 0;
  std::error_code ec;
  std::filesystem::directory_iterator top(dir, ec), end;
  for (; !ec && top != end && seen < max_entries; top.increment(ec)) {
    ++seen;
    newest = std::max(newest, ChangeUs(top->path()));
    if (!top->is_directory(ec) || top->is_symlink(ec)) continue;
    std::error_code inner_ec;
    std::filesystem::directory_iterator inner(top->path(), inner_ec);
    for (; !inner_ec && inner != end && seen < max_entries; inner.increment(inner_ec)) {
      ++seen;
      newest = std::max(newest, ChangeUs(inner->path()));
    }
  }
  return newest;
}

}  // namespace stoker::server
