// SlurmExecutor: one Slurm batch job per Stoker job attempt; each Slurm task
// runs `stoker-run --slurm --job-dir DIR`, which supervises one replica
// exactly as in local mode (docs/slurm.md, docs/decisions/0007).
//
// Files, under <shared_dir>/jobs/<job>/[attempt-<n>/] (the "job dir", which
// every node must see at the same path):
//   slurm.json        the intent: Slurm job name, comment and the replicas in
//                     task order. Synced before sbatch runs.
//   slurm.sbatch      the batch script (#SBATCH options, then srun).
//   slurm-job-id      the Slurm job id, synced once sbatch answered.
//   slurm-<id>.out    the batch script's own output (srun's diagnostics).
//   <replica>/        replica directories, as for the local executor.
//
// Launch is idempotent: with slurm-job-id present it does nothing; without
// it, a job carrying this attempt's name and comment that Slurm still knows
// is adopted instead of submitting again. Even a second submission could not
// run a trainer twice: each replica's `claim` file admits one supervisor.
//
// Poll reads the replica files (never blocking on trainers) and, for
// replicas no supervisor has claimed yet, Slurm's view of the job from one
// `squeue` for all of this user's jobs, cached for `queue_refresh_seconds`.
// A replica that ended other than by success or its own timeout, or was
// lost, while this daemon had not cancelled the attempt, is checked against
// a squeue taken after Poll first saw that end: if Slurm preempted the job
// (SlurmPreempted), the replica is reported with `preempted` set (and any
// replica of that attempt after it, even once Stoker cancels it, and
// Cancel leaves the stopping to Slurm); if the
// Slurm job ended NODE_FAIL or BOOT_FAIL, the replica is reported lost
// (infrastructure) with Slurm's words.
// Slurm itself is asked only through a SlurmClient (slurm_client.h).
// Not thread-safe: called from the control loop only (ReplicaDir excepted).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/replica_dir_executor.h"
#include "exec/slurm_client.h"
#include "exec/trainer_account.h"

namespace stoker::exec {

// 0 when stokerd runs as root (root may give negative nice values, which
// raise a job), else 1000, since Slurm refuses negative ones from
// unprivileged users (priority 1000 then maps to 0).
int DefaultSlurmNiceBase();

struct SlurmOptions {
  std::filesystem::path shared_dir;  // holds jobs/; same path on every node
  std::filesystem::path runner;      // stoker-run; same path on every node
  // Defaults for --partition/--account/--qos; the job labels
  // slurm-partition, slurm-account and slurm-qos override them. "" = omit.
  std::string partition;
  std::string account;
  std::string qos;
  // For preemptible jobs (JobLaunch::preemptible) instead of partition/qos:
  // where Slurm may preempt them (docs/slurm.md, "Preemption"). The labels
  // still override them; "" = the defaults above.
  std::string preemptible_partition;
  std::string preemptible_qos;
  std::vector<std::string> sbatch_extra_args;  // passed to sbatch as given
  // Cancel sends SIGTERM to the job's steps (the supervisors stop their
  // trainers with SIGTERM, grace, SIGKILL); if the Slurm job is still there
  // this long after, a plain scancel follows.
  double grace_seconds = 30;
  // Tells this daemon's Slurm jobs from those of other daemons on the same
  // cluster (job ids restart at 1 in every data dir). Put in --comment.
  std::string instance;
  double queue_refresh_seconds = 1;  // how stale the cached squeue may be
  // A job's Slurm nice value is nice_base - jobSpec.scheduling.priority
  // (docs/slurm.md); DefaultSlurmNiceBase() unless set.
  int nice_base = DefaultSlurmNiceBase();
  // stokerd's data dir, which holds buckets/: a job's default output
  // directory (<data_dir>/buckets/...) is handed to its trainer account
  // (PrepareReplicaDir). Often, but not always, shared_dir; empty = shared_dir.
  std::filesystem::path data_dir;
  // Which account runs a job's trainers, with the same rule as the local
  // executor (stokerd as root: the user's unix_user, else
  // default_unix_user; root only with allow_root_trainers). When it names
  // one, Launch puts it in launch.json (stoker-run, root in the Slurm task
  // like stokerd, switches to it) and hands the replica directories in the
  // shared dir to it; the job dir with its control files stays the
  // daemon's (PrepareReplicaDir). Empty: trainers run as the Slurm job's user.
  TrainerAccounts trainer_accounts;
  // Filesystem isolation of every trainer (config job_isolation), as for the
  // local executor: Launch adds the job's directory in the shared dir to the
  // kept paths. stoker-run applies it on the node that runs the task (in
  // auto mode, where that node's kernel allows it).
  IsolationPlan isolation;
};

// The --nice value for a job of Stoker priority `priority`.
int SlurmNice(int priority, const SlurmOptions& options);

// "stoker-<job>-<attempt>".
std::string SlurmJobName(int64_t job_id, int attempt);
// "stoker:<job>:<attempt>:<instance>".
std::string SlurmComment(const std::string& instance, int64_t job_id, int attempt);

// The batch script for `launch` (pure). InvalidArgument naming the label
// when a slurm-* label holds characters Slurm option values cannot have.
// --partition and --qos: the job's slurm-partition/slurm-qos label, else
// for a preemptible job (launch.preemptible)
// options.preemptible_partition/preemptible_qos, else options.partition/qos.
// Shape: the largest cpus/memory/gpus of any replica, for every task;
// without GPUs `--ntasks=R` (Slurm may pack tasks on a node), with GPUs one
// task per node (`--nodes=R --ntasks-per-node=1 --gres=gpu:N`). `--time` is
// the timeout plus the grace plus 2 minutes, in whole minutes: stoker-run
// enforces the exact timeout, Slurm's limit is the backstop. Always
// `--no-requeue`: a Stoker attempt runs at most once; retries are new
// attempts that Stoker decides on. That holds for preemption too: under
// PreemptMode=REQUEUE Slurm cannot requeue such a job and kills it instead,
// which Poll reports as preempted; Stoker submits the next attempt
// (docs/decisions/0027). `--nice` from the job's priority (SlurmNice),
// left out when 0.
Result<std::string> SlurmBatchScript(const JobLaunch& launch, const SlurmOptions& options,
                                     const std::filesystem::path& job_dir);

class SlurmExecutor : public ReplicaDirExecutor {
 public:
  // `client`: how Slurm is asked (null: CommandSlurmClient, the real
  // commands). `mono_us`: a monotonic clock in microseconds for the squeue
  // cache and the cancel grace (null: std::chrono::steady_clock). Tests pass
  // FakeSlurmClient and a fake clock.
  explicit SlurmExecutor(SlurmOptions options, std::unique_ptr<SlurmClient> client = nullptr,
                         std::function<int64_t()> mono_us = nullptr);

