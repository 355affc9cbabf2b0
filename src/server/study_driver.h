// The tuning-study driver: runs HyperparameterTuningJobs on the control
// loop's thread. Each study asks its sampler for trials, stores each trial
// with a child custom job (trialJobSpec plus `--<parameter>=<value>`
// arguments, its own output directory <base>/<trial id>/ and
// CLOUD_ML_TRIAL_ID) that admission accepted, follows the measurements each
// trial reports, stops trials early when the study's stopping rule says so,
// and ends the study when its trial budget is spent, too many trials
// failed, a trial cannot be admitted, or the user cancelled it.
//
// It talks to the job side only through TrialJobs (two notifications) and
// reads trial jobs from the store and their measurements through the
// Executor. All state is in the store, so a restarted daemon continues the
// same study; suggestions are deterministic given the study id and the
// trials so far. Not thread-safe: the control loop's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "admission/admission.h"
#include "common/clock.h"
#include "exec/executor.h"
#include "server/webhooks.h"
#include "spec/study.h"
#include "store/store.h"
#include "tune/sampler.h"
#include "tune/space.h"

namespace stoker::server {

// What the study driver needs from the job side (the controller): to be
// told of a trial job it stored, and of a cancel it recorded for one.
class TrialJobs {
 public:
  virtual ~TrialJobs() = default;
  // `job` was stored as QUEUED (store::Store::CreateTrial): run it.
  virtual void TrialJobStored(const store::JobRecord& job) = 0;
  // A cancel of trial job `job_id` was stored (store::Store::RequestCancel).
  virtual void TrialJobCancelRequested(int64_t job_id) = 0;
};

// Every pointer must outlive the driver.
struct StudyDriverDeps {
  store::Store* store = nullptr;
  const exec::Executor* executor = nullptr;  // the trials' measurements
  const admission::Admission* admission = nullptr;
  const Clock* clock = &SystemClock();
  TrialJobs* jobs = nullptr;
  // study.best_trial goes to the hooks that asked for it; null = none.
  const std::vector<config::Webhook>* webhooks = nullptr;
};

class StudyDriver {
 public:
  explicit StudyDriver(StudyDriverDeps deps);

  // Loads the studies that have not ended from the store (at start).
  Status Recover();
  // A study stored as QUEUED; a study already driven is ignored.
  void Adopt(int64_t study_id);
  // The user asked to cancel the study (stored already).
  void CancelRequested(int64_t study_id);
  // One turn over every study.
  void Tick();

 private:
  struct Study {
    store::StudyRecord rec;
    spec::HyperparameterTuningJob job;
    tune::Space space;
    std::unique_ptr<tune::Sampler> sampler;
    std::vector<store::TrialRecord> trials;
    std::map<int64_t, int64_t> metrics_mtime;  // trial id -> metrics stamp seen
    bool grid_exhausted = false;
    std::string cannot_start;  // a trial admission refused: the study fails with it
  };

  void AdoptStudy(store::StudyRecord rec);
  void TickStudy(Study& s);
  void UpdateTrial(Study& s, store::TrialRecord& t);
  // study.best_trial when `t` (just succeeded) beats every other succeeded trial.
  void TellIfBest(const Study& s, const store::TrialRecord& t);
  void SuggestTrials(Study& s);
  void StopTrialJob(int64_t job_id, const std::string& reason);
  bool MoveStudy(Study& s, spec::JobState to, store::TransitionUpdate update = {});
  void FinishStudy(Study& s, spec::JobState to, int error_code, const std::string& message);

  store::Store& store_;
  const exec::Executor& executor_;
  const admission::Admission& admission_;
  const Clock& clock_;
  TrialJobs& jobs_;
  const std::vector<config::Webhook>* webhooks_;
  std::map<int64_t, Study> studies_;
};

}  // namespace stoker::server
