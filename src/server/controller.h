// The control loop: the one thread that changes job state (DESIGN.md §2).
//
// It owns the in-memory view of active jobs and what they hold; the
// scheduling policy (scheduler/policy.h) decides which queued job starts
// where, from a snapshot the loop builds when something changed. API handlers tell it about new
// jobs and cancel requests after they are durable in the store; it also finds them on its own at
// start (Recover), so a crash between the store commit and the notification loses nothing. Each
// state change is committed to the store before anything acts on it, and a launch is idempotent, so
// a crash anywhere is resolved by recovery.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "admission/admission.h"
#include "api/control_plane.h"
#include "api/daemon_metrics.h"
#include "common/clock.h"
#include "cost/accounting.h"
#include "exec/environments.h"
#include "exec/executor.h"
#include "resources/nvml.h"
#include "resources/resources.h"
#include "scheduler/placement.h"
#include "scheduler/policy.h"
#include "scheduler/run_history.h"
#include "server/config.h"
#include "server/study_driver.h"
#include "server/warm_holdings.h"
#include "spec/custom_job.h"
#include "spec/study.h"
#include "storage/buckets.h"
#include "store/store.h"
#include "tune/sampler.h"

namespace stoker::server {

// What the controller works with. Every pointer must outlive it.
struct ControllerDeps {
  const Config* config = nullptr;
  const resources::Node* node = nullptr;  // the local executor's inventory
  store::Store* store = nullptr;
  exec::Executor* executor = nullptr;
  storage::Buckets* buckets = nullptr;
  const exec::Environments* environments = nullptr;
  const admission::Admission* admission = nullptr;  // the trials the study driver starts
  const Clock* clock = &SystemClock();              // every time it reads or stamps
  cost::Accountant* accountant = nullptr;           // budgets to enforce; null = none
  // Reads the node's GPUs (resources::QueryGpuUsage) for the ledger's
  // telemetry; null = no telemetry (GPUs declared in the config, tests).
  std::function<std::vector<resources::GpuUsage>()> sample_gpus;
  // Where the loop counts its passes, scheduling times, first starts and
  // GPU samples for GET /metrics (docs/metrics.md); null = nowhere.
  api::DaemonMetrics* metrics = nullptr;
};

class Controller final : public api::ControlPlane, private TrialJobs {
 public:
  explicit Controller(ControllerDeps deps);
  ~Controller() override;

  // Recover, then start the loop thread (which calls RunOnce whenever told
  // of something, and every poll_interval_ms).
  Status Start();
  // Stops the loop thread. Running replicas keep running.
  void Stop();

  // The loop's two steps, for a caller that drives the loop itself (tests)
  // instead of Start; never while the loop thread runs.
  // Recover: loads active jobs and studies from the store (re-adopting
  // running replicas), stops replicas of jobs that ended, rebuilds fair share.
  Status Recover();
  // One turn: takes the notifications, polls replicas, judges attempts,
  // drives studies, schedules, applies retention.
  void RunOnce();

  // api::ControlPlane: thread-safe notifications from API handlers after
  // the store commit, and the views of the last decision.
  void Submitted(const store::JobRecord& job) override;
  void CancelRequested(int64_t job_id) override;
  void StudySubmitted(int64_t study_id) override;
  void StudyCancelRequested(int64_t study_id) override;
  void NoteJobEvent(int64_t job_id, const std::string& note) override;
  std::vector<QueueEntry> Queue() const override;
  nlohmann::json Nodes() const override;

