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
#include "exec/command.h"
#include "exec/replica_files.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t MonoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// RunCommand for the Slurm client commands.
Result<CommandResult> RunSlurm(const std::vector<std::string>& args, double timeout_seconds) {
  return RunCommand(args, timeout_seconds,
                    " (is the Slurm client installed and in stokerd's PATH?)");
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
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

std::string CurrentUser() {
  if (passwd* pw = ::getpwuid(::geteuid())) return pw->pw_name;
  return std::to_string(::geteuid());
}

std::string Brief(const CommandResult& r) {
  std::string text = Trim(r.err.empty() ? r.out : r.err);
  return text.empty() ? "exit status " + std::to_string(r.exit_code) : text;
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
  auto pick = [&](const std::string& label, const std::string& fallback) -> Result<std::string> {
    auto it = launch.labels.find(label);
    std::string value = it != launch.labels.end() ? it->second : fallback;
    STOKER_RETURN_IF_ERROR(CheckSlurmName(
        value, it != launch.labels.end() ? "labels." + label : "slurm." + label.substr(6)));
    return value;
  };
  STOKER_ASSIGN_OR_RETURN(std::string partition, pick("slurm-partition", options.partition));
  STOKER_ASSIGN_OR_RETURN(std::string account, pick("slurm-account", options.account));
  STOKER_ASSIGN_OR_RETURN(std::string qos, pick("slurm-qos", options.qos));

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

std::map<int64_t, SlurmJobInfo> ParseSqueue(const std::string& text) {
  std::map<int64_t, SlurmJobInfo> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
      f.push_back(line.substr(start, bar - start));
    f.push_back(line.substr(start));
    if (f.size() < 3) continue;
    std::string id = Trim(f[0]);
    if (id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit)) continue;
    jobs[std::stoll(id)] = {Trim(f[1]), Trim(f[2]), f.size() > 3 ? Trim(f[3]) : ""};
  }
  return jobs;
}

bool SlurmStateIsFinal(const std::string& state) {
  static const char* kFinal[] = {"COMPLETED", "FAILED",        "CANCELLED",   "TIMEOUT",
                                 "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",   "DEADLINE",
                                 "PREEMPTED", "REVOKED",       "SPECIAL_EXIT"};
  return std::any_of(std::begin(kFinal), std::end(kFinal),
                     [&](const char* s) { return state.rfind(s, 0) == 0; });
}

Result<std::string> LoadOrCreateSlurmInstance(const fs::path& data_dir) {
  fs::path file = data_dir / "slurm-instance";
  if (auto text = ReadFile(file); text.ok() && !Trim(*text).empty()) return Trim(*text);
  std::random_device rd;
  char id[9];
  std::snprintf(id, sizeof id, "%08x", static_cast<unsigned>(rd()));
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(file, std::string(id) + "\n"));
  return std::string(id);
}

SlurmExecutor::SlurmExecutor(SlurmOptions options) : options_(std::move(options)) {}

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
    std::string id = Trim(*text);
    if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit)) {
      return dir / ("slurm-" + id + ".out");
    }
  }
  return dir / "slurm-%j.out";
}

Result<const std::map<int64_t, SlurmJobInfo>*> SlurmExecutor::Queue(int64_t not_before_us) {
  int64_t now = MonoMicros();
  bool fresh = queue_taken_us_ >= 0 && queue_taken_us_ >= not_before_us &&
               now - queue_taken_us_ < options_.queue_refresh_seconds * 1e6;
  if (fresh) return &queue_;
  // -t all: jobs that ended recently (slurmctld keeps them MinJobAge seconds)
  // are listed too, with their final state and reason.
  STOKER_ASSIGN_OR_RETURN(CommandResult r,
                          RunSlurm({"squeue", "--noheader", "--states=all", "--user", CurrentUser(),
                                    "--format=%i|%T|%r|%N"},
                                   30));
  if (r.exit_code != 0) return Unavailable("squeue failed: " + Brief(r));
  queue_ = ParseSqueue(r.out);
  queue_taken_us_ = now;
  return &queue_;
}

