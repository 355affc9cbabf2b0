#include "exec/slurm_executor.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/files.h"
#include "common/strings.h"
#include "exec/replica_files.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Single-quoted for sh.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Slurm option values from labels or config go into #SBATCH lines: allow
// what partition, account and QOS names use, nothing that could end a line.
Status CheckSlurmName(const std::string& value, const std::string& field) {
  for (char c : value) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && !std::strchr("_.,:-+", c)) {
      return InvalidArgument(field + ": '" + value +
                             "' is not a Slurm partition/account/QOS name (use letters, digits "
                             "and _.,:-+)");
    }
  }
  return OkStatus();
}

// What a replica of a job Slurm preempted says (ReplicaStatus::message).
std::string PreemptedMessage(int64_t slurm_id, const SlurmJobInfo& info) {
  std::string where = info.partition.empty() ? "" : " in partition " + info.partition;
  std::string when = info.preempt_time.empty() ? "" : " at " + info.preempt_time;
  std::string state = info.state.empty() ? "" : ", now " + info.state;
  return "preempted by Slurm (job " + std::to_string(slurm_id) + where + when + state + ")";
}

}  // namespace

int DefaultSlurmNiceBase() { return ::geteuid() == 0 ? 0 : 1000; }

int SlurmNice(int priority, const SlurmOptions& options) { return options.nice_base - priority; }

std::string SlurmJobName(int64_t job_id, int attempt) {
  return "stoker-" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

std::string SlurmComment(const std::string& instance, int64_t job_id, int attempt) {
  return "stoker:" + std::to_string(job_id) + ":" + std::to_string(attempt) + ":" + instance;
}

Result<std::string> SlurmBatchScript(const JobLaunch& launch, const SlurmOptions& options,
                                     const fs::path& job_dir) {
  if (launch.replicas.empty()) return InvalidArgument("a Slurm job needs at least one replica");
  double cpus = 0, timeout = 0, grace = 0;
  uint64_t memory = 0;
  int gpus = 0;
  for (const ReplicaLaunch& r : launch.replicas) {
    cpus = std::max(cpus, r.cpus);
    memory = std::max(memory, r.memory_bytes);
    gpus = std::max(gpus, r.gpus);
    timeout = std::max(timeout, r.timeout_seconds);
    grace = std::max(grace, r.grace_seconds);
  }
  // The label, else the first non-empty config value; errors name where
  // the value came from.
  using Source = std::pair<std::string, std::string>;  // config key, value
  auto pick = [&](const std::string& label, std::vector<Source> config) -> Result<std::string> {
    Source from{"labels." + label, ""};
    if (auto it = launch.labels.find(label); it != launch.labels.end()) {
      from.second = it->second;
    } else {
      from = {"slurm." + label.substr(6), ""};
      for (const Source& c : config) {
        if (!c.second.empty()) {
          from = c;
          break;
        }
      }
    }
    STOKER_RETURN_IF_ERROR(CheckSlurmName(from.second, from.first));
    return from.second;
  };
  auto if_preemptible = [&](const std::string& key, const std::string& value) {
    return launch.preemptible ? Source{key, value} : Source{key, ""};
  };
  STOKER_ASSIGN_OR_RETURN(std::string partition,
                          pick("slurm-partition", {if_preemptible("slurm.preemptible_partition",
                                                                  options.preemptible_partition),
                                                   {"slurm.partition", options.partition}}));
  STOKER_ASSIGN_OR_RETURN(std::string account,
                          pick("slurm-account", {{"slurm.account", options.account}}));
  STOKER_ASSIGN_OR_RETURN(
      std::string qos,
      pick("slurm-qos", {if_preemptible("slurm.preemptible_qos", options.preemptible_qos),
                         {"slurm.qos", options.qos}}));

  int tasks = static_cast<int>(launch.replicas.size());
  int cpus_per_task = std::max(1, static_cast<int>(std::ceil(cpus - 1e-9)));
  std::vector<std::string> opts = {
      "--job-name=" + SlurmJobName(launch.job_id, launch.attempt),
      "--comment=" + SlurmComment(options.instance, launch.job_id, launch.attempt),
      "--ntasks=" + std::to_string(tasks),
      "--cpus-per-task=" + std::to_string(cpus_per_task),
  };
  if (gpus > 0) {
    // One replica per node, as each Vertex replica is a machine of its own.
    opts.push_back("--nodes=" + std::to_string(tasks));
    opts.push_back("--ntasks-per-node=1");
    opts.push_back("--gres=gpu:" + std::to_string(gpus));
  }
  if (memory > 0) {
    uint64_t mb = (memory + (1u << 20) - 1) >> 20;
    opts.push_back("--mem-per-cpu=" + std::to_string((mb + cpus_per_task - 1) / cpus_per_task) +
                   "M");
  }
  if (timeout > 0) {
    opts.push_back("--time=" +
                   std::to_string(static_cast<int64_t>(std::ceil((timeout + grace + 120) / 60))));
  }
  // Slurm must never run an attempt a second time behind Stoker's back (a
  // node failure or preemption would otherwise requeue it).
  opts.push_back("--no-requeue");
  if (int nice = SlurmNice(launch.priority, options); nice != 0) {
    opts.push_back("--nice=" + std::to_string(nice));
  }
  if (!partition.empty()) opts.push_back("--partition=" + partition);
  if (!account.empty()) opts.push_back("--account=" + account);
  if (!qos.empty()) opts.push_back("--qos=" + qos);
  opts.push_back("--output=" + (job_dir / "slurm-%j.out").string());
  opts.push_back("--chdir=" + job_dir.string());

  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# Stoker job " << launch.job_id << " attempt " << launch.attempt
    << ": one task per replica, in the order of slurm.json.\n";
  for (const std::string& o : opts) s << "#SBATCH " << o << "\n";
  // srun in 22.05+ no longer inherits --cpus-per-task from the allocation.
  s << "exec srun --ntasks=" << tasks << " --cpus-per-task=" << cpus_per_task
    << " --distribution=block --kill-on-bad-exit=0 " << ShellQuote(options.runner.string())
    << " --slurm --job-dir " << ShellQuote(job_dir.string()) << "\n";
  return s.str();
}

Result<std::string> LoadOrCreateSlurmInstance(const fs::path& data_dir) {
  fs::path file = data_dir / "slurm-instance";
  if (auto text = ReadFile(file); text.ok() && !TrimSpace(*text).empty()) return TrimSpace(*text);
  std::random_device rd;
  char id[9];
  std::snprintf(id, sizeof id, "%08x", static_cast<unsigned>(rd()));
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(file, std::string(id) + "\n"));
  return std::string(id);
}