 private:
  struct Active {
    store::JobRecord rec;
    spec::CustomJob job;
    std::vector<scheduler::ReplicaRequest> requests;  // what each replica asks for
    std::vector<std::string> replicas;                // names, once placed
    std::vector<scheduler::PlacedReplica> placed;     // what the current attempt holds
    int64_t last_cancel_us = 0;
    int64_t placed_us = 0;
    int64_t wait_event_us = 0;    // last "waiting: ..." event
    std::string wait_event_kind;  // its scheduler::WaitKind
    int wait_jobs_ahead = -1;     // rec.wait_reason is "N jobs ahead" with this N; -1 = not
    std::map<std::string, int64_t> hung_since_us;  // replicas reported hung, by name
    int64_t hang_check_us = 0;
    // GPU telemetry of the current attempt, by replica, for its ledger rows.
    struct Telemetry {
      double sampled_s = 0;
      double busy_gpu_s = 0;
      double energy_j = 0;
      bool energy_known = true;
    };
    std::map<std::string, Telemetry> telemetry;
    // Since when every GPU of the job has been under 15% busy (0: not
    // idle), and the job.gpu_idle hooks (by index) told of this stretch.
    int64_t gpu_idle_since_us = 0;
    std::set<size_t> gpu_idle_told;
    // LastCheckpointUs's cache: the newest checkpoint's time, and when looked.
    int64_t checkpoint_us = 0;
    int64_t checkpoint_looked_us = 0;
    std::vector<store::UsageRecord> recorded_usage;  // RecordUsage's rows, for Drain
    std::string run_shape;  // scheduler::ShapeKey of rec.spec; "" = not computed yet
  };
  struct Draining {  // ended attempts whose replicas are still being stopped
    std::vector<std::string> replicas;
    std::vector<scheduler::PlacedReplica> placed;
    std::string user;
    int priority = 0;
    std::set<int> ports;  // CLUSTER_SPEC ports it was given: not handed out again
    // The attempt's ledger rows as written when it was judged; written again
    // with the replicas' real end times once they are gone (the grace counts).
    std::vector<store::UsageRecord> usage;
  };

  // TrialJobs: the study driver stored a trial job, or a cancel of one.
  void TrialJobStored(const store::JobRecord& job) override { Adopt(job); }
  void TrialJobCancelRequested(int64_t job_id) override;

  void Loop();
  void Tick();
  void Adopt(store::JobRecord rec);
  void HandleCancel(Active& a);
  void PollJob(Active& a);
  void Schedule();
  // Builds the policy's view of the cluster and updates usage_ to `now_us`.
  scheduler::Snapshot TakeSnapshot(int64_t now_us);
  // What makes a job similar to others in run_history_.
  static scheduler::RunKey RunKeyOf(const store::JobRecord& rec);
  // run_history_'s expected run time of an active job (0 = unknown).
  int64_t ExpectedRunS(Active& a);
  // Decays usage_ to `now_us` and adds the GPU time held since the last call.
  void AccrueUsage(int64_t now_us);
  // Sets usage_ from the store's history (jobs that held GPUs, ended or
  // still running), so that fair share survives a restart (fair_share.h).
  void RebuildUsage(int64_t now_us);
  void StartPlaced(Active& a, const scheduler::StartJob& start, const std::string& ahead_of);
  // Fails a job past its maxWaitDuration; otherwise adds its new wait reason
  // (and an event, when due) to `notes`, which Schedule commits at once.
  void RecordWait(Active& a, const scheduler::WaitingJob& w, int64_t now_us,
                  std::vector<store::Store::WaitNote>& notes);
  void PublishViews(const scheduler::Snapshot& snap, const scheduler::Decision& d);
  // Executors that place replicas themselves (Slurm): launch queued jobs at once.
  void HandOverQueued();
  // Restarts the whole gang as the next attempt when the job's retry rules
  // allow it after `what` (a replica failure); false when the job must fail.
  bool Retry(Active& a, const std::string& what, bool infrastructure, bool worker);
  // Stops the current attempt (Drain) and queues the job again as attempt
  // *u.attempt with `reason` as the event; false if the store refused.
  bool Requeue(Active& a, const std::string& reason, store::TransitionUpdate u);
  // Preemption (scheduler rule 9, or the executor's own): records the
  // attempt's usage, stops it with the preemption grace and requeues the
  // job with the same checkpoint directory; `by` names who preempted it.
  // `stop`: Stoker stops the replicas (false: the executor already does,
  // with its own grace). Never counts against maxRetries.
  void Preempt(Active& a, const std::string& by, bool stop = true);
  // When the job's unsaved work began, for rule 9: the newest file in its
  // AIP_CHECKPOINT_DIR (looked at most every 10 s), or its attempt's start.
  int64_t LastCheckpointUs(Active& a, int64_t now_us);
  // How many retries the job's rules allow after such a failure, and whether one is left.
  int RetryLimit(const Active& a, bool infrastructure, bool worker) const;
  bool CanRetry(const Active& a, bool infrastructure, bool worker) const;
  // Writes the ended attempt's rows to the usage ledger (replica times from `st`).
  // Keeps them in a.recorded_usage, which Drain hands to the draining attempt.
  void RecordUsage(Active& a, const std::vector<exec::ReplicaStatus>& st, const std::string& end);
  // Every 10 s when budgets exist: a warning event on the running jobs of a
  // budget past its threshold (once a month), and a cancel of the jobs (and
  // their studies) of a budget whose hard limit is reached with stopRunning.
  void EnforceBudgets();
  // job.gpu_idle: tells each hook that asked once the job's GPUs have been
  // under 15% busy for its gpu_idle_minutes (again after a busy spell).
  void CheckGpuIdle(Active& a, double busy_percent, int64_t since_us, int64_t now_us);
  // Every gpu_telemetry_seconds: reads the GPUs' utilisation and energy and
  // adds each running replica's share (its booked fractions) to its telemetry.
  void SampleGpus();
  void CheckHung(Active& a, const std::vector<exec::ReplicaStatus>& st);
  // Stops the current attempt's replicas; their resources stay held until they are gone.
  void Drain(Active& a);
  Status Launch(Active& a);
  // For a package in the staging bucket: its content must still have the
  // SHA-256 its name says (checked once per version of the file).
  Status VerifyStaged(const std::string& uri, const std::filesystem::path& path,
                      const std::string& field) const;
  // `notes`: the job's events it found (which path runs each pool's image,
  // mounts left out), for Launch to write after the executor's launch.
  Result<exec::JobLaunch> BuildLaunch(const Active& a, std::vector<std::string>& notes);
  // Commits a transition and updates the in-memory record; false if the store refused.
  bool Move(Active& a, spec::JobState to, const std::string& reason,
            store::TransitionUpdate update = {});
  void Finish(Active& a, spec::JobState to, const std::string& reason, int error_code,
              const std::string& error_message);
  std::string LogTail(const Active& a, const std::string& replica) const;
  // Adds `note` as an event of job `job_id` unless the job already has an
  // event with exactly that reason (NoteJobEvent's once).
  void RecordNote(int64_t job_id, const std::string& note);

