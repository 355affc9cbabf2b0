#include "server/retention.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <system_error>

#include "exec/executor.h"
#include "store/store.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;

constexpr int kPageSize = 1000;
constexpr int kPagesPerScan = 5;
// Removals per scan (the control loop waits meanwhile; a few ms each on a
// busy disk); the rest go on at the next tick.
constexpr int kRemovalsPerScan = 250;
// Jobs ending beyond the count limit bring the next scan forward, but no
// closer than this to the last one.
constexpr int64_t kMinScanGapUs = 2'000'000;

}  // namespace

std::vector<int64_t> JobsToRemove(std::vector<FinishedJob> finished, int64_t now_us,
                                  const config::RetentionPolicy& policy) {
  std::sort(finished.begin(), finished.end(), [](const FinishedJob& a, const FinishedJob& b) {
    return a.end_time_us != b.end_time_us ? a.end_time_us < b.end_time_us : a.job_id < b.job_id;
  });
  size_t cut = 0;  // finished[0, cut) go
  if (policy.replica_dirs_days >= 0) {
    double max_age_us = policy.replica_dirs_days * 86400e6;
    while (cut < finished.size() &&
           static_cast<double>(now_us - finished[cut].end_time_us) >= max_age_us) {
      ++cut;
    }
  }
  if (policy.max_finished_replica_dirs >= 0 &&
      finished.size() - cut > static_cast<size_t>(policy.max_finished_replica_dirs)) {
    cut = finished.size() - static_cast<size_t>(policy.max_finished_replica_dirs);
  }
  std::vector<int64_t> out;
  out.reserve(cut);
  for (size_t i = 0; i < cut; ++i) out.push_back(finished[i].job_id);
  return out;
}

void ApplyRetention(RetentionState& state, const config::RetentionPolicy& policy,
                    store::Store& store, exec::Executor& executor, int64_t now_us) {
  bool over_count = policy.max_finished_replica_dirs >= 0 &&
                    static_cast<int64_t>(state.finished.size()) + state.ended_since_scan >
                        policy.max_finished_replica_dirs;
  if (now_us < state.next_scan_us &&
      !(over_count && now_us >= state.last_scan_us + kMinScanGapUs)) {
    return;
  }
  if (policy.replica_dirs_days < 0 && policy.max_finished_replica_dirs < 0) {
    state.next_scan_us = now_us + 3600'000'000LL;  // nothing to enforce
    return;
  }
  state.next_scan_us = now_us + static_cast<int64_t>(policy.scan_interval_seconds * 1e6);
  state.last_scan_us = now_us;
  state.ended_since_scan = 0;
  auto note = [&](const store::JobRecord& job) {
    if (!spec::IsTerminal(job.state)) {
      state.unfinished.insert(job.id);
    } else if (executor.HasJobFiles(job.id)) {
      state.finished[job.id] = {job.end_time_us ? job.end_time_us : job.update_time_us,
                                job.study_id};
    }
  };

  // Jobs that ended since the last scan.
  for (auto it = state.unfinished.begin(); it != state.unfinished.end();) {
    auto job = store.GetJob(*it);
    if (job.ok() && !spec::IsTerminal(job->state)) {
      ++it;
      continue;
    }
    if (job.ok()) note(*job);
    it = state.unfinished.erase(it);
  }
  // Jobs created since the last scan, a few pages at a time.
  bool more = false;
  for (int page = 0; page < kPagesPerScan; ++page) {
    auto rows = store.ListJobs({.after_id = state.cursor, .limit = kPageSize});
    if (!rows.ok()) {
      spdlog::warn("retention: cannot list jobs: {}", rows.status().ToString());
      return;
    }
    for (const store::JobRecord& job : *rows) {
      note(job);
      state.cursor = std::max(state.cursor, job.id);
    }
    more = rows->size() == static_cast<size_t>(kPageSize);
    if (!more) break;
  }

  std::vector<FinishedJob> finished;
  finished.reserve(state.finished.size());
  for (const auto& [id, e] : state.finished) finished.push_back({id, e.end_time_us});
  int removed = 0;
  for (int64_t id : JobsToRemove(std::move(finished), now_us, policy)) {
    if (removed == kRemovalsPerScan) {
      more = true;
      break;
    }
    const RetentionState::Entry& e = state.finished[id];
    if (e.study_id != 0) {
      auto study = store.GetStudy(e.study_id);
      if (study.ok() && !spec::IsTerminal(study->state)) continue;
    }
    auto gone = executor.RemoveJobFiles(id);
    if (!gone.ok()) {
      spdlog::warn("retention: cannot remove the files of job {}: {}", id, gone.status().message());
      continue;
    }
    if (!*gone) continue;  // a replica is still stopping
    state.finished.erase(id);
    ++removed;
  }
  state.removed_total += removed;
  if (removed > 0) {
    spdlog::info("retention: removed the replica directories of {} finished job(s)", removed);
  }
  if (more) state.next_scan_us = now_us;  // work left: go on at the next tick
}

}  // namespace stoker::server