SlurmExecutor::SlurmExecutor(SlurmOptions options, std::unique_ptr<SlurmClient> client,
                             std::function<int64_t()> mono_us)
    : options_(std::move(options)),
      client_(client ? std::move(client) : std::make_unique<CommandSlurmClient>()),
      mono_us_(mono_us ? std::move(mono_us) : SteadyMicros) {}

fs::path SlurmExecutor::JobDir(int64_t job_id, int attempt) const {
  fs::path dir = options_.shared_dir / "jobs" / std::to_string(job_id);
  if (attempt > 0) dir /= "attempt-" + std::to_string(attempt);
  return dir;
}

fs::path SlurmExecutor::ReplicaDir(int64_t job_id, int attempt, const std::string& replica) const {
  return JobDir(job_id, attempt) / replica;
}

fs::path SlurmExecutor::SupervisorLog(int64_t job_id, int attempt, const std::string&) const {
  fs::path dir = JobDir(job_id, attempt);
  // slurm-job-id is the daemon's own control file (the job dir is the daemon's).
  if (auto text = ReadOwnFileNoFollow(dir, "slurm-job-id", 64); text.ok()) {
    std::string id = TrimSpace(*text);
    if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit)) {
      return dir / ("slurm-" + id + ".out");
    }
  }
  return dir / "slurm-%j.out";
}

