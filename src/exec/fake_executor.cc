#include "exec/fake_executor.h"

#include <csignal>

#include "common/strings.h"
#include "replica/launch.h"

namespace stoker::exec {

namespace fs = std::filesystem;

FakeExecutor::FakeExecutor(fs::path root, bool places_replicas)
    : root_(std::move(root)), places_replicas_(places_replicas) {}

fs::path FakeExecutor::ReplicaDir(int64_t job_id, int attempt, const std::string& replica) const {
  fs::path dir = root_ / "jobs" / std::to_string(job_id);
  if (attempt > 0) dir /= "attempt-" + std::to_string(attempt);
  return dir / replica;
}

FakeExecutor::Replica& FakeExecutor::At(const Key& key) {
  auto [it, added] = replicas_.try_emplace(key);
  if (added) it->second.status.name = key.replica;
  return it->second;
}

const FakeExecutor::Replica* FakeExecutor::Find(const Key& key) const {
  auto it = replicas_.find(key);
  return it == replicas_.end() ? nullptr : &it->second;
}

Status FakeExecutor::Launch(const JobLaunch& launch) {
  std::lock_guard lock(mu_);
  if (fail_next_launch_) {
    Status s = *fail_next_launch_;
    fail_next_launch_.reset();
    return s;
  }
  for (const ReplicaLaunch& r : launch.replicas) {
    At({launch.job_id, launch.attempt, r.name}).launched = true;
  }
  launches_.push_back(launch);
  return OkStatus();
}

Result<std::vector<ReplicaStatus>> FakeExecutor::Poll(int64_t job_id, int attempt,
                                                      const std::vector<std::string>& replicas) {
  std::vector<ReplicaStatus> out;
  for (const std::string& name : replicas) out.push_back(status({job_id, attempt, name}));
  return out;
}

Status FakeExecutor::Cancel(int64_t job_id, int attempt, const std::vector<std::string>& replicas) {
  std::lock_guard lock(mu_);
  cancels_.push_back({job_id, attempt, replicas});
  for (const std::string& name : replicas) {
    auto it = replicas_.find({job_id, attempt, name});
    if (it == replicas_.end()) continue;
    Replica& r = it->second;
    if (r.status.phase != ReplicaPhase::kStarting && r.status.phase != ReplicaPhase::kRunning) {
      continue;
    }
    r.cancel_requested = true;
    if (!cancel_ends_at_once_) continue;
    bool started = r.status.phase == ReplicaPhase::kRunning;
    r.status.phase = ReplicaPhase::kEnded;
    r.status.end_state = EndState::kCancelled;
    r.status.signal = started ? std::optional<int>(SIGTERM) : std::nullopt;
    r.status.message =
        started ? "cancelled; stopped with SIGTERM" : "cancelled before the trainer started";
    r.status.end_us = now_us_;
  }
  return OkStatus();
}

Result<LogChunk> FakeExecutor::ReadLog(int64_t job_id, int attempt, const std::string& replica,
                                       uint64_t offset, size_t max_bytes) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find({job_id, attempt, replica});
  const std::string empty;
  const std::string& log = r ? r->log : empty;
  LogChunk c;
  c.size = log.size();
  c.offset = std::min<uint64_t>(offset, log.size());
  c.data = log.substr(c.offset, max_bytes);
  c.next_offset = c.offset + c.data.size();
  return c;
}

std::string FakeExecutor::ReadLogTail(int64_t job_id, int attempt, const std::string& replica,
                                      size_t max_bytes) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find({job_id, attempt, replica});
  if (!r) return "";
  return r->log.size() <= max_bytes ? r->log : r->log.substr(r->log.size() - max_bytes);
}

std::string FakeExecutor::ReadTelemetry(int64_t job_id, int attempt, const std::string& replica,
                                        size_t max_bytes) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find({job_id, attempt, replica});
  return r ? std::string(TailWholeLines(r->telemetry, max_bytes)) : "";
}

int64_t FakeExecutor::LastActivityUs(int64_t job_id, int attempt,
                                     const std::string& replica) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find({job_id, attempt, replica});
  return r ? r->last_activity_us : 0;
}

TrialMetrics FakeExecutor::ReadTrialMetrics(int64_t job_id, int attempt, const std::string& replica,
                                            size_t max_bytes, int64_t unchanged_stamp) const {
  std::lock_guard lock(mu_);
  TrialMetrics out;
  const Replica* r = Find({job_id, attempt, replica});
  if (!r) return out;
  out.stamp = r->metrics_changes;
  if (out.stamp == 0 || out.stamp == unchanged_stamp) return out;
  std::string pushed;
  for (const std::string& line : r->pushed) pushed += line + "\n";
  for (auto [name, text] :
       {std::pair<const char*, const std::string*>{"hypertune/output.metrics", &r->metrics},
        {"pushed.metrics", &pushed}}) {
    if (text->size() > max_bytes) {
      out.too_large.push_back(name);
    } else {
      out.text += *text + "\n";
    }
  }
  return out;
}

Status FakeExecutor::AppendPushedMetrics(int64_t job_id, int attempt, const std::string& replica,
                                         const std::string& line) const {
  std::lock_guard lock(mu_);
  Replica& r = replicas_[{job_id, attempt, replica}];
  r.status.name = replica;
  r.pushed.push_back(line);
  ++r.metrics_changes;
  return OkStatus();
}

fs::path FakeExecutor::MetricFilePath(int64_t job_id, int attempt,
                                      const std::string& replica) const {
  return ReplicaDir(job_id, attempt, replica) / "hypertune" / "output.metrics";
}