Result<std::optional<SlurmExecutor::Attempt*>> SlurmExecutor::Find(int64_t job_id, int attempt,
                                                                   bool ask_slurm) {
  auto key = std::make_pair(job_id, attempt);
  if (auto it = attempts_.find(key); it != attempts_.end()) return std::optional(&it->second);
  fs::path dir = JobDir(job_id, attempt);
  if (auto text = ReadFile(dir / "slurm-job-id"); text.ok()) {
    std::string id = Trim(*text);
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
  STOKER_ASSIGN_OR_RETURN(CommandResult r,
                          RunSlurm({"squeue", "--noheader", "--states=all", "--name",
                                    SlurmJobName(job_id, attempt), "--format=%i|%k"},
                                   30));
  if (r.exit_code != 0) return Unavailable("squeue failed: " + Brief(r));
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    size_t bar = line.find('|');
    if (bar == std::string::npos || Trim(line.substr(bar + 1)) != comment) continue;
    std::string id = Trim(line.substr(0, bar));
    if (id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit)) continue;
    STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "slurm-job-id", id + "\n"));
    Attempt& a = attempts_[key];
    a.slurm_id = std::stoll(id);
    a.known_since_us = MonoMicros();
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
                      options_.shared_dir / "jobs", std::nullopt, isolation_};
  if (accounts_) {
    STOKER_ASSIGN_OR_RETURN(plan.run_as, accounts_(launch.job_id));
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

  std::vector<std::string> args = {"sbatch", "--parsable"};
  for (const std::string& a : options_.sbatch_extra_args) args.push_back(a);
  args.push_back((dir / "slurm.sbatch").string());
  STOKER_ASSIGN_OR_RETURN(CommandResult r, RunSlurm(args, 60));
  std::string id = Trim(r.out.substr(0, r.out.find(';')));  // "<id>[;<cluster>]"
  if (r.exit_code != 0 || id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit)) {
    return FailedPrecondition("sbatch refused job " + std::to_string(launch.job_id) + ": " +
                              Brief(r) + " (script: " + (dir / "slurm.sbatch").string() +
                              "; check slurm.partition/account/qos in the config or the job's "
                              "slurm-* labels)");
  }
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "slurm-job-id", id + "\n"));
  Attempt& a = attempts_[{launch.job_id, launch.attempt}];
  a.slurm_id = std::stoll(id);
  a.known_since_us = MonoMicros();
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
      MonoMicros() - (*found)->term_sent_us > options_.grace_seconds * 1e6) {
    // The graceful stop did not end the job within the grace: end it.
    (void)Scancel((*found)->slurm_id, /*graceful=*/false);
    (*found)->killed = true;
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
    out[i].message =
        ended + " before stoker-run started " + out[i].name + "; see " +
        (JobDir(job_id, attempt) / ("slurm-" + std::to_string(a.slurm_id) + ".out")).string();
  }
  return out;
}

Status SlurmExecutor::Scancel(int64_t slurm_id, bool graceful) {
  std::vector<std::string> args = {"scancel"};
  // Without --full the signal goes to the job's steps (the supervisors), not
  // to the batch shell: srun must stay to collect them.
  if (graceful) args.push_back("--signal=TERM");
  args.push_back(std::to_string(slurm_id));
  STOKER_ASSIGN_OR_RETURN(CommandResult r, RunSlurm(args, 30));
  // A job that already ended is what cancel wants: not an error.
  if (r.exit_code != 0 && r.err.find("completed") == std::string::npos &&
      r.err.find("Invalid job id") == std::string::npos) {
    return Unavailable("scancel " + std::to_string(slurm_id) + " failed: " + Brief(r));
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
    if (fs::exists(dir / "status.json", ec)) continue;
    STOKER_ASSIGN_OR_RETURN(bool claimed_now, ClaimAsCancelled(dir));
    if (!claimed_now) any_live = true;  // a supervisor owns it
  }
  STOKER_ASSIGN_OR_RETURN(auto found, Find(job_id, attempt, /*ask_slurm=*/true));
  if (!found) return OkStatus();  // never submitted: the claims are enough
  Attempt& a = **found;
  if (!any_live) {
    // Nothing runs (or the job is still queued): remove the Slurm job now.
    if (a.killed) return OkStatus();
    STOKER_RETURN_IF_ERROR(Scancel(a.slurm_id, /*graceful=*/false));
    a.killed = true;
    return OkStatus();
  }
  if (a.term_sent_us == 0) {
    STOKER_RETURN_IF_ERROR(Scancel(a.slurm_id, /*graceful=*/true));
    a.term_sent_us = MonoMicros();
  } else if (!a.killed && MonoMicros() - a.term_sent_us > options_.grace_seconds * 1e6) {
    STOKER_RETURN_IF_ERROR(Scancel(a.slurm_id, /*graceful=*/false));
    a.killed = true;
  }
  return OkStatus();
}

}  // namespace stoker::exec