  const Config& config_;
  const resources::Node& node_;
  store::Store& store_;
  exec::Executor& executor_;
  storage::Buckets& buckets_;
  const exec::Environments& environments_;
  const Clock& clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<store::JobRecord> inbox_submitted_;
  std::set<int64_t> inbox_cancel_;
  std::set<int64_t> inbox_studies_;
  std::set<int64_t> inbox_study_cancel_;
  std::vector<std::pair<int64_t, std::string>> inbox_notes_;  // NoteJobEvent, bounded

  // Loop-thread state.
  std::map<int64_t, Active> active_;
  // Staged packages whose content was checked against their name, by path:
  // "inode:size:mtime" when checked (a changed file is checked again).
  mutable std::map<std::string, std::string> verified_packages_;
  std::map<std::pair<int64_t, int>, Draining> draining_;  // by (job, attempt)
  std::map<std::string, double> usage_;  // decayed GPU-seconds per user (fair share)
  // How long similar jobs ran (the queue's estimated starts, policy.h rule
  // 8): successful runs from the store at start, then as they end.
  scheduler::RunHistory run_history_;
  WarmHoldings warm_holdings_{config_.data_dir / "warm"};  // booked when warm starts are on
  cost::Accountant* accountant_;
  std::function<std::vector<resources::GpuUsage>()> sample_gpus_;
  // GET /metrics' measurements (ControllerDeps::metrics); may be null.
  api::DaemonMetrics* metrics_;
  int64_t gpu_sample_us_ = 0;              // the last sample
  std::map<int, uint64_t> gpu_energy_mj_;  // each GPU's energy counter at it
  int64_t budget_check_us_ = 0;
  std::set<std::string> budget_warned_;  // "scope month" already warned about
  // (job, note) pairs of NoteJobEvent already recorded; a cache of the
  // store's events, cleared when it grows past a bound.
  std::set<std::pair<int64_t, std::string>> noted_;
  int64_t usage_us_ = 0;        // when usage_ was last brought up to date
  bool schedule_dirty_ = true;  // something changed since the last decision
  int64_t last_schedule_us_ = 0;

  // Views for the API, replaced after each decision.
  mutable std::mutex view_mu_;
  std::vector<QueueEntry> queue_view_;
  nlohmann::json nodes_view_ = nlohmann::json::object();
  std::thread thread_;
  RetentionState retention_;
  StudyDriver studies_;  // the tuning jobs; loop thread only  // finished replica dirs
                         // (retention.h); loop thread only
};

}  // namespace stoker::server