fs::path FakeExecutor::SupervisorLog(int64_t job_id, int attempt,
                                     const std::string& replica) const {
  return ReplicaDir(job_id, attempt, replica) / "runner.log";
}

void FakeExecutor::FailNextLaunch(Status status) {
  std::lock_guard lock(mu_);
  fail_next_launch_ = std::move(status);
}

void FakeExecutor::SetCancelEndsAtOnce(bool at_once) {
  std::lock_guard lock(mu_);
  cancel_ends_at_once_ = at_once;
}

void FakeExecutor::SetNow(int64_t now_us) {
  std::lock_guard lock(mu_);
  now_us_ = now_us;
}

void FakeExecutor::SetStartingMessage(const Key& key, const std::string& message) {
  std::lock_guard lock(mu_);
  Replica& r = At(key);
  r.status.phase = ReplicaPhase::kStarting;
  r.status.message = message;
}

void FakeExecutor::SetRunning(const Key& key, int64_t start_us) {
  std::lock_guard lock(mu_);
  Replica& r = At(key);
  r.status.phase = ReplicaPhase::kRunning;
  r.status.message.clear();
  r.status.start_us = start_us;
  r.last_activity_us = std::max(r.last_activity_us, start_us);
}

void FakeExecutor::End(const Key& key, EndState end_state, std::optional<int> exit_code,
                       std::optional<int> signal, const std::string& message, int64_t end_us) {
  std::lock_guard lock(mu_);
  Replica& r = At(key);
  r.status.phase = ReplicaPhase::kEnded;
  r.status.end_state = end_state;
  r.status.exit_code = exit_code;
  r.status.signal = signal;
  r.status.message = message;
  r.status.end_us = end_us;
}

void FakeExecutor::Exit(const Key& key, int exit_code, int64_t end_us) {
  End(key, EndState::kExited, exit_code, std::nullopt,
      "exited with code " + std::to_string(exit_code), end_us);
}

void FakeExecutor::Kill(const Key& key, int signal, int64_t end_us) {
  End(key, EndState::kSignaled, std::nullopt, signal,
      "killed by signal " + std::to_string(signal) + " (" + runner::SignalName(signal) + ")",
      end_us);
}

void FakeExecutor::TimeOut(const Key& key, int64_t end_us) {
  End(key, EndState::kTimeout, std::nullopt, SIGTERM, "timed out; stopped with SIGTERM", end_us);
}

void FakeExecutor::FailLaunch(const Key& key, const std::string& message, int64_t end_us) {
  End(key, EndState::kLaunchFailed, std::nullopt, std::nullopt, "launch failed: " + message,
      end_us);
}

void FakeExecutor::EndCancelled(const Key& key, int64_t end_us) {
  End(key, EndState::kCancelled, std::nullopt, SIGTERM, "cancelled; stopped with SIGTERM", end_us);
}

void FakeExecutor::EndPreempted(const Key& key, const std::string& message, int64_t end_us) {
  End(key, EndState::kCancelled, std::nullopt, SIGTERM, message, end_us);
  std::lock_guard lock(mu_);
  At(key).status.preempted = true;
}

void FakeExecutor::Lose(const Key& key, const std::string& message) {
  std::lock_guard lock(mu_);
  Replica& r = At(key);
  r.status.phase = ReplicaPhase::kLost;
  r.status.message = message;
}

void FakeExecutor::SetLastActivity(const Key& key, int64_t us) {
  std::lock_guard lock(mu_);
  At(key).last_activity_us = us;
}

void FakeExecutor::AppendLog(const Key& key, const std::string& text) {
  std::lock_guard lock(mu_);
  At(key).log += text;
}

void FakeExecutor::SetMetrics(const Key& key, const std::string& text) {
  std::lock_guard lock(mu_);
  Replica& r = At(key);
  r.metrics = text;
  ++r.metrics_changes;
}

void FakeExecutor::SetTelemetry(const Key& key, const std::string& text) {
  std::lock_guard lock(mu_);
  At(key).telemetry = text;
}

std::vector<JobLaunch> FakeExecutor::launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}

std::vector<FakeExecutor::CancelCall> FakeExecutor::cancels() const {
  std::lock_guard lock(mu_);
  return cancels_;
}

bool FakeExecutor::launched(const Key& key) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find(key);
  return r && r->launched;
}

bool FakeExecutor::cancel_requested(const Key& key) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find(key);
  return r && r->cancel_requested;
}

std::vector<std::string> FakeExecutor::pushed_metrics(const Key& key) const {
  std::lock_guard lock(mu_);
  const Replica* r = Find(key);
  return r ? r->pushed : std::vector<std::string>{};
}

ReplicaStatus FakeExecutor::status(const Key& key) const {
  std::lock_guard lock(mu_);
  if (const Replica* r = Find(key)) return r->status;
  ReplicaStatus st;
  st.name = key.replica;
  st.phase = ReplicaPhase::kLost;
  st.message = "never launched (FakeExecutor)";
  return st;
}

bool FakeExecutor::HasJobFiles(int64_t job_id) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, r] : replicas_) {
    if (key.job_id == job_id) return true;
  }
  return false;
}

Result<bool> FakeExecutor::RemoveJobFiles(int64_t job_id) {
  std::lock_guard lock(mu_);
  for (const auto& [key, r] : replicas_) {
    if (key.job_id == job_id &&
        (r.status.phase == ReplicaPhase::kStarting || r.status.phase == ReplicaPhase::kRunning)) {
      return false;
    }
  }
  std::erase_if(replicas_, [&](const auto& e) { return e.first.job_id == job_id; });
  return true;
}

}  // namespace stoker::exec
