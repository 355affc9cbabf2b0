#include "server/controller.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <chrono>

namespace stoker::server {
namespace {

using nlohmann::json;
using spec::JobState;

// google.rpc.Code values used in CustomJob.error.
using spec::kRpcInternal;

}  // namespace

Controller::Controller(ControllerDeps deps)
    : config_(*deps.config),
      node_(*deps.node),
      store_(*deps.store),
      executor_(*deps.executor),
      clock_(*deps.clock),
      metrics_(deps.metrics),
      funnel_(*deps.store, deps.config->webhooks, *deps.clock, deps.metrics, run_history_),
      usage_({.config = deps.config,
              .node = deps.node,
              .store = deps.store,
              .clock = deps.clock,
              .accountant = deps.accountant,
              .files = deps.executor,
              .sample_gpus = std::move(deps.sample_gpus),
              .metrics = deps.metrics},
             table_),
      attempts_({.config = deps.config,
                 .store = deps.store,
                 .executor = deps.executor,
                 .buckets = deps.buckets,
                 .clock = deps.clock,
                 .table = &table_,
                 .funnel = &funnel_,
                 .usage = &usage_}),
      launcher_(*deps.config, *deps.buckets, *deps.environments, *deps.executor, *deps.store),
      bridge_({.config = deps.config,
               .node = deps.node,
               .store = deps.store,
               .executor = deps.executor,
               .clock = deps.clock,
               .metrics = deps.metrics,
               .table = &table_,
               .funnel = &funnel_,
               .attempts = &attempts_,
               .usage = &usage_,
               .launcher = &launcher_,
               .run_history = &run_history_}),
      studies_({.store = deps.store,
                .executor = deps.executor,
                .admission = deps.admission,
                .clock = deps.clock,
                .jobs = this,
                .webhooks = &deps.config->webhooks}) {}

void Controller::TrialJobCancelRequested(int64_t job_id) {
  auto it = table_.active.find(job_id);
  if (it != table_.active.end()) it->second.rec.cancel_requested = true;
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
  if (!table_.active.empty())
    spdlog::info("recovered {} active job(s) from the store", table_.active.size());
  // A crash between recording a job's end and stopping its other replicas
  // leaves those running: stop them now (jobs that ended in the last day).
  auto ended = store_.EndedJobsSince(clock_.NowMicros() - 24LL * 3600 * 1'000'000);
  if (ended.ok()) {
    for (const store::JobRecord& rec : *ended) {
      ActiveJob a;
      a.rec = rec;
      a.placed = PlacedFromAllocation(rec.allocation, node_);
      for (const json& r : rec.allocation.value("replicas", json::array())) {
        a.replicas.push_back(r.value("name", ""));
      }
      attempts_.Drain(a);
      if (table_.draining.count({rec.id, rec.attempt})) {
        spdlog::warn("job {} ended but replicas of it still ran; stopping them", rec.id);
      }
    }
  }
  usage_.Rebuild(clock_.NowMicros());
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
  Tell([&] { inbox_submitted_.push_back(job); });
}

void Controller::SubmitFailed(int64_t job_id) {
  Tell([&] { inbox_not_stored_.push_back(job_id); });
}

void Controller::StudySubmitted(int64_t study_id) {
  Tell([&] { inbox_studies_.insert(study_id); });
}

void Controller::StudyCancelRequested(int64_t study_id) {
  Tell([&] { inbox_study_cancel_.insert(study_id); });
}

void Controller::CancelRequested(int64_t job_id) {
  Tell([&] { inbox_cancel_.insert(job_id); });
}

std::vector<Controller::QueueEntry> Controller::Queue() const { return bridge_.Queue(); }

json Controller::Nodes() const { return bridge_.Nodes(); }

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

void Controller::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    RunOnce();
    lock.lock();
    if (stop_) break;
    if (inbox_submitted_.empty() && inbox_not_stored_.empty() && inbox_cancel_.empty() &&
        inbox_studies_.empty() && inbox_study_cancel_.empty()) {
      cv_.wait_for(lock, std::chrono::milliseconds(config_.poll_interval_ms));
    }
  }
}

