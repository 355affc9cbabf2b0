#include "server/controller.h"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "auth/auth.h"
#include "common/files.h"
#include "common/time.h"
#include "exec/replica_env.h"
#include "server/attempt_verdict.h"
#include "server/fair_share.h"
#include "server/gcs_mounts.h"
#include "server/launch_builder.h"
#include "server/preemption.h"

namespace stoker::server {
namespace {

using nlohmann::json;
using spec::JobState;

// google.rpc.Code values used in CustomJob.error.
using spec::kRpcCancelled;
using spec::kRpcDeadlineExceeded;
using spec::kRpcInternal;
using spec::kRpcUnknown;

// A TCP port that is free on loopback now, for a replica's CLUSTER_SPEC
// address (the chief's is MASTER_PORT); 0 when none can be had.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// A free port that no allocation in `held` has: the kernel's free port may be
// one an active job was given but has not bound yet (its trainers are still
// importing torch), and two jobs must never rendezvous on one port.
int FreePortNotIn(const std::set<int>& held) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    int port = FreePort();
    if (port != 0 && !held.count(port)) return port;
  }
  return 0;
}

// The ports an allocation (as stored) gives its replicas.
void AddPorts(const json& allocation, std::set<int>& ports) {
  if (!allocation.is_object()) return;
  for (const json& r : allocation.value("replicas", json::array())) {
    if (r.is_object() && r.contains("port") && r["port"].is_number_integer()) {
      ports.insert(r["port"].get<int>());
    }
  }
}