Result<const std::map<int64_t, SlurmJobInfo>*> SlurmExecutor::Queue(int64_t not_before_us) {
  int64_t now = mono_us_();
  bool fresh = queue_taken_us_ >= 0 && queue_taken_us_ >= not_before_us &&
               now - queue_taken_us_ < options_.queue_refresh_seconds * 1e6;
  if (fresh) return &queue_;
  STOKER_ASSIGN_OR_RETURN(queue_, client_->Queue());
  queue_taken_us_ = now;
  return &queue_;
}

Result<std::optional<SlurmExecutor::Attempt*>> SlurmExecutor::Find(int64_t job_id, int attempt,
                                                                   bool ask_slurm) {
  auto key = std::make_pair(job_id, attempt);
  if (auto it = attempts_.find(key); it != attempts_.end()) return std::optional(&it->second);
  fs::path dir = JobDir(job_id, attempt);
  if (auto text = ReadFile(dir / "slurm-job-id"); text.ok()) {
    std::string id = TrimSpace(*text);
    if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit)) {
      // Known since before this daemon asked: any later squeue may judge it.
      Attempt& a = attempts_[key];
      a.slurm_id = std::stoll(id);
      return std::optional(&a);
    }
  }
  std::error_code ec;
  if (!ask_slurm || !fs::exists(dir / "slurm.json", ec)) return std::optional<Attempt*>();
  // The intent exists but no id was recorded: sbatch may have run just
  // before a crash. Slurm knows the job by name and comment.
  std::string comment = SlurmComment(options_.instance, job_id, attempt);
  STOKER_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                          client_->FindJobs(SlurmJobName(job_id, attempt), comment));
  if (!ids.empty()) {
    STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "slurm-job-id", std::to_string(ids[0]) + "\n"));
    Attempt& a = attempts_[key];
    a.slurm_id = ids[0];
    a.known_since_us = mono_us_();
    return std::optional(&a);
  }
  return std::optional<Attempt*>();
}

Status SlurmExecutor::Launch(const JobLaunch& launch) {
  fs::path dir = JobDir(launch.job_id, launch.attempt);
  STOKER_ASSIGN_OR_RETURN(auto found, Find(launch.job_id, launch.attempt, /*ask_slurm=*/true));
  if (found) return OkStatus();  // submitted before (a relaunch after a crash)

  STOKER_ASSIGN_OR_RETURN(std::string script, SlurmBatchScript(launch, options_, dir));
  ReplicaDirPlan plan{options_.data_dir.empty() ? options_.shared_dir : options_.data_dir,
                      options_.shared_dir / "jobs", std::nullopt, options_.isolation};
  if (options_.trainer_accounts) {
    STOKER_ASSIGN_OR_RETURN(plan.run_as, options_.trainer_accounts(launch.user));
  }
  json replicas = json::array();
  for (const ReplicaLaunch& r : launch.replicas) {
    replicas.push_back(r.name);
    STOKER_RETURN_IF_ERROR(PrepareReplicaDir(plan, launch.job_id, dir / r.name, r).status());
  }
  // The control files below are root's to trust (the batch script runs as
  // the daemon's account): PrepareReplicaDir keeps `dir` the daemon's.
  STOKER_RETURN_IF_ERROR(MakeDirs(dir));
  json intent = {{"job_name", SlurmJobName(launch.job_id, launch.attempt)},
                 {"comment", SlurmComment(options_.instance, launch.job_id, launch.attempt)},
                 {"replicas", replicas}};
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "slurm.sbatch", script, Durability::kNoSync));
  // Durable before sbatch: after a crash, the intent says "look for the job
  // in Slurm before submitting".
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "slurm.json", intent.dump(2) + "\n"));

  STOKER_ASSIGN_OR_RETURN(SbatchResult r,
                          client_->Submit(dir / "slurm.sbatch", options_.sbatch_extra_args));
  if (r.id <= 0) {
    return FailedPrecondition(
        "sbatch refused job " + std::to_string(launch.job_id) + ": " + r.refusal + " (script: " +
        (dir / "slurm.sbatch").string() + "; check slurm.partition/account/qos in the config" +
        (launch.preemptible ? ", slurm.preemptible_partition/preemptible_qos for this "
                              "preemptible job,"
                            : "") +
        " or the job's slurm-* labels)");
  }
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "slurm-job-id", std::to_string(r.id) + "\n"));
  Attempt& a = attempts_[{launch.job_id, launch.attempt}];
  a.slurm_id = r.id;
  a.known_since_us = mono_us_();
  return OkStatus();
}

