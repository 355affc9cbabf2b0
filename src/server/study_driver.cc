#include "server/study_driver.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "common/files.h"
#include "common/time.h"
#include "study/study_logic.h"
#include "tune/early_stopping.h"

namespace stoker::server {
namespace {

using nlohmann::json;
using spec::JobState;
using store::TrialState;
using study::AssignmentFromJson;
using study::FinalMeasurement;
using study::MetricValue;
using study::ParametersJson;
using study::ParseMetricsFile;
using study::ToTuneAlgorithm;
using study::ToTuneSpace;
using study::TrialArgs;

// A trial's metrics file is read whole at each change: bounded, so that a
// trainer cannot fill the daemon's memory (about 700,000 reports).
constexpr size_t kMaxMetricsFileBytes = 64 << 20;

using spec::kRpcCancelled;
using spec::kRpcUnknown;

bool TrialRunning(const store::TrialRecord& t) {
  return t.state == TrialState::kActive || t.state == TrialState::kStopping ||
         t.state == TrialState::kRequested;
}

// The x coordinate of a measurement for early stopping.
double CurveX(const json& m, bool elapsed) {
  if (elapsed) {
    auto d = ParseDuration(m.value("elapsedDuration", "0s"), "elapsedDuration");
    return d.ok() ? *d : 0;
  }
  return std::atof(m.value("stepCount", "0").c_str());
}

tune::Curve ToCurve(const json& measurements, const std::string& metric, bool elapsed) {
  tune::Curve c;
  for (const json& m : measurements) {
    if (auto v = MetricValue(m, metric)) c.push_back({CurveX(m, elapsed), *v});
  }
  return c;
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

StudyDriver::StudyDriver(StudyDriverDeps deps)
    : store_(*deps.store),
      executor_(*deps.executor),
      admission_(*deps.admission),
      clock_(*deps.clock),
      jobs_(*deps.jobs),
      webhooks_(deps.webhooks) {}

Status StudyDriver::Recover() {
  STOKER_ASSIGN_OR_RETURN(std::vector<store::StudyRecord> studies, store_.ActiveStudies());
  for (store::StudyRecord& rec : studies) AdoptStudy(std::move(rec));
  return OkStatus();
}

void StudyDriver::Adopt(int64_t study_id) {
  if (studies_.count(study_id)) return;
  auto rec = store_.GetStudy(study_id);
  if (rec.ok()) AdoptStudy(std::move(rec).value());
}

void StudyDriver::CancelRequested(int64_t study_id) {
  auto it = studies_.find(study_id);
  if (it != studies_.end()) it->second.rec.cancel_requested = true;
}

void StudyDriver::AdoptStudy(store::StudyRecord rec) {
  int64_t id = rec.id;
  Study s;
  auto job = spec::ParseHyperparameterTuningJob(rec.spec);
  s.rec = std::move(rec);
  if (!job.ok()) {
    studies_[id] = std::move(s);
    FinishStudy(studies_[id], JobState::kFailed, spec::kRpcInternal,
                "the stored study spec cannot be read: " + job.status().message());
    return;
  }
  s.job = std::move(job).value();
  s.space = ToTuneSpace(s.job.study_spec);
  s.sampler =
      tune::MakeSampler(ToTuneAlgorithm(s.job.study_spec.algorithm), static_cast<uint64_t>(id));
  auto trials = store_.Trials(id);
  if (trials.ok()) s.trials = std::move(trials).value();
  studies_[id] = std::move(s);
}

bool StudyDriver::MoveStudy(Study& s, JobState to, store::TransitionUpdate update) {
  Status st = store_.TransitionStudy(s.rec.id, s.rec.state, to, update);
  if (!st.ok()) {
    spdlog::error("study {}: cannot record {} -> {}: {}", s.rec.id, spec::JobStateName(s.rec.state),
                  spec::JobStateName(to), st.ToString());
    return false;
  }
  s.rec.state = to;
  return true;
}

void StudyDriver::FinishStudy(Study& s, JobState to, int error_code, const std::string& message) {
  store::TransitionUpdate u;
  u.end_time_us = clock_.NowMicros();
  if (error_code) {
    u.error_code = error_code;
    u.error_message = message;
  }
  if (MoveStudy(s, to, u)) {
    spdlog::info("study {} {}{}", s.rec.id, spec::JobStateName(to),
                 message.empty() ? "" : ": " + message);
  }
}

void StudyDriver::StopTrialJob(int64_t job_id, const std::string& reason) {
  Status st = store_.RequestCancel(job_id);
  if (st.ok()) (void)store_.AddEvent(job_id, reason);
  if (st.ok()) jobs_.TrialJobCancelRequested(job_id);
}

void StudyDriver::Tick() {
  for (auto it = studies_.begin(); it != studies_.end();) {
    TickStudy(it->second);
    if (spec::IsTerminal(it->second.rec.state)) {
      it = studies_.erase(it);
    } else {
      ++it;
    }
  }
}

void StudyDriver::UpdateTrial(Study& s, store::TrialRecord& t) {
  auto job = store_.GetJob(t.job_id);
  if (!job.ok()) return;
  const spec::StudySpec& study = s.job.study_spec;
  const spec::MetricSpec& metric = study.metrics.front();
  bool dirty = false;

  if (t.start_time_us == 0 && job->start_time_us) {
    t.start_time_us = job->start_time_us;
    dirty = true;
  }
  // Follow the metrics file the primary replica writes (hypertune protocol)
  // and the measurements pushed through the API (pushed.metrics, same format).
  // The executor reads both bounded, without following a trainer's link.
  exec::TrialMetrics metrics = executor_.ReadTrialMetrics(
      job->id, job->attempt, "workerpool0-0", kMaxMetricsFileBytes, s.metrics_mtime[t.trial_id]);
  int64_t stamp = metrics.stamp;
  bool changed = false;
  if (stamp != 0 && s.metrics_mtime[t.trial_id] != stamp) {
    for (const std::string& name : metrics.too_large) {
      spdlog::warn("job {}: {} is over {} MiB; its measurements are no longer read", job->id, name,
                   kMaxMetricsFileBytes >> 20);
    }
    json m = ParseMetricsFile(metrics.text, job->start_time_us);
    if (m != t.measurements) {
      t.measurements = std::move(m);
      changed = dirty = true;
    }
    s.metrics_mtime[t.trial_id] = stamp;
  }

  // Early stopping, judged whenever a running trial reports.
  if (changed && t.state == TrialState::kActive && !spec::IsTerminal(job->state) &&
      study.stopping.kind != spec::StoppingSpec::Kind::kNone) {
    bool elapsed = study.stopping.use_elapsed_duration;
    std::vector<tune::Curve> completed;
    for (const store::TrialRecord& o : s.trials) {
      if (o.state == TrialState::kSucceeded)
        completed.push_back(ToCurve(o.measurements, metric.metric_id, elapsed));
    }
    tune::Curve running = ToCurve(t.measurements, metric.metric_id, elapsed);
    bool minimize = metric.goal == spec::Goal::kMinimize;
    bool stop = false;
    if (!running.empty()) {
      stop = study.stopping.kind == spec::StoppingSpec::Kind::kDecayCurve
                 ? tune::DecayCurveStop(completed, running, minimize)
                 : tune::MedianStop(completed, running, minimize);
    }
    if (stop) {
      t.state = TrialState::kStopping;
      t.stopped_early = true;
      dirty = true;
      StopTrialJob(t.job_id,
                   "trial " + std::to_string(t.trial_id) +
                       " stopped early: its measurements fall behind the completed trials");
    }
  }

  if (spec::IsTerminal(job->state)) {
    json final = FinalMeasurement(t.measurements, metric, study.measurement_selection);
    bool completed = job->state == JobState::kSucceeded ||
                     (job->state == JobState::kCancelled && t.stopped_early);
    if (completed && !final.is_null()) {
      t.state = TrialState::kSucceeded;
      t.final_measurement = final;
    } else if (completed) {
      t.state = TrialState::kInfeasible;
      t.infeasible_reason = "the trial ended without reporting metric '" + metric.metric_id +
                            "' (report it with hypertune: report_hyperparameter_tuning_metric("
                            "hyperparameter_metric_tag='" +
                            metric.metric_id + "', ...))";
    } else if (job->state == JobState::kFailed) {
      t.state = TrialState::kInfeasible;
      t.infeasible_reason =
          "trial job " + std::to_string(job->id) + " failed: " + FirstLine(job->error_message);
    } else {
      t.state = TrialState::kInfeasible;
      t.infeasible_reason = "trial job " + std::to_string(job->id) + " was cancelled";
    }
    t.end_time_us = job->end_time_us ? job->end_time_us : clock_.NowMicros();
    dirty = true;
    // Enqueued before the trial is stored: a crash in between tells again
    // after the restart (at least once), never not at all.
    if (t.state == TrialState::kSucceeded) TellIfBest(s, t);
  }
  if (dirty) {
    Status st = store_.UpdateTrial(t);
    if (!st.ok()) spdlog::error("study {} trial {}: {}", s.rec.id, t.trial_id, st.ToString());
  }
}

void StudyDriver::TellIfBest(const Study& s, const store::TrialRecord& t) {
  if (webhooks_ == nullptr || webhooks_->empty()) return;
  const spec::MetricSpec& metric = s.job.study_spec.metrics.front();
  const bool maximize = metric.goal == spec::Goal::kMaximize;
  std::optional<double> value = MetricValue(t.final_measurement, metric.metric_id);
  if (!value) return;
  for (const store::TrialRecord& o : s.trials) {
    if (o.trial_id == t.trial_id || o.state != TrialState::kSucceeded) continue;
    std::optional<double> v = MetricValue(o.final_measurement, metric.metric_id);
    if (v && (maximize ? *v >= *value : *v <= *value)) return;  // not better than this one
  }
  json body = {{"study",
                {{"id", std::to_string(s.rec.id)},
                 {"name", "projects/" + s.rec.project + "/locations/" + s.rec.location +
                              "/hyperparameterTuningJobs/" + std::to_string(s.rec.id)},
                 {"displayName", s.rec.display_name},
                 {"user", s.rec.user}}},
               {"trial",
                {{"id", std::to_string(t.trial_id)},
                 {"parameters", t.parameters},
                 {"finalMeasurement", t.final_measurement}}},
               {"metric",
                {{"metricId", metric.metric_id},
                 {"goal", maximize ? "MAXIMIZE" : "MINIMIZE"},
                 {"value", *value}}}};
  Status st =
      store_.Enqueue(WebhookMessages(*webhooks_, "study.best_trial", body, clock_.NowMicros()));
  if (!st.ok()) {
    spdlog::warn("study {}: cannot enqueue the study.best_trial webhook: {}", s.rec.id,
                 st.ToString());
  }
}

void StudyDriver::TickStudy(Study& s) {
  if (spec::IsTerminal(s.rec.state)) return;
  if (s.rec.state == JobState::kQueued) {
    if (!MoveStudy(s, JobState::kRunning, {.start_time_us = clock_.NowMicros()})) return;
  }
  for (store::TrialRecord& t : s.trials) {
    if (TrialRunning(t)) UpdateTrial(s, t);
  }
  int running = 0, succeeded = 0, infeasible = 0;
  std::string last_failure;
  for (const store::TrialRecord& t : s.trials) {
    if (TrialRunning(t)) ++running;
    if (t.state == TrialState::kSucceeded) ++succeeded;
    if (t.state == TrialState::kInfeasible) {
      ++infeasible;
      last_failure = t.infeasible_reason;
    }
  }

  if (s.rec.cancel_requested) {
    if (s.rec.state == JobState::kRunning && !MoveStudy(s, JobState::kCancelling)) return;
    for (const store::TrialRecord& t : s.trials) {
      if (TrialRunning(t)) StopTrialJob(t.job_id, "the tuning job was cancelled");
    }
    if (running == 0) FinishStudy(s, JobState::kCancelled, kRpcCancelled, "CANCELED");
    return;
  }
  if (!s.cannot_start.empty()) {
    for (const store::TrialRecord& t : s.trials) {
      if (TrialRunning(t)) StopTrialJob(t.job_id, "the tuning job failed: " + s.cannot_start);
    }
    if (running == 0)
      FinishStudy(s, JobState::kFailed, spec::kRpcFailedPrecondition, s.cannot_start);
    return;
  }
  int max_failed = s.job.max_failed_trial_count;
  if (max_failed > 0 && infeasible >= max_failed) {
    for (const store::TrialRecord& t : s.trials) {
      if (TrialRunning(t)) StopTrialJob(t.job_id, "the tuning job failed");
    }
    if (running == 0) {
      FinishStudy(s, JobState::kFailed, kRpcUnknown,
                  std::to_string(infeasible) + " trial(s) failed, reaching maxFailedTrialCount (" +
                      std::to_string(max_failed) + "); the last: " + last_failure);
    }
    return;
  }
  int budget = s.job.max_trial_count;
  bool budget_spent = static_cast<int>(s.trials.size()) >= budget || s.grid_exhausted;
  if (budget_spent) {
    if (running > 0) return;
    if (succeeded > 0) {
      FinishStudy(s, JobState::kSucceeded, 0, "");
    } else {
      FinishStudy(s, JobState::kFailed, kRpcUnknown,
                  "no trial produced the metric '" + s.job.study_spec.metrics.front().metric_id +
                      "'; the last: " + last_failure);
    }
    return;
  }
  int parallel = std::max(1, s.job.parallel_trial_count);
  int slots = std::min(parallel - running, budget - static_cast<int>(s.trials.size()));
  if (slots > 0) SuggestTrials(s);
}

void StudyDriver::SuggestTrials(Study& s) {
  const spec::StudySpec& study = s.job.study_spec;
  const spec::MetricSpec& metric = study.metrics.front();
  bool maximize = metric.goal == spec::Goal::kMaximize;
  std::vector<tune::Observation> done;
  std::vector<tune::Assignment> pending;
  int running = 0;
  for (const store::TrialRecord& t : s.trials) {
    tune::Assignment a = AssignmentFromJson(t.parameters);
    if (TrialRunning(t)) {
      pending.push_back(std::move(a));
      ++running;
    } else if (t.state == TrialState::kSucceeded) {
      auto v = MetricValue(t.final_measurement, metric.metric_id);
      done.push_back(
          {std::move(a), v ? tune::MinimizationObjective(*v, maximize) : 0.0, v.has_value()});
    } else {
      done.push_back({std::move(a), 0.0, false});
    }
  }
  int parallel = std::max(1, s.job.parallel_trial_count);
  int count =
      std::min(parallel - running, s.job.max_trial_count - static_cast<int>(s.trials.size()));
  // Seeded by the study and its progress: a restarted daemon suggests the same points.
  tune::Rng rng(static_cast<uint64_t>(s.rec.id) * 1'000'003ULL + s.trials.size());
  std::vector<tune::Assignment> suggestions =
      s.sampler->Suggest(s.space, done, pending, count, rng);
  if (static_cast<int>(suggestions.size()) < count &&
      study.algorithm == spec::Algorithm::kGridSearch) {
    s.grid_exhausted = true;
  }
  for (const tune::Assignment& a : suggestions) {
    store::TrialRecord t;
    t.study_id = s.rec.id;
    t.trial_id = static_cast<int64_t>(s.trials.size()) + 1;
    t.state = TrialState::kActive;
    t.parameters = ParametersJson(study, a);
    std::string tid = std::to_string(t.trial_id);

    spec::CustomJob cj;
    cj.display_name = s.rec.display_name + "-trial-" + tid;
    cj.labels = s.job.labels;
    cj.job_spec = s.job.trial_job_spec;
    std::vector<std::string> args = TrialArgs(study, a);
    for (spec::WorkerPoolSpec& pool : cj.job_spec.worker_pool_specs) {
      std::vector<std::string>* pool_args = pool.python_package_spec
                                                ? &pool.python_package_spec->args
                                            : pool.container_spec ? &pool.container_spec->args
                                                                  : nullptr;
      if (pool_args) pool_args->insert(pool_args->end(), args.begin(), args.end());
    }
    std::string base = cj.job_spec.base_output_directory;
    if (base.empty()) {
      base = std::string("gs://") + storage::kOutputsBucket + "/hptuning-" +
             std::to_string(s.rec.id) + "/";
    }
    if (base.back() != '/') base += '/';
    cj.job_spec.base_output_directory = base + tid + "/";

    // Admitted as a job would be: what was true when the study was
    // admitted (a bucket, a machine type, an image rule) may not be now.
    auto admitted = admission_.AdmitTrial(cj);
    if (!admitted.ok()) {
      s.cannot_start = "trial " + tid + " cannot start: " + admitted.status().message();
      spdlog::error("study {}: {}", s.rec.id, s.cannot_start);
      return;
    }
    store::NewJob nj;
    nj.project = s.rec.project;
    nj.location = s.rec.location;
    nj.display_name = cj.display_name;
    nj.spec = std::move(admitted->spec);
    nj.warnings = std::move(admitted->warnings);
    nj.study_id = s.rec.id;
    nj.trial_id = tid;
    nj.user = s.rec.user;
    auto rec = store_.CreateTrial(t, nj);
    if (!rec.ok()) {
      spdlog::error("study {}: cannot create trial {}: {}", s.rec.id, tid, rec.status().ToString());
      return;
    }
    t.job_id = rec->id;
    s.trials.push_back(t);
    jobs_.TrialJobStored(*rec);
  }
}

}  // namespace stoker::server