  std::filesystem::path ReplicaDir(int64_t job_id, int attempt,
                                   const std::string& replica) const override;
  Status Launch(const JobLaunch& launch) override;
  Result<std::vector<ReplicaStatus>> Poll(int64_t job_id, int attempt,
                                          const std::vector<std::string>& replicas) override;
  Status Cancel(int64_t job_id, int attempt, const std::vector<std::string>& replicas) override;
  bool PlacesReplicas() const override { return true; }
  // The batch job's output, <job dir>/slurm-<id>.out: stoker-run runs in
  // the foreground of its Slurm task, so its diagnostics go there.
  std::filesystem::path SupervisorLog(int64_t job_id, int attempt,
                                      const std::string& replica) const override;

 private:
  struct Attempt {  // what this daemon knows about one submitted attempt
    int64_t slurm_id = 0;
    int64_t known_since_us = 0;  // when this daemon learned the id (monotonic)
    int64_t term_sent_us = 0;    // first graceful scancel (monotonic), 0 = none
    bool killed = false;         // the plain scancel was sent
    // Slurm's word on why a replica ended unexpectedly (see Poll), asked
    // once: empty until asked; then `preempted` or `node_failed` with the
    // message, or neither.
    bool judged = false;
    bool preempted = false;
    bool node_failed = false;
    std::string slurm_says;
  };

  std::filesystem::path JobDir(int64_t job_id, int attempt) const;
  // The attempt's Slurm id from memory, slurm-job-id, or (after a crash
  // before the id was recorded) squeue by name and comment. nullopt: none.
  Result<std::optional<Attempt*>> Find(int64_t job_id, int attempt, bool ask_slurm);
  // Slurm's view of every job of this user, at most queue_refresh_seconds
  // old and never older than `not_before_us`.
  Result<const std::map<int64_t, SlurmJobInfo>*> Queue(int64_t not_before_us);
  // Asks Slurm (once per attempt) why the attempt's replicas ended without
  // this daemon's cancel; fills a.judged and what follows it.
  Status JudgeUnexpectedEnd(Attempt& a);

  SlurmOptions options_;
  std::unique_ptr<SlurmClient> client_;
  std::function<int64_t()> mono_us_;
  std::map<std::pair<int64_t, int>, Attempt> attempts_;
  std::map<int64_t, SlurmJobInfo> queue_;
  int64_t queue_taken_us_ = -1;
};

// The id in <data_dir>/slurm-instance, created (random) on first use.
Result<std::string> LoadOrCreateSlurmInstance(const std::filesystem::path& data_dir);

}  // namespace stoker::exec