void Controller::RunOnce() {
  std::vector<store::JobRecord> submitted;
  std::vector<int64_t> not_stored;
  std::set<int64_t> cancels, studies, study_cancels;
  std::vector<std::pair<int64_t, std::string>> notes;
  {
    std::lock_guard lock(mu_);
    notes.swap(inbox_notes_);
    not_stored.swap(inbox_not_stored_);
    submitted.swap(inbox_submitted_);
    cancels.swap(inbox_cancel_);
    studies.swap(inbox_studies_);
    study_cancels.swap(inbox_study_cancel_);
  }
  for (int64_t id : studies) studies_.Adopt(id);
  for (int64_t id : study_cancels) studies_.CancelRequested(id);
  // Before the submissions: a failed commit is told before its id can be
  // inserted again, so a later job with the same id is in `submitted` or
  // in a later turn, never taken away here.
  for (int64_t id : not_stored) Forget(id);
  for (store::JobRecord& rec : submitted) {
    if (!table_.active.count(rec.id)) Adopt(std::move(rec));
  }
  for (int64_t id : cancels) {
    auto it = table_.active.find(id);
    if (it != table_.active.end()) it->second.rec.cancel_requested = true;
  }
  for (const auto& [job_id, note] : notes) funnel_.RecordNote(job_id, note);
  Tick();
  if (metrics_) metrics_->ControlLoopPassed();
}

void Controller::Adopt(store::JobRecord rec) {
  ActiveJob a;
  auto job = spec::ParseCustomJob(rec.spec);
  int64_t id = rec.id;
  a.rec = std::move(rec);
  if (!job.ok()) {
    // Stored by an older or damaged daemon: fail it visibly rather than guess.
    a.job.display_name = a.rec.display_name;
    table_.active[id] = std::move(a);
    funnel_.Finish(table_.active[id], JobState::kFailed, "stored spec no longer parses",
                   kRpcInternal, "the stored job spec cannot be read: " + job.status().message());
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
  table_.active[id] = std::move(a);
  table_.schedule_dirty = true;
  if (!requests.ok() && table_.active[id].rec.state == JobState::kQueued) {
    funnel_.Finish(table_.active[id], JobState::kFailed, "cannot be placed", kRpcInternal,
                   requests.status().message());
    return;
  }
  // A PENDING job may have crashed mid-launch: launching again is idempotent.
  if (pending) {
    bridge_.LaunchOrFail(table_.active[id]);
  }
}

void Controller::Forget(int64_t job_id) {
  auto it = table_.active.find(job_id);
  // Its moves failed (the store never had it), so it is still QUEUED and
  // holds nothing.
  if (it == table_.active.end() || it->second.rec.state != JobState::kQueued) return;
  spdlog::warn("job {}: its submission was not stored; forgotten", job_id);
  table_.active.erase(it);
  table_.schedule_dirty = true;
}

void Controller::Tick() {
  // Reap supervisors that exited (stokerd is their subreaper); their status is in files.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  // Fair share counts GPU time up to now, before ended jobs let go of theirs.
  usage_.Accrue(clock_.NowMicros());
  // Ended attempts whose replicas are still stopping hold their resources until they are gone.
  attempts_.ReapDrained();
  for (int64_t study : usage_.EnforceBudgets()) studies_.CancelRequested(study);
  usage_.WatchGpus();
  for (auto& [id, a] : table_.active) {
    if (a.rec.cancel_requested) attempts_.HandleCancel(a);
    if (!spec::IsTerminal(a.rec.state) && a.rec.state != JobState::kQueued) attempts_.Poll(a);
  }
  // Release what ended jobs held; keep replicas that still run as draining.
  for (auto it = table_.active.begin(); it != table_.active.end();) {
    ActiveJob& a = it->second;
    if (!spec::IsTerminal(a.rec.state)) {
      ++it;
      continue;
    }
    attempts_.Drain(a);
    it = table_.active.erase(it);
    table_.schedule_dirty = true;
    ++retention_.ended_since_scan;
  }
  studies_.Tick();
  bridge_.Schedule();
  ApplyRetention(retention_, config_.retention, store_, executor_, clock_.NowMicros());
}

}  // namespace stoker::server