Result<std::vector<ReplicaStatus>> SlurmExecutor::Poll(int64_t job_id, int attempt,
                                                       const std::vector<std::string>& replicas) {
  std::vector<ReplicaStatus> out;
  std::vector<size_t> unclaimed;
  // The supervisor may have run on another node: never signal pids from here.
  ReadStatusOptions no_kill{.kill_orphans = false};
  for (const std::string& name : replicas) {
    fs::path dir = ReplicaDir(job_id, attempt, name);
    out.push_back(ReadReplicaStatus(dir, name, no_kill));
    if (out.back().phase == ReplicaPhase::kStarting && !Claimed(dir)) {
      unclaimed.push_back(out.size() - 1);
    }
  }
  STOKER_ASSIGN_OR_RETURN(auto found, Find(job_id, attempt, /*ask_slurm=*/false));
  if (found && (*found)->term_sent_us && !(*found)->killed &&
      mono_us_() - (*found)->term_sent_us > options_.grace_seconds * 1e6) {
    // The graceful stop did not end the job within the grace: end it.
    (void)client_->Cancel((*found)->slurm_id, /*graceful=*/false);
    (*found)->killed = true;
  }
  if (found) {
    Attempt& a = **found;
    // A replica that ended as a stop from outside would (SIGTERM to its
    // supervisor, a non-zero exit, a signal) or whose supervisor died, while
    // this daemon had not cancelled the attempt: Slurm may have preempted
    // the job or lost its node. Once judged preempted, every end of the
    // attempt is a preemption, also after the controller cancels the rest.
    auto unexpected = [](const ReplicaStatus& r) {
      return r.phase == ReplicaPhase::kLost ||
             (r.phase == ReplicaPhase::kEnded && !r.Succeeded() &&
              r.end_state != EndState::kTimeout && r.end_state != EndState::kLaunchFailed);
    };
    bool ask = !a.judged && a.term_sent_us == 0 && !a.killed;
    if (ask && std::any_of(out.begin(), out.end(), unexpected)) {
      STOKER_RETURN_IF_ERROR(JudgeUnexpectedEnd(a));
    }
    for (ReplicaStatus& r : out) {
      if (!unexpected(r) || !(a.preempted || a.node_failed)) continue;
      if (a.preempted) {
        r.preempted = true;
        r.message = a.slurm_says;
      } else {
        r.phase = ReplicaPhase::kLost;
        r.end_state.reset();
        r.exit_code.reset();
        r.signal.reset();
        r.message = a.slurm_says + (r.message.empty() ? "" : " (" + r.message + ")");
      }
    }
  }
  if (unclaimed.empty()) return out;
  if (!found) {
    for (size_t i : unclaimed) out[i].message = "waiting to be submitted to Slurm";
    return out;
  }
  Attempt& a = **found;
  STOKER_ASSIGN_OR_RETURN(auto queue, Queue(a.known_since_us));
  std::string where = "Slurm job " + std::to_string(a.slurm_id);
  auto it = queue->find(a.slurm_id);
  std::string ended;  // why nothing of the job can still start the replica
  if (it == queue->end()) {
    ended = where + " is no longer known to Slurm";
  } else if (SlurmStateIsFinal(it->second.state)) {
    ended =
        where + " ended " + it->second.state +
        (it->second.reason.empty() || it->second.reason == "None" ? ""
                                                                  : " (" + it->second.reason + ")");
  }
  if (!ended.empty() && it != queue->end() && SlurmPreempted(it->second)) {
    a.judged = a.preempted = true;
    a.slurm_says = PreemptedMessage(a.slurm_id, it->second);
  }
  for (size_t i : unclaimed) {
    if (ended.empty()) {
      const SlurmJobInfo& info = it->second;
      out[i].message = info.state == "PENDING"
                           ? where + " is pending: " + info.reason
                           : where + " is " + info.state + " on " + info.nodes +
                                 "; waiting for stoker-run to start " + out[i].name;
      continue;
    }
    // The supervisor may have claimed and finished since the files were read.
    fs::path dir = ReplicaDir(job_id, attempt, out[i].name);
    out[i] = ReadReplicaStatus(dir, out[i].name, no_kill);
    if (out[i].phase != ReplicaPhase::kStarting || Claimed(dir)) continue;
    out[i].phase = ReplicaPhase::kLost;
    out[i].preempted = a.preempted;
    out[i].message =
        a.preempted
            ? a.slurm_says + " before stoker-run started " + out[i].name
            : ended + " before stoker-run started " + out[i].name + "; see " +
                  (JobDir(job_id, attempt) / ("slurm-" + std::to_string(a.slurm_id) + ".out"))
                      .string();
  }
  return out;
}