// A number without trailing zeros: 4, 0.25, 15.5.
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// What an allocation (as stored) holds. Allocations written before GPU
// sharing list whole GPUs as plain indexes.
std::vector<scheduler::PlacedReplica> PlacedFromAllocation(const json& allocation,
                                                           const resources::Node& node) {
  std::vector<scheduler::PlacedReplica> out;
  for (const json& r : allocation.value("replicas", json::array())) {
    scheduler::PlacedReplica p;
    p.node = 0;  // one local node
    p.cpus = r.value("cpus", 0.0);
    p.memory_bytes = r.value("memory_bytes", uint64_t{0});
    if (r.contains("gpu_shares")) {
      for (const json& g : r["gpu_shares"]) {
        p.gpus.push_back(
            {g.value("gpu", 0), g.value("fraction", 1.0), g.value("memory_bytes", uint64_t{0})});
      }
    } else {
      for (const json& g : r.value("gpus", json::array())) {
        int index = g.get<int>();
        uint64_t memory = 0;
        for (const resources::Gpu& gpu : node.gpus) {
          if (gpu.index == index) memory = gpu.memory_bytes;
        }
        p.gpus.push_back({index, 1.0, memory});
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

// "2x NVIDIA_TESLA_T4", "0.25 of a NVIDIA_L4", "" for a job without GPUs.
std::string GpuSummary(const std::vector<scheduler::ReplicaRequest>& requests) {
  std::map<std::string, double> by_type;
  for (const scheduler::ReplicaRequest& r : requests) {
    if (r.ask.gpus > 0) by_type[r.ask.gpu_type] += r.ask.gpus;
  }
  std::string out;
  for (const auto& [type, n] : by_type) {
    if (!out.empty()) out += ", ";
    json count = n == std::floor(n) ? json(static_cast<int64_t>(n)) : json(n);
    out += count.dump() + "x " + type;
  }
  return out;
}

std::string OutputUri(const spec::CustomJob& job, int64_t id) {
  std::string base = job.job_spec.base_output_directory;
  if (base.empty())
    base = std::string("gs://") + storage::kOutputsBucket + "/" + std::to_string(id);
  if (base.back() != '/') base += '/';
  return base;
}

}  // namespace

Controller::Controller(ControllerDeps deps)
    : config_(*deps.config),
      node_(*deps.node),
      store_(*deps.store),
      executor_(*deps.executor),
      buckets_(*deps.buckets),
      environments_(*deps.environments),
      clock_(*deps.clock),
      accountant_(deps.accountant),
      sample_gpus_(std::move(deps.sample_gpus)),
      metrics_(deps.metrics),
      studies_({.store = deps.store,
                .executor = deps.executor,
                .admission = deps.admission,
                .clock = deps.clock,
                .jobs = this,
                .webhooks = &deps.config->webhooks}) {}

void Controller::TrialJobCancelRequested(int64_t job_id) {
  auto it = active_.find(job_id);
  if (it != active_.end()) it->second.rec.cancel_requested = true;
}

Controller::~Controller() { Stop(); }

Status Controller::Start() {
  STOKER_RETURN_IF_ERROR(Recover());
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

Status Controller::Recover() {
  STOKER_ASSIGN_OR_RETURN(std::vector<store::JobRecord> jobs, store_.ActiveJobs());
  for (store::JobRecord& rec : jobs) Adopt(std::move(rec));
  if (!active_.empty()) spdlog::info("recovered {} active job(s) from the store", active_.size());
  // A crash between recording a job's end and stopping its other replicas
  // leaves those running: stop them now (jobs that ended in the last day).
  auto ended = store_.EndedJobsSince(clock_.NowMicros() - 24LL * 3600 * 1'000'000);
  if (ended.ok()) {
    for (const store::JobRecord& rec : *ended) {
      Active a;
      a.rec = rec;
      a.placed = PlacedFromAllocation(rec.allocation, node_);
      for (const json& r : rec.allocation.value("replicas", json::array())) {
        a.replicas.push_back(r.value("name", ""));
      }
      Drain(a);
      if (draining_.count({rec.id, rec.attempt})) {
        spdlog::warn("job {} ended but replicas of it still ran; stopping them", rec.id);
      }
    }
  }
  RebuildUsage(clock_.NowMicros());
  // The run times of the last successful jobs, oldest first, for estimates.
  store::ListOptions recent;
  recent.state = JobState::kSucceeded;
  recent.limit = 2000;
  recent.newest_first = true;
  if (auto done = store_.ListJobs(recent); done.ok()) {
    for (auto it = done->rbegin(); it != done->rend(); ++it) {
      if (it->start_time_us && it->end_time_us) {
        run_history_.Add(RunKeyOf(*it), (it->end_time_us - it->start_time_us) / 1e6);
      }
    }
  } else {
    spdlog::warn("estimated starts know no past runs: {}", done.status().ToString());
  }
  return studies_.Recover();
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Controller::Submitted(const store::JobRecord& job) {
  {
    std::lock_guard lock(mu_);
    inbox_submitted_.push_back(job);
  }
  cv_.notify_all();
}

void Controller::StudySubmitted(int64_t study_id) {
  {
    std::lock_guard lock(mu_);
    inbox_studies_.insert(study_id);
  }
  cv_.notify_all();
}

void Controller::StudyCancelRequested(int64_t study_id) {
  {
    std::lock_guard lock(mu_);
    inbox_study_cancel_.insert(study_id);
  }
  cv_.notify_all();
}

void Controller::CancelRequested(int64_t job_id) {
  {
    std::lock_guard lock(mu_);
    inbox_cancel_.insert(job_id);
  }
  cv_.notify_all();
}

void Controller::NoteJobEvent(int64_t job_id, const std::string& note) {
  // A route may ask on every read; the loop records each note once.
  constexpr size_t kMaxQueuedNotes = 1000;
  {
    std::lock_guard lock(mu_);
    if (inbox_notes_.size() >= kMaxQueuedNotes) return;
    inbox_notes_.emplace_back(job_id, note);
  }
  cv_.notify_all();
}

void Controller::RecordNote(int64_t job_id, const std::string& note) {
  constexpr size_t kMaxRememberedNotes = 10000;
  auto key = std::make_pair(job_id, note);
  if (noted_.count(key)) return;
  if (noted_.size() >= kMaxRememberedNotes) noted_.clear();
  noted_.insert(key);
  auto events = store_.Events(job_id);
  if (!events.ok()) return;  // the job is gone
  for (const store::Event& e : *events) {
    if (e.reason == note) return;
  }
  (void)store_.AddEvent(job_id, note);
}

void Controller::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    RunOnce();
    lock.lock();
    if (stop_) break;
    if (inbox_submitted_.empty() && inbox_cancel_.empty() && inbox_studies_.empty() &&
        inbox_study_cancel_.empty()) {
      cv_.wait_for(lock, std::chrono::milliseconds(config_.poll_interval_ms));
    }
  }
}

void Controller::RunOnce() {
  std::vector<store::JobRecord> submitted;
  std::set<int64_t> cancels, studies, study_cancels;
  std::vector<std::pair<int64_t, std::string>> notes;
  {
    std::lock_guard lock(mu_);
    notes.swap(inbox_notes_);
    submitted.swap(inbox_submitted_);
    cancels.swap(inbox_cancel_);
    studies.swap(inbox_studies_);
    study_cancels.swap(inbox_study_cancel_);
  }
  for (int64_t id : studies) studies_.Adopt(id);
  for (int64_t id : study_cancels) studies_.CancelRequested(id);
  for (store::JobRecord& rec : submitted) {
    if (!active_.count(rec.id)) Adopt(std::move(rec));
  }
  for (int64_t id : cancels) {
    auto it = active_.find(id);
    if (it != active_.end()) it->second.rec.cancel_requested = true;
  }
  for (const auto& [job_id, note] : notes) RecordNote(job_id, note);
  Tick();
  if (metrics_) metrics_->ControlLoopPassed();
}

void Controller::Adopt(store::JobRecord rec) {
  Active a;
  auto job = spec::ParseCustomJob(rec.spec);
  int64_t id = rec.id;
  a.rec = std::move(rec);
  if (!job.ok()) {
    // Stored by an older or damaged daemon: fail it visibly rather than guess.
    a.job.display_name = a.rec.display_name;
    active_[id] = std::move(a);
    Finish(active_[id], JobState::kFailed, "stored spec no longer parses", kRpcInternal,
           "the stored job spec cannot be read: " + job.status().message());
    return;
  }
  a.job = std::move(job).value();
  auto requests =
      scheduler::RequestsFor(a.job.job_spec, {node_}, "jobSpec.", config_.machine_types);
  if (requests.ok()) a.requests = std::move(requests).value();
  if (a.rec.allocation.is_object() && !executor_.PlacesReplicas()) {
    a.placed = PlacedFromAllocation(a.rec.allocation, node_);
  }
  if (a.rec.allocation.is_object()) {
    for (const json& r : a.rec.allocation["replicas"]) a.replicas.push_back(r["name"]);
  }
  bool pending = a.rec.state == JobState::kPending;
  active_[id] = std::move(a);
  schedule_dirty_ = true;
  if (!requests.ok() && active_[id].rec.state == JobState::kQueued) {
    Finish(active_[id], JobState::kFailed, "cannot be placed", kRpcInternal,
           requests.status().message());
    return;
  }
  // A PENDING job may have crashed mid-launch: launching again is idempotent.
  if (pending) {
    Status s = Launch(active_[id]);
    if (!s.ok()) Finish(active_[id], JobState::kFailed, "launch failed", kRpcInternal, s.message());
  }
}

namespace {

// A job as webhook bodies name it.
json WebhookJob(const store::JobRecord& r, int attempt) {
  return {{"id", std::to_string(r.id)},
          {"name", "projects/" + r.project + "/locations/" + r.location + "/customJobs/" +
                       std::to_string(r.id)},
          {"displayName", r.display_name},
          {"user", r.user},
          {"attempt", attempt}};
}

}  // namespace

bool Controller::Move(Active& a, JobState to, const std::string& reason,
                      store::TransitionUpdate update) {
  if (!config_.webhooks.empty()) {
    // Webhook deliveries are written with the transition: one commit, never lost.
    json body = {{"job", WebhookJob(a.rec, update.attempt.value_or(a.rec.attempt))},
                 {"from", spec::JobStateName(a.rec.state)},
                 {"to", spec::JobStateName(to)},
                 {"reason", reason}};
    if (update.error_code && *update.error_code != 0) {
      body["error"] = {{"code", *update.error_code},
                       {"message", update.error_message.value_or("")}};
    }
    const int64_t now = clock_.NowMicros();
    for (const char* event : {"job.state", "job.failed"}) {
      if (event == std::string("job.failed") && to != JobState::kFailed) continue;
      for (store::OutboxMessage& m : WebhookMessages(config_.webhooks, event, body, now)) {
        update.outbox.push_back(std::move(m));
      }
    }
  }
  Status s = store_.Transition(a.rec.id, a.rec.state, to, reason, update);
  if (!s.ok()) {
    spdlog::error("job {}: cannot record {} -> {}: {}", a.rec.id, spec::JobStateName(a.rec.state),
                  spec::JobStateName(to), s.ToString());
    return false;
  }
  if (metrics_ && to == JobState::kRunning && a.rec.start_time_us == 0 && update.start_time_us) {
    // Its first start (a retry keeps the first start time).
    metrics_->JobStarted(std::max<int64_t>(0, *update.start_time_us - a.rec.create_time_us) / 1e6);
  }
  a.rec.state = to;
  if (update.start_time_us) a.rec.start_time_us = *update.start_time_us;
  if (to == JobState::kSucceeded && a.rec.start_time_us) {
    int64_t end_us = update.end_time_us.value_or(clock_.NowMicros());
    run_history_.Add(RunKeyOf(a.rec), (end_us - a.rec.start_time_us) / 1e6);
  }
  return true;
}

void Controller::Finish(Active& a, JobState to, const std::string& reason, int error_code,
                        const std::string& error_message) {
  store::TransitionUpdate u;
  u.end_time_us = clock_.NowMicros();
  if (error_code != 0) {
    u.error_code = error_code;
    u.error_message = error_message;
  }
  if (!Move(a, to, reason, u)) return;
  spdlog::info("job {} {}: {}", a.rec.id, spec::JobStateName(to), reason);
}

std::string Controller::LogTail(const Active& a, const std::string& replica) const {
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

void Controller::Tick() {
  // Reap supervisors that exited (stokerd is their subreaper); their status is in files.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  // Fair share counts GPU time up to now, before ended jobs let go of theirs.
  AccrueUsage(clock_.NowMicros());
  // Ended attempts whose replicas are still stopping hold their resources until they are gone.
  for (auto it = draining_.begin(); it != draining_.end();) {
    auto st = executor_.Poll(it->first.first, it->first.second, it->second.replicas);
    bool done =
        st.ok() && std::all_of(st->begin(), st->end(), [](const exec::ReplicaStatus& r) {
          return r.phase == exec::ReplicaPhase::kEnded || r.phase == exec::ReplicaPhase::kLost;
        });
    if (done) {
      // The ledger: replicas that ran on past the judgement (a preemption's
      // or a cancel's grace) held their resources until they ended.
      std::vector<store::UsageRecord>& rows = it->second.usage;
      bool later = false;
      for (store::UsageRecord& u : rows) {
        for (const exec::ReplicaStatus& r : *st) {
          if (r.name == u.replica && r.end_us > u.end_us) {
            u.end_us = r.end_us;
            later = true;
          }
        }
      }
      if (later) {
        Status s = store_.RecordUsage(rows);
        if (!s.ok()) spdlog::warn("job {}: usage: {}", it->first.first, s.ToString());
      }
      it = draining_.erase(it);
      schedule_dirty_ = true;
    } else {
      ++it;
    }
  }
  EnforceBudgets();
  SampleGpus();
  for (auto& [id, a] : active_) {
    if (a.rec.cancel_requested) HandleCancel(a);
    if (!spec::IsTerminal(a.rec.state) && a.rec.state != JobState::kQueued) PollJob(a);
  }
  // Release what ended jobs held; keep replicas that still run as draining.
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = it->second;
    if (!spec::IsTerminal(a.rec.state)) {
      ++it;
      continue;
    }
    Drain(a);
    it = active_.erase(it);
    schedule_dirty_ = true;
    ++retention_.ended_since_scan;
  }
  studies_.Tick();
  Schedule();
  ApplyRetention(retention_, config_.retention, store_, executor_, clock_.NowMicros());
}

void Controller::Drain(Active& a) {
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
  Draining d{a.replicas, a.placed,        a.rec.user, a.job.job_spec.scheduling.priority,
             {},         std::move(usage)};
  AddPorts(a.rec.allocation, d.ports);
  draining_[{a.rec.id, a.rec.attempt}] = std::move(d);
}

void Controller::HandleCancel(Active& a) {
  int64_t now = clock_.NowMicros();
  switch (a.rec.state) {
    case JobState::kQueued:
      Finish(a, JobState::kCancelled, "cancelled by user before it started", kRpcCancelled,
             "CANCELED");
      return;
    case JobState::kPending:
    case JobState::kRunning:
      if (!Move(a, JobState::kCancelling, "cancel requested; stopping replicas")) return;
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

void Controller::PollJob(Active& a) {
  auto polled = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
  if (!polled.ok()) {
    spdlog::warn("job {}: poll: {}", a.rec.id, polled.status().ToString());
    return;
  }
  const std::vector<exec::ReplicaStatus>& st = *polled;
  for (const exec::ReplicaStatus& r : st) {
    if (r.start_note.empty()) continue;
    RecordNote(a.rec.id,
               r.name + ", attempt " + std::to_string(a.rec.attempt + 1) + ": " + r.start_note);
  }
  int64_t first_start = 0;
  bool all_ended = true;
  for (const exec::ReplicaStatus& r : st) {
    if (r.start_us > 0 && (first_start == 0 || r.start_us < first_start)) first_start = r.start_us;
    if (r.phase != exec::ReplicaPhase::kEnded && r.phase != exec::ReplicaPhase::kLost)
      all_ended = false;
  }
  if (a.rec.state == JobState::kPending && first_start > 0) {
    Move(a, JobState::kRunning, "replicas started", {.start_time_us = first_start});
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
      RecordUsage(a, st, "cancelled");
      Finish(a, JobState::kCancelled, "cancelled by user", kRpcCancelled, "CANCELED");
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
    Move(a, JobState::kRunning, "replicas started",
         {.start_time_us = v.start_us ? v.start_us : clock_.NowMicros()});
  }
  if (v.kind == Verdict::Kind::kUndecided) return;
  // The ledger first: a crash after it rewrites the same rows on recovery.
  bool retry =
      v.kind == Verdict::Kind::kFailed && v.retriable && CanRetry(a, v.infrastructure, v.worker);
  RecordUsage(a, st,
              v.kind == Verdict::Kind::kSucceeded ? "succeeded"
              : retry                             ? "retried"
                                                  : "failed");
  switch (v.kind) {
    case Verdict::Kind::kUndecided:
      return;
    case Verdict::Kind::kSucceeded:
      Finish(a, JobState::kSucceeded, v.what, 0, "");
      return;
    case Verdict::Kind::kNeverStarted:
      Finish(
          a, JobState::kFailed, v.replica + " never started", v.error_code,
          v.what + "; see " + executor_.SupervisorLog(a.rec.id, a.rec.attempt, v.replica).string());
      return;
    case Verdict::Kind::kNoPrimary:
      Finish(a, JobState::kFailed, "no primary replica", v.error_code, v.what);
      return;
    case Verdict::Kind::kFailed: {
      std::string tail = LogTail(a, v.replica);
      std::string message = v.what;
      if (!tail.empty()) message += " Last lines of its log:\n" + tail;
      if (v.retriable && Retry(a, v.what, v.infrastructure, v.worker)) return;
      Finish(a, JobState::kFailed, v.what, v.error_code, message);
      return;
    }
  }
}

int Controller::RetryLimit(const Active& a, bool infrastructure, bool worker) const {
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

bool Controller::CanRetry(const Active& a, bool infrastructure, bool worker) const {
  // Attempts that ended in a preemption are not failures.
  return a.rec.attempt - a.rec.preemptions < RetryLimit(a, infrastructure, worker);
}

void Controller::RecordUsage(Active& a, const std::vector<exec::ReplicaStatus>& st,
                             const std::string& end) {
  std::map<std::string, cost::ReplicaTimes> times;
  for (const exec::ReplicaStatus& r : st) times[r.name] = {r.start_us, r.end_us};
  std::vector<store::UsageRecord> rows = cost::AttemptUsage(a.rec, times, end, clock_.NowMicros());
  for (store::UsageRecord& u : rows) {
    auto t = a.telemetry.find(u.replica);
    if (t == a.telemetry.end()) continue;
    // Sampling periods may run past the trainer's exit (the loop sees it a
    // little later): scale to the run, keeping the busy and energy rates.
    const double scale = t->second.sampled_s > u.seconds() ? u.seconds() / t->second.sampled_s : 1;
    u.sampled_seconds = t->second.sampled_s * scale;
    u.busy_gpu_seconds = t->second.busy_gpu_s * scale;
    if (t->second.energy_known) u.energy_joules = t->second.energy_j * scale;
  }
  Status s = store_.RecordUsage(rows);
  if (!s.ok()) spdlog::error("job {}: cannot record usage: {}", a.rec.id, s.ToString());
  a.recorded_usage = std::move(rows);
}

bool Controller::Retry(Active& a, const std::string& what, bool infrastructure, bool worker) {
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

bool Controller::Requeue(Active& a, const std::string& reason, store::TransitionUpdate u) {
  Drain(a);
  u.allocation = json();  // null: the next attempt is placed afresh
  if (!Move(a, JobState::kQueued, reason, u)) return false;
  spdlog::info("job {}: {}", a.rec.id, reason);
  a.rec.attempt = *u.attempt;
  if (u.preemptions) a.rec.preemptions = *u.preemptions;
  if (u.restart_reason) a.rec.restart_reason = *u.restart_reason;
  a.rec.allocation = json();
  a.replicas.clear();
  a.placed.clear();
  a.placed_us = 0;
  a.hung_since_us.clear();
  a.telemetry.clear();
  a.gpu_idle_since_us = 0;
  a.gpu_idle_told.clear();
  schedule_dirty_ = true;
  return true;
}

void Controller::Preempt(Active& a, const std::string& by, bool stop) {
  auto st = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
  if (st.ok()) RecordUsage(a, *st, "preempted");
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

int64_t Controller::LastCheckpointUs(Active& a, int64_t now_us) {
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

void Controller::EnforceBudgets() {
  if (accountant_ == nullptr) return;
  int64_t now = clock_.NowMicros();
  if (now - budget_check_us_ < 10'000'000) return;
  budget_check_us_ = now;
  std::optional<std::vector<cost::BudgetState>> states = accountant_->LastBudgetStates();
  if (!states) return;  // none computed yet
  for (const cost::BudgetState& b : *states) {
    if (!b.warn) continue;
    bool stop = b.exceeded && b.budget.stop_running;
    std::string warned_key = b.budget.scope + " " + b.month.name + (stop ? " stop" : "");
    bool first = budget_warned_.insert(warned_key).second;
    // Webhooks: once per budget, month and kind (and daemon run).
    const char* event = b.exceeded ? "budget.exceeded" : "budget.warning";
    if (budget_warned_.insert(b.budget.scope + " " + b.month.name + " " + event).second) {
      Status s = store_.Enqueue(
          WebhookMessages(config_.webhooks, event, {{"budget", cost::ToJson(b)}}, now));
      if (!s.ok()) spdlog::warn("budgets: cannot enqueue the {} webhook: {}", event, s.ToString());
    }
    for (auto& [id, a] : active_) {
      if (spec::IsTerminal(a.rec.state) || a.rec.cancel_requested) continue;
      json labels(a.job.labels);
      if (!cost::InScope(b.budget.scope, a.rec.user, a.rec.project, labels)) continue;
      if (stop) {
        (void)store_.AddEvent(
            id, "budget " + b.Describe() + ": its hard limit stops the scope's jobs (stopRunning)");
        if (store_.RequestCancel(id).ok()) a.rec.cancel_requested = true;
        if (a.rec.study_id != 0 && store_.RequestStudyCancel(a.rec.study_id).ok()) {
          studies_.CancelRequested(a.rec.study_id);
        }
      } else if (first && a.rec.state == JobState::kRunning) {
        (void)store_.AddEvent(id, "warning: budget " + b.Describe());
      }
    }
  }
}

void Controller::SampleGpus() {
  if (!sample_gpus_ || config_.gpu_telemetry_seconds <= 0) return;
  const int64_t now = clock_.NowMicros();
  const auto interval_us = static_cast<int64_t>(config_.gpu_telemetry_seconds * 1e6);
  if (gpu_sample_us_ != 0 && now - gpu_sample_us_ < interval_us) return;
  const int64_t previous = gpu_sample_us_;
  gpu_sample_us_ = now;
  std::map<int, resources::GpuUsage> gpus;
  std::vector<resources::GpuUsage> sampled = sample_gpus_();
  if (metrics_) metrics_->SetGpuSample(sampled);
  for (resources::GpuUsage& g : sampled) gpus[g.index] = g;
  // Joules each GPU used since the last sample (absent: no counter, or no last sample).
  std::map<int, double> energy_j;
  for (const auto& [index, g] : gpus) {
    auto last = gpu_energy_mj_.find(index);
    if (g.energy_mj && last != gpu_energy_mj_.end() && *g.energy_mj >= last->second) {
      energy_j[index] = (*g.energy_mj - last->second) / 1000.0;
    }
    if (g.energy_mj) {
      gpu_energy_mj_[index] = *g.energy_mj;
    } else {
      gpu_energy_mj_.erase(index);
    }
  }
  if (previous == 0) return;  // the first sample only sets the counters
  for (auto& [id, a] : active_) {
    if (a.rec.state != JobState::kRunning || a.rec.start_time_us == 0) continue;
    // The attempt ran for only part of the period when it started within it.
    const double dt = (now - std::max(previous, a.rec.start_time_us)) / 1e6;
    if (dt <= 0) continue;
    double job_busy = 0, job_fraction = 0;  // the job's GPUs' use, weighted by its shares
    for (size_t i = 0; i < a.placed.size() && i < a.replicas.size(); ++i) {
      if (a.placed[i].gpus.empty()) continue;
      Active::Telemetry& t = a.telemetry[a.replicas[i]];
      bool seen = false;
      for (const scheduler::GpuShare& share : a.placed[i].gpus) {
        auto g = gpus.find(share.gpu);
        if (g == gpus.end()) continue;
        seen = true;
        job_busy += share.fraction * g->second.utilization_percent;
        job_fraction += share.fraction;
        t.busy_gpu_s += share.fraction * g->second.utilization_percent / 100 * dt;
        auto e = energy_j.find(share.gpu);
        if (e != energy_j.end()) {
          t.energy_j += share.fraction * e->second * dt / ((now - previous) / 1e6);
        } else {
          t.energy_known = false;
        }
      }
      if (seen) t.sampled_s += dt;
    }
    if (job_fraction > 0) {
      CheckGpuIdle(a, job_busy / job_fraction, std::max(previous, a.rec.start_time_us), now);
    }
  }
}

void Controller::CheckGpuIdle(Active& a, double busy_percent, int64_t since_us, int64_t now_us) {
  constexpr double kIdlePercent = 15;  // as telemetry's waste flag (src/telemetry)
  if (busy_percent >= kIdlePercent) {
    a.gpu_idle_since_us = 0;
    a.gpu_idle_told.clear();
    return;
  }
  if (a.gpu_idle_since_us == 0) a.gpu_idle_since_us = since_us;
  const double idle_minutes = (now_us - a.gpu_idle_since_us) / 60e6;
  std::vector<Webhook> due;
  for (size_t h = 0; h < config_.webhooks.size(); ++h) {
    const Webhook& hook = config_.webhooks[h];
    if (!hook.events.count("job.gpu_idle") || a.gpu_idle_told.count(h) ||
        idle_minutes < hook.gpu_idle_minutes) {
      continue;
    }
    a.gpu_idle_told.insert(h);
    due.push_back(hook);
  }
  if (due.empty()) return;
  char busy[32];
  std::snprintf(busy, sizeof busy, "%.1f", busy_percent);
  (void)store_.AddEvent(a.rec.id, "warning: the job's GPUs have been under 15% busy for " +
                                      FormatDuration(idle_minutes * 60) + " (now " + busy + "%)");
  json body = {{"job", WebhookJob(a.rec, a.rec.attempt)},
               {"idleSeconds", idle_minutes * 60},
               {"gpuBusyPercent", busy_percent}};
  Status s = store_.Enqueue(WebhookMessages(due, "job.gpu_idle", body, now_us));
  if (!s.ok())
    spdlog::warn("job {}: cannot enqueue the job.gpu_idle webhook: {}", a.rec.id, s.ToString());
}

void Controller::CheckHung(Active& a, const std::vector<exec::ReplicaStatus>& st) {
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

void Controller::AccrueUsage(int64_t now_us) {
  double dt = usage_us_ ? (now_us - usage_us_) / 1e6 : 0;
  usage_us_ = now_us;
  if (dt <= 0) return;
  double decay = std::exp2(-dt / (config_.fair_share_half_life_hours * 3600));
  for (auto& [user, v] : usage_) v *= decay;
  auto add = [&](const std::string& user, const std::vector<scheduler::PlacedReplica>& placed) {
    usage_[user] += HeldGpus(placed) * dt;
  };
  for (const auto& [key, d] : draining_) add(d.user, d.placed);
  for (const auto& [id, a] : active_) add(a.rec.user, a.placed);
}

void Controller::RebuildUsage(int64_t now_us) {
  const double half_life_s = config_.fair_share_half_life_hours * 3600;
  // Use older than ten half-lives weighs under 0.1%: not worth reading.
  auto ended = store_.EndedJobsSince(now_us - static_cast<int64_t>(10 * half_life_s * 1e6));
  std::vector<GpuInterval> intervals;
  if (ended.ok()) {
    for (const store::JobRecord& rec : *ended) {
      if (rec.start_time_us == 0) continue;  // never ran
      if (!rec.allocation.is_object()) continue;
      intervals.push_back({rec.user, HeldGpus(PlacedFromAllocation(rec.allocation, node_)),
                           rec.start_time_us, rec.end_time_us});
    }
  } else {
    spdlog::warn("fair share starts from zero: {}", ended.status().ToString());
  }
  for (const auto& [id, a] : active_) {
    if (a.rec.start_time_us == 0 || spec::IsTerminal(a.rec.state)) continue;
    intervals.push_back({a.rec.user, HeldGpus(a.placed), a.rec.start_time_us, now_us});
  }
  usage_ = UsageFromHistory(intervals, now_us, half_life_s);
  usage_us_ = now_us;
}

scheduler::RunKey Controller::RunKeyOf(const store::JobRecord& rec) {
  return {rec.user, rec.display_name, scheduler::ShapeKey(rec.spec)};
}

int64_t Controller::ExpectedRunS(Active& a) {
  if (a.run_shape.empty()) a.run_shape = scheduler::ShapeKey(a.rec.spec);
  return run_history_.ExpectedSeconds({a.rec.user, a.rec.display_name, a.run_shape});
}

scheduler::Snapshot Controller::TakeSnapshot(int64_t now_us) {
  scheduler::Snapshot snap;
  snap.nodes = {node_};
  snap.now_us = now_us;
  snap.options.cpu_oversubscription = config_.cpu_oversubscription;
  snap.options.accelerator_substitution = config_.accelerator_substitution;
  snap.options.backfill = config_.backfill;
  snap.options.aging_threshold_us = static_cast<int64_t>(config_.aging_hours * 3600e6);
  const PreemptionConfig& pc = config_.preemption;
  snap.options.preemption.enabled = pc.enabled;
  snap.options.preemption.priority_margin = pc.priority_margin;
  snap.options.preemption.min_run_us = static_cast<int64_t>(pc.min_run_seconds * 1e6);

  auto add_running = [&](const std::string& id, const std::string& user, int priority,
                         const std::vector<scheduler::PlacedReplica>& placed, int64_t start_us,
                         double timeout_s) -> scheduler::RunningJob& {
    scheduler::RunningJob& r = snap.running.emplace_back();
    r.id = id;
    r.user = user;
    r.priority = priority;
    r.replicas = placed;
    r.start_us = start_us;
    r.runtime_bound_s = static_cast<int64_t>(std::ceil(timeout_s));
    return r;
  };
  for (const auto& [key, d] : draining_) {
    // Stopping: bound by the grace period from now.
    add_running(std::to_string(key.first) + "/" + std::to_string(key.second), d.user, d.priority,
                d.placed, now_us, std::max(config_.cancel_grace_seconds, pc.grace_seconds) + 5)
        .stopping = true;
  }
  for (auto& [id, a] : active_) {
    if (spec::IsTerminal(a.rec.state)) continue;
    if (a.rec.state != JobState::kQueued) {
      if (!a.placed.empty()) {
        scheduler::RunningJob& r = add_running(
            std::to_string(id), a.rec.user, a.job.job_spec.scheduling.priority, a.placed,
            a.placed_us ? a.placed_us : now_us, a.job.job_spec.scheduling.timeout_seconds);
        r.stopping = a.rec.state == JobState::kCancelling || a.rec.cancel_requested;
        r.expected_runtime_s = ExpectedRunS(a);
        r.preemptible = pc.enabled && IsPreemptible(a.job, pc);
        if (r.preemptible) r.progress_us = LastCheckpointUs(a, now_us);
      }
      continue;
    }
    if (a.rec.cancel_requested || a.requests.empty()) continue;
    scheduler::QueuedJob q;
    q.id = std::to_string(id);
    q.user = a.rec.user;
    q.priority = a.job.job_spec.scheduling.priority;
    q.submit_us = a.rec.create_time_us;
    q.replicas = scheduler::AsksOf(a.requests);
    q.runtime_bound_s = static_cast<int64_t>(std::ceil(a.job.job_spec.scheduling.timeout_seconds));
    q.expected_runtime_s = ExpectedRunS(a);
    snap.queued.push_back(std::move(q));
  }

  if (config_.warm_starts.enabled) snap.held = warm_holdings_.At(now_us);

  AccrueUsage(now_us);
  snap.usage_gpu_seconds = usage_;

  // Quotas: named users, and "*" for everyone else who appears.
  auto fallback = config_.quotas.find("*");
  auto quota_for = [&](const std::string& user) {
    auto q = config_.quotas.find(user);
    if (q != config_.quotas.end()) {
      snap.quotas[user] = q->second;
    } else if (fallback != config_.quotas.end()) {
      snap.quotas[user] = fallback->second;
    }
  };
  for (const scheduler::QueuedJob& q : snap.queued) quota_for(q.user);
  for (const scheduler::RunningJob& r : snap.running) quota_for(r.user);
  return snap;
}

void Controller::Schedule() {
  if (executor_.PlacesReplicas()) {
    HandOverQueued();
    return;
  }
  // Decide when something changed, and every few seconds for aging and estimates.
  constexpr int64_t kRefreshUs = 5'000'000;
  int64_t now = clock_.NowMicros();
  if (!schedule_dirty_ && now - last_schedule_us_ < kRefreshUs) return;
  schedule_dirty_ = false;
  last_schedule_us_ = now;
  const auto pass_start = std::chrono::steady_clock::now();
  scheduler::Snapshot snap = TakeSnapshot(now);
  scheduler::Decision d = scheduler::Schedule(snap);
  for (const scheduler::RejectedJob& r : d.rejected) {
    auto it = active_.find(std::stoll(r.job_id));
    if (it == active_.end()) continue;
    Finish(it->second, JobState::kFailed, "can never be placed", kRpcInternal, r.status.message());
  }
  std::string ahead_of = d.reservation ? d.reservation->job_id : "";
  for (const scheduler::StartJob& start : d.start) {
    auto it = active_.find(std::stoll(start.job_id));
    if (it != active_.end()) StartPlaced(it->second, start, ahead_of);
  }
  std::vector<store::Store::WaitNote> notes;
  for (const scheduler::WaitingJob& w : d.wait) {
    auto it = active_.find(std::stoll(w.job_id));
    if (it != active_.end()) RecordWait(it->second, w, now, notes);
  }
  Status recorded = store_.RecordWaits(notes);
  for (const scheduler::Preemption& p : d.preempt) {
    auto victim = active_.find(std::stoll(p.job_id));
    auto for_job = active_.find(std::stoll(p.for_job_id));
    if (victim == active_.end() || for_job == active_.end()) continue;
    const Active& f = for_job->second;
    const Active& v = victim->second;
    RecordNote(f.rec.id, "preempting job " + p.job_id + " (user " + v.rec.user + ", priority " +
                             std::to_string(v.job.job_spec.scheduling.priority) +
                             ") to make room; starts once its replicas are gone");
    Preempt(victim->second, "by job " + p.for_job_id + " (user " + f.rec.user + ", priority " +
                                std::to_string(f.job.job_spec.scheduling.priority) +
                                "), which needs its resources; about " +
                                Num(std::round(p.lost_gpu_seconds)) +
                                " GPU-seconds of work since its last checkpoint may be redone");
  }
  PublishViews(snap, d);
  if (metrics_) {
    metrics_->SchedulingPassTook(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start).count());
  }
  if (!recorded.ok()) {
    // None of them is stored: forget them, so the next decision writes them again.
    spdlog::warn("cannot record why {} job(s) wait: {}", notes.size(), recorded.ToString());
    for (const store::Store::WaitNote& n : notes) {
      auto it = active_.find(n.id);
      if (it == active_.end()) continue;
      it->second.rec.wait_reason.clear();
      it->second.wait_jobs_ahead = -1;
      if (!n.event.empty()) it->second.wait_event_kind.clear();
    }
    schedule_dirty_ = true;
  }
}

void Controller::StartPlaced(Active& a, const scheduler::StartJob& start,
                             const std::string& ahead_of) {
  json replicas = json::array();
  std::vector<std::string> names;
  std::vector<std::string> notes;
  std::set<int> held_ports;  // every port a job that may still run was given
  for (const auto& [id, other] : active_) AddPorts(other.rec.allocation, held_ports);
  for (const auto& [key, d] : draining_) held_ports.insert(d.ports.begin(), d.ports.end());
  for (size_t i = 0; i < start.replicas.size() && i < a.requests.size(); ++i) {
    const scheduler::PlacedReplica& p = start.replicas[i];
    const scheduler::ReplicaRequest& r = a.requests[i];
    json gpus = json::array(), shares = json::array();
    std::string gpu_type;  // the booked GPUs' type, for the usage ledger
    for (const scheduler::GpuShare& g : p.gpus) {
      gpus.push_back(g.gpu);
      shares.push_back(
          {{"gpu", g.gpu}, {"fraction", g.fraction}, {"memory_bytes", g.memory_bytes}});
      for (const resources::Gpu& n : node_.gpus) {
        if (n.index == g.gpu) gpu_type = n.type;
      }
    }
    replicas.push_back({{"name", r.name},
                        {"pool", r.pool},
                        {"index", r.index},
                        {"node", p.node},
                        {"cpus", p.cpus},
                        {"memory_bytes", p.memory_bytes},
                        {"gpus", gpus},
                        {"gpu_shares", shares},
                        {"gpu_type", gpu_type},
                        {"port", FreePortNotIn(held_ports)}});
    held_ports.insert(replicas.back()["port"].get<int>());
    names.push_back(r.name);
    for (const std::string& sub : p.substitutions) notes.push_back(r.name + ": " + sub);
    if (r.clamped) {
      notes.push_back(r.name + ": machine type clamped to this node (" + Num(p.cpus) + " CPUs, " +
                      Num(p.memory_bytes / double(1ull << 30)) + " GB)");
    }
  }
  if (start.backfilled && !ahead_of.empty()) {
    notes.push_back("backfilled: started ahead of job " + ahead_of +
                    " because it ends (scheduling.timeout) before that job can start");
  }
  json allocation = {{"node", node_.name}, {"replicas", replicas}};
  for (const std::string& n : notes) (void)store_.AddEvent(a.rec.id, n);
  if (!Move(a, JobState::kPending, "resources allocated on " + node_.name,
            {.allocation = allocation})) {
    return;
  }
  a.rec.allocation = allocation;
  a.rec.wait_reason.clear();
  a.wait_jobs_ahead = -1;
  a.replicas = names;
  a.placed = start.replicas;
  a.placed_us = clock_.NowMicros();
  Status s = Launch(a);
  if (!s.ok()) Finish(a, JobState::kFailed, "launch failed", kRpcInternal, s.message());
}

void Controller::RecordWait(Active& a, const scheduler::WaitingJob& w, int64_t now_us,
                            std::vector<store::Store::WaitNote>& notes) {
  const std::optional<double>& max_wait = a.job.job_spec.scheduling.max_wait_seconds;
  if (max_wait && *max_wait > 0 && now_us - a.rec.create_time_us > *max_wait * 1e6) {
    std::string why = "waited longer than its scheduling.maxWaitDuration of " +
                      FormatDuration(*max_wait) + " for resources; last reason: " + w.Reason();
    Finish(a, JobState::kFailed, why, kRpcDeadlineExceeded, why);
    return;
  }
  // The same place in line as stored: nothing to write, no string to build
  // (most of a long queue on most decisions).
  if (w.detail.empty() && w.jobs_ahead == a.wait_jobs_ahead) return;
  std::string reason = w.Reason();
  a.wait_jobs_ahead = w.detail.empty() ? w.jobs_ahead : -1;
  if (reason == a.rec.wait_reason) return;
  constexpr int64_t kRepeatWaitEventUs = 600'000'000;  // ten minutes
  std::string event;
  if (scheduler::WaitEventDue(w, a.wait_event_kind, a.wait_event_us, now_us, kRepeatWaitEventUs)) {
    event = "waiting: " + reason;
    a.wait_event_us = now_us;
    a.wait_event_kind = scheduler::WaitKind(w);
  }
  notes.push_back({a.rec.id, reason, std::move(event)});
  a.rec.wait_reason = std::move(reason);
}

void Controller::PublishViews(const scheduler::Snapshot& snap, const scheduler::Decision& d) {
  std::vector<QueueEntry> queue;
  queue.reserve(d.wait.size());
  for (const scheduler::WaitingJob& w : d.wait) {
    auto it = active_.find(std::stoll(w.job_id));
    if (it == active_.end() || it->second.rec.state != JobState::kQueued) continue;
    const Active& a = it->second;
    QueueEntry e;
    e.job_id = a.rec.id;
    e.display_name = a.rec.display_name;
    e.user = a.rec.user;
    e.priority = a.job.job_spec.scheduling.priority;
    scheduler::QueuedJob q;
    q.priority = e.priority;
    q.submit_us = a.rec.create_time_us;
    e.effective_priority = scheduler::EffectivePriority(q, snap.now_us, snap.options);
    e.create_time_us = a.rec.create_time_us;
    e.gpus = GpuSummary(a.requests);
    e.reason = a.rec.wait_reason;  // RecordWait's text for this decision
    e.estimated_start_us = w.estimated_start_us;
    queue.push_back(std::move(e));
  }

  // Nodes and who holds each GPU (running jobs and stopping attempts).
  json nodes = json::array();
  for (size_t n = 0; n < snap.nodes.size(); ++n) {
    const resources::Node& node = snap.nodes[n];
    double cpus = 0, memory = 0;
    std::map<int, json> holders;
    for (const scheduler::RunningJob& r : snap.running) {
      for (size_t i = 0; i < r.replicas.size(); ++i) {
        const scheduler::PlacedReplica& p = r.replicas[i];
        if (p.node != static_cast<int>(n)) continue;
        cpus += p.cpus;
        memory += static_cast<double>(p.memory_bytes);
        auto job = active_.find(std::atoll(r.id.c_str()));
        std::string replica =
            job != active_.end() && i < job->second.replicas.size() ? job->second.replicas[i] : "";
        for (const scheduler::GpuShare& g : p.gpus) {
          holders[g.gpu].push_back(
              {{"job", r.id}, {"replica", replica}, {"user", r.user}, {"fraction", g.fraction}});
        }
      }
    }
    json held = json::array();
    for (const scheduler::Held& h : snap.held) {
      if (h.node != static_cast<int>(n)) continue;
      memory += static_cast<double>(h.memory_bytes);
      held.push_back({{"user", h.user}, {"what", h.what}, {"memory_bytes", h.memory_bytes}});
    }
    json gpus = json::array();
    for (const resources::Gpu& g : node.gpus) {
      gpus.push_back({{"index", g.index},
                      {"type", g.type},
                      {"memory_bytes", g.memory_bytes},
                      {"uuid", g.uuid},
                      {"holders", holders.count(g.index) ? holders[g.index] : json::array()}});
    }
    nodes.push_back({{"name", node.name},
                     {"cpus", node.cpus},
                     {"memory_bytes", node.memory_bytes},
                     {"cpus_booked", cpus},
                     {"memory_booked_bytes", memory},
                     {"held", held},
                     {"cpu_oversubscription", snap.options.cpu_oversubscription},
                     {"gpus", gpus}});
  }
  std::lock_guard lock(view_mu_);
  queue_view_ = std::move(queue);
  nodes_view_ = {{"nodes", nodes}};
}

std::vector<Controller::QueueEntry> Controller::Queue() const {
  std::lock_guard lock(view_mu_);
  return queue_view_;
}

json Controller::Nodes() const {
  std::lock_guard lock(view_mu_);
  return nodes_view_;
}

void Controller::HandOverQueued() {
  for (auto& [id, a] : active_) {
    if (a.rec.state != JobState::kQueued || a.rec.cancel_requested || a.requests.empty()) continue;
    // The executor (Slurm) decides where replicas run: nothing to place here.
    json replicas = json::array();
    std::vector<std::string> names;
    for (const scheduler::ReplicaRequest& r : a.requests) {
      replicas.push_back({{"name", r.name},
                          {"pool", r.pool},
                          {"index", r.index},
                          {"cpus", r.ask.cpus},
                          {"memory_bytes", r.ask.memory_bytes},
                          {"gpus", json::array()},
                          {"port", 0}});
      names.push_back(r.name);
    }
    json allocation = {{"node", "executor"}, {"replicas", replicas}};
    if (!Move(a, JobState::kPending, "handed to the executor, which places the replicas",
              {.allocation = allocation})) {
      continue;
    }
    a.rec.allocation = allocation;
    a.replicas = names;
    a.placed_us = clock_.NowMicros();
    Status s = Launch(a);
    if (!s.ok()) Finish(a, JobState::kFailed, "launch failed", kRpcInternal, s.message());
  }
}

Result<exec::JobLaunch> Controller::BuildLaunch(const Active& a, std::vector<std::string>& notes) {
  const spec::CustomJobSpec& spec = a.job.job_spec;
  LaunchInputs in;
  in.rec = &a.rec;
  in.job = &a.job;
  in.requests = &a.requests;
  in.settings = {config_.cancel_grace_seconds, config_.log_max_bytes,
                 config_.log_max_files,        config_.api_url,
                 config_.push_secret,          config_.telemetry_seconds};
  in.settings.instance = InstanceTag(std::filesystem::absolute(config_.data_dir).string());
  in.settings.warm = {config_.warm_starts.enabled,
                      config_.warm_starts.preload,
                      config_.warm_starts.idle_seconds,
                      (config_.data_dir / "warm").string(),
                      (config_.python_helpers / "stoker_zygote.py").string(),
                      config_.warm_starts.max_per_user,
                      config_.warm_starts.max_total};
  // A preemptible job's SIGTERM -> SIGKILL grace is the preemption grace
  // (for a user's cancel too): the time it has to save a checkpoint.
  if (config_.preemption.enabled && IsPreemptible(a.job, config_.preemption)) {
    in.settings.grace_seconds = config_.preemption.grace_seconds;
  }
  in.settings.preemption = config_.preemption;  // the executor's own preemption (Slurm)
  in.settings.container_mounts = {(config_.data_dir / "buckets").string()};
  for (const auto& [name, dir] : config_.buckets) {
    in.settings.container_mounts.push_back(std::filesystem::absolute(dir).string());
  }
  in.settings.container_binds = GcsBinds(config_.data_dir, config_.buckets);
  in.settings.container_user_namespace = config_.container_user_namespace;
  in.settings.container_mounts_read_only = {(config_.data_dir / "envs").string(),
                                            config_.python_helpers.string()};
  in.settings.python_packages.cache_dir =
      std::filesystem::absolute(config_.data_dir / "envs" / "pip").string();
  for (const std::filesystem::path& w : config_.python_packages.wheelhouse) {
    in.settings.python_packages.wheelhouse.push_back(std::filesystem::absolute(w).string());
  }
  in.settings.python_packages.index_url = config_.python_packages.index_url;
  in.rewrite_uris = [this](const std::string& s) { return storage::RewriteGsUris(s, buckets_); };

  std::string output_uri = OutputUri(a.job, a.rec.id);
  auto parsed = storage::ParseGsUri(output_uri, "jobSpec.baseOutputDirectory.outputUriPrefix");
  if (!parsed.ok()) return parsed.status();
  if (parsed->bucket == storage::kOutputsBucket)
    STOKER_RETURN_IF_ERROR(buckets_.Create(storage::kOutputsBucket));
  // Made as every bucket directory is: shared with the trainers' group.
  STOKER_ASSIGN_OR_RETURN(
      std::filesystem::path output_dir,
      buckets_.MakeDir(output_uri, "jobSpec.baseOutputDirectory.outputUriPrefix"));
  in.output_dir = output_dir.string();
  // AIP_CHECKPOINT_DIR: made now, the same for every attempt, so that a
  // trainer resuming after a preemption or a retry finds it; one that cannot
  // be made fails the launch with its path.
  auto checkpoints = buckets_.MakeDir(output_uri + "checkpoints",
                                      "AIP_CHECKPOINT_DIR (jobSpec.baseOutputDirectory)");
  if (!checkpoints.ok()) {
    return FailedPrecondition(
        "AIP_CHECKPOINT_DIR " + (output_dir / "checkpoints").string() +
        " cannot be made: " + checkpoints.status().message() +
        "; remove what is in the way or set jobSpec.baseOutputDirectory to a writable place");
  }

  // nfsMounts: Vertex mounts each share at /mnt/nfs/<mountPoint>. Here the
  // share is honoured when its path exists on this machine (already mounted
  // there), by a link at the same place; otherwise the job is told why not.
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const json& mounts = spec.worker_pool_specs[p].extra.value("nfsMounts", json::array());
    for (size_t i = 0; i < mounts.size(); ++i) {
      std::string field =
          "jobSpec.workerPoolSpecs[" + std::to_string(p) + "].nfsMounts[" + std::to_string(i) + "]";
      std::filesystem::path source = mounts[i].value("path", "");
      std::string point = mounts[i].value("mountPoint", "");
      if (!IsFileName(point)) {
        // Checked at submission; a job stored before that check still must
        // not make root create anything outside nfs_mount_root.
        return InvalidArgument(field + ".mountPoint: must be one directory name, got '" + point +
                               "'");
      }
      std::filesystem::path target = std::filesystem::path(config_.nfs_mount_root) / point;
      std::error_code ec;
      if (!std::filesystem::is_directory(source, ec)) {
        notes.push_back("warning: " + field + " not mounted: " + source.string() +
                        " does not exist on this machine");
        continue;
      }
      if (std::filesystem::is_symlink(target, ec)) {
        if (std::filesystem::read_symlink(target, ec) == source) continue;
      } else if (std::filesystem::exists(target, ec) &&
                 std::filesystem::equivalent(target, source, ec)) {
        continue;
      }
      std::filesystem::create_directories(target.parent_path(), ec);
      if (std::filesystem::exists(target, ec) || std::filesystem::is_symlink(target, ec) ||
          (std::filesystem::create_symlink(source, target, ec), ec)) {
        return FailedPrecondition(field + ".mountPoint: cannot make " + target.string() +
                                  " point at " + source.string() +
                                  (ec ? ": " + ec.message() : ": it exists and is something else") +
                                  "; use another mountPoint or remove it");
      }
    }
  }

  // Each pool's environment and package files; each replica's metric file.
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[p];
    std::string field = "jobSpec.workerPoolSpecs[" + std::to_string(p) + "]";
    in.environments.emplace_back();
    in.packages.emplace_back();
    if (pool.empty) continue;
    std::string image = pool.python_package_spec ? pool.python_package_spec->executor_image_uri
                                                 : pool.container_spec->image_uri;
    // The framework was checked when the job was submitted.
    STOKER_ASSIGN_OR_RETURN(in.environments.back(),
                            environments_.ForImage(image, field, /*check_framework=*/false));
    // Which path runs the image (a container or an interpreter) and why.
    notes.push_back("workerpool" + std::to_string(p) + ": " + in.environments.back().note);
    if (!pool.python_package_spec) continue;
    for (size_t i = 0; i < pool.python_package_spec->package_uris.size(); ++i) {
      const std::string& uri = pool.python_package_spec->package_uris[i];
      std::string pkg_field = field + ".pythonPackageSpec.packageUris[" + std::to_string(i) + "]";
      STOKER_ASSIGN_OR_RETURN(std::filesystem::path pkg, buckets_.Resolve(uri, pkg_field));
      STOKER_RETURN_IF_ERROR(VerifyStaged(uri, pkg, pkg_field));
      in.packages.back().push_back(pkg.string());
    }
  }
  for (const json& r : a.rec.allocation["replicas"]) {
    std::string name = r["name"].get<std::string>();
    in.metric_files[name] = executor_.MetricFilePath(a.rec.id, a.rec.attempt, name).string();
  }
  return BuildJobLaunch(in);
}

Status Controller::VerifyStaged(const std::string& uri, const std::filesystem::path& path,
                                const std::string& field) const {
  auto parsed = storage::ParseGsUri(uri, field);
  if (!parsed.ok() || parsed->bucket != storage::kStagingBucket) return OkStatus();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return FailedPrecondition(field + ": " + uri + " is gone from the staging bucket; stage the " +
                              "package again");
  }
  std::string version = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                        std::to_string(st.st_mtim.tv_sec) + "." +
                        std::to_string(st.st_mtim.tv_nsec);
  auto known = verified_packages_.find(path.string());
  if (known != verified_packages_.end() && known->second == version) return OkStatus();
  STOKER_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  STOKER_RETURN_IF_ERROR(storage::CheckStagedContent(*parsed, bytes, field));
  verified_packages_[path.string()] = version;
  return OkStatus();
}

Status Controller::Launch(Active& a) {
  // Its events are written once the replicas are on their way: each is a
  // transaction (an fsync), which the start path does not wait for.
  std::vector<std::string> notes;
  Result<exec::JobLaunch> launch = BuildLaunch(a, notes);
  Status s = launch.ok() ? executor_.Launch(*launch) : launch.status();
  for (const std::string& note : notes) (void)store_.AddEvent(a.rec.id, note);
  return s;
}

}  // namespace stoker::server
