// FakeExecutor: a working, deterministic, in-memory Executor for tests of
// the code that drives executors (the controller). Nothing runs: the test
// says what each replica does, and Poll reports it.
//
//   FakeExecutor ex(tmp_dir);
//   ... controller launches job 7 ...
//   ex.SetRunning({7, 0, "workerpool0-0"}, /*start_us=*/1000);
//   ex.AppendLog({7, 0, "workerpool0-0"}, "epoch 1\n");
//   ex.Exit({7, 0, "workerpool0-0"}, /*exit_code=*/0, /*end_us=*/2000);
//
// Executor contract, as the real executors keep it:
// - Launch is idempotent on (job, attempt, replica name): a replica launched
//   before keeps its state. Every successful call is recorded (launches()).
//   FailNextLaunch(s) makes the next call return `s` and record nothing.
// - Poll reports a launched replica as kStarting until the test changes it,
//   and a replica never launched as kLost (like a missing replica directory).
// - Cancel records the call (cancels()) and ends every live replica named as
//   cancelled at once; with SetCancelEndsAtOnce(false) the replicas keep
//   running (as during the grace period) until the test ends them, and
//   cancel_requested(key) tells whether one was asked to stop.
// - The reads return what the test put; ReplicaDir is <root>/jobs/<job>/
//   [attempt-<n>/]<replica>, as for LocalExecutor, but nothing is created.
//
// Thread-safe: every method takes one mutex, so API threads may read while
// the control loop (or the test) drives it. The test-side methods accept
// replicas not launched yet and create them, so a test may set the scene
// before the code under test launches (Launch then keeps that state).
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace stoker::exec {

class FakeExecutor : public Executor {
 public:
  // Which replica: (job, attempt, replica name).
  struct Key {
    int64_t job_id = 0;
    int attempt = 0;
    std::string replica;
    auto operator<=>(const Key&) const = default;
  };
  struct CancelCall {
    int64_t job_id = 0;
    int attempt = 0;
    std::vector<std::string> replicas;
  };

  // `root`: the directory ReplicaDir and MetricFilePath point into (a test's
  // temp dir); never touched. `places_replicas`: what PlacesReplicas says
  // (true to act like Slurm).
  explicit FakeExecutor(std::filesystem::path root, bool places_replicas = false);

  // ---- Executor ----
  std::filesystem::path ReplicaDir(int64_t job_id, int attempt,
                                   const std::string& replica) const override;
  Status Launch(const JobLaunch& launch) override;
  Result<std::vector<ReplicaStatus>> Poll(int64_t job_id, int attempt,
                                          const std::vector<std::string>& replicas) override;
  Status Cancel(int64_t job_id, int attempt, const std::vector<std::string>& replicas) override;
  bool PlacesReplicas() const override { return places_replicas_; }
  Result<LogChunk> ReadLog(int64_t job_id, int attempt, const std::string& replica, uint64_t offset,
                           size_t max_bytes) const override;
  std::string ReadLogTail(int64_t job_id, int attempt, const std::string& replica,
                          size_t max_bytes) const override;
  int64_t LastActivityUs(int64_t job_id, int attempt, const std::string& replica) const override;
  // The stamp counts the changes made through SetMetrics and
  // AppendPushedMetrics (0 until the first). `max_bytes` applies to each of
  // the two sources, as in the real executors.
  TrialMetrics ReadTrialMetrics(int64_t job_id, int attempt, const std::string& replica,
                                size_t max_bytes, int64_t unchanged_stamp = -1) const override;
  Status AppendPushedMetrics(int64_t job_id, int attempt, const std::string& replica,
                             const std::string& line) const override;
  // What SetTelemetry gave the replica ("" until then), tailed as the
  // real executors do.
  std::string ReadTelemetry(int64_t job_id, int attempt, const std::string& replica,
                            size_t max_bytes) const override;
  std::filesystem::path MetricFilePath(int64_t job_id, int attempt,
                                       const std::string& replica) const override;
  std::filesystem::path SupervisorLog(int64_t job_id, int attempt,
                                      const std::string& replica) const override;
  // True while any replica of the job is known and its files were not
  // removed; RemoveJobFiles refuses while one is kStarting or kRunning.
  bool HasJobFiles(int64_t job_id) const override;
  Result<bool> RemoveJobFiles(int64_t job_id) override;

  // ---- driving it from a test ----
  void FailNextLaunch(Status status);
  void SetCancelEndsAtOnce(bool at_once);
  // The end time Cancel gives the replicas it ends (default 0): the fake
  // has no clock of its own.
  void SetNow(int64_t now_us);

  // kStarting with a message (the wait reason an executor that places
  // replicas gives).
  void SetStartingMessage(const Key& key, const std::string& message);
  // kRunning since `start_us`; also its last activity.
  void SetRunning(const Key& key, int64_t start_us);
  // kEnded: exited with `exit_code` ("exited with code N").
  void Exit(const Key& key, int exit_code, int64_t end_us);
  // kEnded: killed by `signal` ("killed by signal 9 (SIGKILL)").
  void Kill(const Key& key, int signal, int64_t end_us);
  // kEnded: stopped at the timeout ("timed out; stopped with SIGTERM").
  void TimeOut(const Key& key, int64_t end_us);
  // kEnded: no trainer ran ("launch failed: <message>").
  void FailLaunch(const Key& key, const std::string& message, int64_t end_us);
  // kEnded: cancelled (what Cancel does at once).
  void EndCancelled(const Key& key, int64_t end_us);
  // kEnded: cancelled by the executor's own scheduler to make room
  // (ReplicaStatus::preempted, as Slurm's PREEMPTED state).
  void EndPreempted(const Key& key, const std::string& message, int64_t end_us);
  // kLost with `message` (the supervisor died without a status).
  void Lose(const Key& key, const std::string& message);
  // The replica's last progress (LastActivityUs), e.g. long ago to make it hang.
  void SetLastActivity(const Key& key, int64_t us);
  // Appends to the replica's log stream (ReadLog, ReadLogTail).
  void AppendLog(const Key& key, const std::string& text);
  // Replaces what the trainer wrote to its metrics file.
  void SetMetrics(const Key& key, const std::string& text);
  // The replica's telemetry.jsonl text (telemetry::FormatPoint lines).
  void SetTelemetry(const Key& key, const std::string& text);

  // ---- what the code under test did ----
  std::vector<JobLaunch> launches() const;  // successful Launch calls, in order
  std::vector<CancelCall> cancels() const;  // every Cancel call, in order
  bool launched(const Key& key) const;      // named by a successful Launch
  bool cancel_requested(const Key& key) const;
  // The lines AppendPushedMetrics got for the replica.
  std::vector<std::string> pushed_metrics(const Key& key) const;
  // What Poll would report now (kLost when never launched).
  ReplicaStatus status(const Key& key) const;

 private:
  struct Replica {
    ReplicaStatus status;
    bool launched = false;
    bool cancel_requested = false;
    int64_t last_activity_us = 0;
    std::string log;
    std::string metrics;
    std::string telemetry;
    std::vector<std::string> pushed;
    int64_t metrics_changes = 0;
  };

  Replica& At(const Key& key);                // creates it (kStarting); mu_ held
  const Replica* Find(const Key& key) const;  // mu_ held
  void End(const Key& key, EndState end_state, std::optional<int> exit_code,
           std::optional<int> signal, const std::string& message, int64_t end_us);

  const std::filesystem::path root_;
  const bool places_replicas_;
  mutable std::mutex mu_;                    // guards everything below
  mutable std::map<Key, Replica> replicas_;  // mutable: AppendPushedMetrics is const
  std::optional<Status> fail_next_launch_;
  bool cancel_ends_at_once_ = true;
  int64_t now_us_ = 0;
  std::vector<JobLaunch> launches_;
  std::vector<CancelCall> cancels_;
};

}  // namespace stoker::exec