Status SlurmExecutor::JudgeUnexpectedEnd(Attempt& a) {
  // Slurm sets PreemptTime before it signals the job, so a squeue taken
  // after the end was seen tells a preemption for sure.
  int64_t seen_us = mono_us_();
  STOKER_ASSIGN_OR_RETURN(auto queue, Queue(std::max(a.known_since_us, seen_us + 1)));
  a.judged = true;
  auto it = queue->find(a.slurm_id);
  if (it == queue->end()) return OkStatus();  // past MinJobAge: Slurm cannot tell any more
  const SlurmJobInfo& info = it->second;
  if (SlurmPreempted(info)) {
    a.preempted = true;
    a.slurm_says = PreemptedMessage(a.slurm_id, info);
  } else if (info.state.rfind("NODE_FAIL", 0) == 0 || info.state.rfind("BOOT_FAIL", 0) == 0) {
    a.node_failed = true;
    a.slurm_says = "Slurm job " + std::to_string(a.slurm_id) + " ended " + info.state +
                   (info.nodes.empty() ? "" : " on " + info.nodes) +
                   (info.reason.empty() || info.reason == "None" ? "" : " (" + info.reason + ")");
  }
  return OkStatus();
}

Status SlurmExecutor::Cancel(int64_t job_id, int attempt,
                             const std::vector<std::string>& replicas) {
  // First make sure that no replica starts from now on; note whether any runs.
  bool any_live = false;
  for (const std::string& name : replicas) {
    fs::path dir = ReplicaDir(job_id, attempt, name);
    std::error_code ec;
    if (fs::exists(dir / replica::kStatusFile, ec)) continue;
    STOKER_ASSIGN_OR_RETURN(bool claimed_now, ClaimAsCancelled(dir));
    if (!claimed_now) any_live = true;  // a supervisor owns it
  }
  STOKER_ASSIGN_OR_RETURN(auto found, Find(job_id, attempt, /*ask_slurm=*/true));
  if (!found) return OkStatus();  // never submitted: the claims are enough
  Attempt& a = **found;
  // Slurm is already stopping a job it preempted (SIGTERM, its GraceTime,
  // SIGKILL): a scancel now, or its escalation after grace_seconds, could
  // only cut short the trainers' time to save a checkpoint.
  if (a.preempted) return OkStatus();
  if (!any_live) {
    // Nothing runs (or the job is still queued): remove the Slurm job now.
    if (a.killed) return OkStatus();
    STOKER_RETURN_IF_ERROR(client_->Cancel(a.slurm_id, /*graceful=*/false));
    a.killed = true;
    return OkStatus();
  }
  if (a.term_sent_us == 0) {
    STOKER_RETURN_IF_ERROR(client_->Cancel(a.slurm_id, /*graceful=*/true));
    a.term_sent_us = mono_us_();
  } else if (!a.killed && mono_us_() - a.term_sent_us > options_.grace_seconds * 1e6) {
    STOKER_RETURN_IF_ERROR(client_->Cancel(a.slurm_id, /*graceful=*/false));
    a.killed = true;
  }
  return OkStatus();
}

}  // namespace stoker::exec
