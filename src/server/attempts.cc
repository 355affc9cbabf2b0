#include "server/attempts.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/time.h"
#include "server/attempt_verdict.h"
#include "server/preemption.h"

namespace stoker::server {

using nlohmann::json;
using spec::JobState;
using spec::kRpcCancelled;

Attempts::Attempts(AttemptsDeps deps)
    : config_(*deps.config),
      store_(*deps.store),
      executor_(*deps.executor),
      buckets_(*deps.buckets),
      clock_(*deps.clock),
      table_(*deps.table),
      funnel_(*deps.funnel),
      usage_(*deps.usage) {}

void Attempts::HandleCancel(ActiveJob& a) {
  int64_t now = clock_.NowMicros();
  switch (a.rec.state) {
    case JobState::kQueued:
      funnel_.Finish(a, JobState::kCancelled, "cancelled by user before it started", kRpcCancelled,
                     "CANCELED");
      return;
    case JobState::kPending:
    case JobState::kRunning:
      if (!funnel_.Move(a, JobState::kCancelling, "cancel requested; stopping replicas")) return;
      [[fallthrough]];
    case JobState::kCancelling:
      // Repeat now and then: a supervisor that was starting may have missed it.
      if (now - a.last_cancel_us > 2'000'000) {
        Status s = executor_.Cancel(a.rec.id, a.rec.attempt, a.replicas);
        if (!s.ok()) spdlog::warn("job {}: cancel: {}", a.rec.id, s.ToString());
        a.last_cancel_us = now;
      }
      return;
    default:
      return;
  }
}

void Attempts::Poll(ActiveJob& a) {
  auto polled = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
  if (!polled.ok()) {
    spdlog::warn("job {}: poll: {}", a.rec.id, polled.status().ToString());
    return;
  }
  const std::vector<exec::ReplicaStatus>& st = *polled;
  for (const exec::ReplicaStatus& r : st) {
    if (r.start_note.empty()) continue;
    funnel_.RecordNote(
        a.rec.id, r.name + ", attempt " + std::to_string(a.rec.attempt + 1) + ": " + r.start_note);
  }
  int64_t first_start = 0;
  bool all_ended = true;
  for (const exec::ReplicaStatus& r : st) {
    if (r.start_us > 0 && (first_start == 0 || r.start_us < first_start)) first_start = r.start_us;
    if (r.phase != exec::ReplicaPhase::kEnded && r.phase != exec::ReplicaPhase::kLost)
      all_ended = false;
  }
  if (a.rec.state == JobState::kPending && first_start > 0) {
    funnel_.Move(a, JobState::kRunning, "replicas started", {.start_time_us = first_start});
  }
  if (a.rec.state == JobState::kPending) {
    // The executor's word on why nothing runs yet (Slurm's pending reason).
    for (const exec::ReplicaStatus& r : st) {
      if (r.phase != exec::ReplicaPhase::kStarting || r.message.empty()) continue;
      if (r.message != a.rec.wait_reason) {
        (void)store_.RecordWaits({{a.rec.id, r.message, ""}});
        a.rec.wait_reason = r.message;
      }
      break;
    }
  }
  if (a.rec.state == JobState::kCancelling) {
    if (all_ended) {
      usage_.RecordAttempt(a, st, "cancelled");
      funnel_.Finish(a, JobState::kCancelled, "cancelled by user", kRpcCancelled, "CANCELED");
    }
    return;
  }
  if (a.rec.state == JobState::kRunning) CheckHung(a, st);
  for (const exec::ReplicaStatus& r : st) {
    if (!r.preempted) continue;
    Preempt(a,
            "by the executor's scheduler (" + r.name + ": " +
                (r.message.empty() ? std::string("preempted") : r.message) + ")",
            /*stop=*/false);
    return;
  }
  Verdict v = JudgeAttempt(st, {.timeout_seconds = a.job.job_spec.scheduling.timeout_seconds,
                                .placed_us = a.placed_us,
                                .now_us = clock_.NowMicros(),
                                .executor_places_replicas = executor_.PlacesReplicas()});
  // An attempt decided before the job was seen running still ran.
  bool record_start = (v.kind == Verdict::Kind::kSucceeded && a.rec.start_time_us == 0) ||
                      (v.kind == Verdict::Kind::kFailed && a.rec.state == JobState::kPending);
  if (record_start) {
    funnel_.Move(a, JobState::kRunning, "replicas started",
                 {.start_time_us = v.start_us ? v.start_us : clock_.NowMicros()});
  }
  if (v.kind == Verdict::Kind::kUndecided) return;
  // The ledger first: a crash after it rewrites the same rows on recovery.
  bool retry =
      v.kind == Verdict::Kind::kFailed && v.retriable && CanRetry(a, v.infrastructure, v.worker);
  usage_.RecordAttempt(a, st,
                       v.kind == Verdict::Kind::kSucceeded ? "succeeded"
                       : retry                             ? "retried"
                                                           : "failed");
  switch (v.kind) {
    case Verdict::Kind::kUndecided:
      return;
    case Verdict::Kind::kSucceeded:
      funnel_.Finish(a, JobState::kSucceeded, v.what, 0, "");
      return;
    case Verdict::Kind::kNeverStarted:
      funnel_.Finish(
          a, JobState::kFailed, v.replica + " never started", v.error_code,
          v.what + "; see " + executor_.SupervisorLog(a.rec.id, a.rec.attempt, v.replica).string());
      return;
    case Verdict::Kind::kNoPrimary:
      funnel_.Finish(a, JobState::kFailed, "no primary replica", v.error_code, v.what);
      return;
    case Verdict::Kind::kFailed: {
      std::string tail = LogTail(a, v.replica);
      std::string message = v.what;
      if (!tail.empty()) message += " Last lines of its log:\n" + tail;
      if (v.retriable && Retry(a, v.what, v.infrastructure, v.worker)) return;
      funnel_.Finish(a, JobState::kFailed, v.what, v.error_code, message);
      return;
    }
  }
}

int Attempts::RetryLimit(const ActiveJob& a, bool infrastructure, bool worker) const {
  const spec::Scheduling& sched = a.job.job_spec.scheduling;
  if (sched.disable_retries) return 0;
  // User failures: scheduling.maxRetries. Infrastructure failures (a replica
  // lost or unable to start), and any worker failure when
  // restartJobOnWorkerRestart is set, restart the gang up to
  // kRestartLimit times even without maxRetries.
  constexpr int kRestartLimit = 3;
  int limit = sched.max_retries;
  if (infrastructure || (worker && sched.restart_job_on_worker_restart)) {
    limit = std::max(limit, kRestartLimit);
  }
  return limit;
}

bool Attempts::CanRetry(const ActiveJob& a, bool infrastructure, bool worker) const {
  // Attempts that ended in a preemption are not failures.
  return a.rec.attempt - a.rec.preemptions < RetryLimit(a, infrastructure, worker);
}

bool Attempts::Retry(ActiveJob& a, const std::string& what, bool infrastructure, bool worker) {
  if (!CanRetry(a, infrastructure, worker)) return false;
  const int limit = RetryLimit(a, infrastructure, worker);
  const int next = a.rec.attempt + 1;
  std::string why = infrastructure ? "node_failure"
                    : worker && a.job.job_spec.scheduling.restart_job_on_worker_restart
                        ? "worker_restart"
                        : "retry";
  // Preempted attempts do not count: they add to the attempts allowed.
  std::string reason = what + " Restarting all replicas as attempt " + std::to_string(next + 1) +
                       " of " + std::to_string(limit + 1 + a.rec.preemptions) +
                       (a.rec.preemptions ? " (its preemptions do not count)." : ".");
  return Requeue(a, reason, {.attempt = next, .restart_reason = why});
}

bool Attempts::Requeue(ActiveJob& a, const std::string& reason, store::TransitionUpdate u) {
  Drain(a);
  u.allocation = json();  // null: the next attempt is placed afresh
  if (!funnel_.Move(a, JobState::kQueued, reason, u)) return false;
  spdlog::info("job {}: {}", a.rec.id, reason);
  a.rec.attempt = *u.attempt;
  if (u.preemptions) a.rec.preemptions = *u.preemptions;
  if (u.restart_reason) a.rec.restart_reason = *u.restart_reason;
  a.rec.allocation = json();
  a.replicas.clear();
  a.placed.clear();
  a.placed_us = 0;
  a.hung_since_us.clear();
  a.gpu_idle_since_us = 0;
  a.gpu_idle_told.clear();
  table_.schedule_dirty = true;
  return true;
}

void Attempts::Preempt(ActiveJob& a, const std::string& by, bool stop) {
  auto st = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
  if (st.ok()) usage_.RecordAttempt(a, *st, "preempted");
  const int next = a.rec.attempt + 1;
  const int count = a.rec.preemptions + 1;
  const double grace = config_.preemption.grace_seconds;
  std::string reason =
      "PREEMPTED " + by + "; " +
      (stop ? "its replicas get SIGTERM and " + Num(grace) + "s to save a checkpoint, then SIGKILL"
            : std::string("the executor stopped its replicas")) +
      ". Requeued as attempt " + std::to_string(next + 1) +
      " with the same AIP_CHECKPOINT_DIR (preemption " + std::to_string(count) +
      "; preemptions never count against maxRetries).";
  Requeue(a, reason, {.attempt = next, .preemptions = count, .restart_reason = "preemption"});
}

int64_t Attempts::LastCheckpointUs(ActiveJob& a, int64_t now_us) {
  constexpr int64_t kLookEveryUs = 10'000'000;
  if (now_us - a.checkpoint_looked_us >= kLookEveryUs) {
    a.checkpoint_looked_us = now_us;
    // The bucket's directory is the daemon's; below it, the trainer's.
    auto uri =
        storage::ParseGsUri(OutputUri(a.job, a.rec.id) + "checkpoints", "AIP_CHECKPOINT_DIR");
    if (uri.ok()) {
      auto bucket = buckets_.Resolve("gs://" + uri->bucket + "/", "AIP_CHECKPOINT_DIR");
      if (bucket.ok()) a.checkpoint_us = NewestChangeUs(*bucket, uri->object);
    }
  }
  // A checkpoint from an earlier attempt saves nothing of this one's work.
  return std::max(a.checkpoint_us, a.placed_us);
}

void Attempts::CheckHung(ActiveJob& a, const std::vector<exec::ReplicaStatus>& st) {
  if (config_.hang_timeout_seconds <= 0) return;
  int64_t now = clock_.NowMicros();
  if (now - a.hang_check_us < 5'000'000) return;  // a few stat calls every 5 s at most
  a.hang_check_us = now;
  const auto limit_us = static_cast<int64_t>(config_.hang_timeout_seconds * 1e6);
  for (const exec::ReplicaStatus& r : st) {
    if (r.phase != exec::ReplicaPhase::kRunning) continue;
    // Progress: output (any log file) or a metric report, whichever is newest.
    int64_t last = std::max(r.start_us, executor_.LastActivityUs(a.rec.id, a.rec.attempt, r.name));
    auto reported = a.hung_since_us.find(r.name);
    if (now - last > limit_us) {
      if (reported == a.hung_since_us.end() || reported->second != last) {
        a.hung_since_us[r.name] = last;
        (void)store_.AddEvent(a.rec.id,
                              "warning: " + r.name + " looks hung: no output or progress for " +
                                  FormatDuration((now - last) / 1e6) + " (hang_timeout_seconds " +
                                  FormatDuration(config_.hang_timeout_seconds) + ")");
      }
    } else if (reported != a.hung_since_us.end()) {
      a.hung_since_us.erase(reported);
      (void)store_.AddEvent(a.rec.id, r.name + " made progress again");
    }
  }
}

void Attempts::Drain(ActiveJob& a) {
  std::vector<store::UsageRecord> usage = std::move(a.recorded_usage);
  a.recorded_usage.clear();
  if (a.replicas.empty()) return;
  auto st = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
  bool running = !st.ok() || std::any_of(st->begin(), st->end(), [](const exec::ReplicaStatus& r) {
    return r.phase == exec::ReplicaPhase::kRunning || r.phase == exec::ReplicaPhase::kStarting;
  });
  if (!running) return;
  // Say which replicas are stopped and why (their logs end with how):
  // the job ended with its primary replica, or the attempt is retried.
  // A cancel says so itself.
  if (st.ok() && a.rec.state != JobState::kCancelled) {
    std::vector<std::string> still;
    for (const exec::ReplicaStatus& r : *st) {
      if (r.phase == exec::ReplicaPhase::kRunning || r.phase == exec::ReplicaPhase::kStarting) {
        still.push_back(r.name);
      }
    }
    std::string names;
    for (const std::string& n : still) names += (names.empty() ? "" : ", ") + n;
    const std::string why = spec::IsTerminal(a.rec.state)
                                ? std::string("the job ended while ") +
                                      (still.size() == 1 ? "it" : "they") + " still ran"
                                : "its attempt ended; the job runs again";
    (void)store_.AddEvent(a.rec.id, "stopping " + names + ": " + why);
  }
  Status s = executor_.Cancel(a.rec.id, a.rec.attempt, a.replicas);
  if (!s.ok()) spdlog::warn("job {}: stopping replicas: {}", a.rec.id, s.ToString());
  DrainingAttempt d{a.replicas, a.placed,        a.rec.user, a.job.job_spec.scheduling.priority,
                    {},         std::move(usage)};
  AddPorts(a.rec.allocation, d.ports);
  table_.draining[{a.rec.id, a.rec.attempt}] = std::move(d);
}

std::string Attempts::LogTail(const ActiveJob& a, const std::string& replica) const {
  // The log may have just rotated: the executor's tail spans the rotation.
  std::string data = executor_.ReadLogTail(a.rec.id, a.rec.attempt, replica, 4096);
  // Keep the last 20 lines.
  int lines = 0;
  size_t pos = data.size();
  if (pos && data[pos - 1] == '\n') --pos;
  while (pos > 0) {
    size_t nl = data.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    if (++lines == 20) {
      pos = nl + 1;
      break;
    }
    pos = nl;
  }
  return data.substr(pos);
}

void Attempts::ReapDrained() {
  for (auto it = table_.draining.begin(); it != table_.draining.end();) {
    auto st = executor_.Poll(it->first.first, it->first.second, it->second.replicas);
    bool done =
        st.ok() && std::all_of(st->begin(), st->end(), [](const exec::ReplicaStatus& r) {
          return r.phase == exec::ReplicaPhase::kEnded || r.phase == exec::ReplicaPhase::kLost;
        });
    if (!done) {
      ++it;
      continue;
    }
    usage_.RecordDrained(it->first.first, it->second, *st);
    it = table_.draining.erase(it);
    table_.schedule_dirty = true;
  }
}

}  // namespace stoker::server
