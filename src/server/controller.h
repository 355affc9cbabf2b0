// The control loop: the one thread that changes job state (DESIGN.md §2).
//
// It owns the in-memory view of active jobs, the FIFO queue and the
// bookings. API handlers tell it about new jobs and cancel requests after
// they are durable in the store; it also finds them on its own at start
// (Recover), so a crash between the store commit and the notification loses
// nothing. Each state change is committed to the store before anything acts
// on it, and a launch is idempotent, so a crash anywhere is resolved by
// recovery.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "exec/environments.h"
#include "exec/executor.h"
#include "resources/resources.h"
#include "scheduler/placement.h"
#include "server/config.h"
#include "spec/custom_job.h"
#include "spec/study.h"
#include "storage/buckets.h"
#include "store/store.h"
#include "tune/sampler.h"

namespace stoker::server {

// The bucket that holds outputs of jobs without baseOutputDirectory.
inline constexpr char kDefaultOutputBucket[] = "stoker-outputs";

class Controller {
 public:
  // All references must outlive the controller.
  Controller(const Config& config, const resources::Node& node, store::Store& store,
             exec::Executor& executor, storage::Buckets& buckets,
             const exec::Environments& environments);
  ~Controller();

  // Loads active jobs from the store (re-adopting running replicas) and
  // starts the loop thread.
  Status Start();
  // Stops the loop thread. Running replicas keep running.
  void Stop();

  // Thread-safe notifications from API handlers, after the store commit.
  void Submitted(const store::JobRecord& job);
  void CancelRequested(int64_t job_id);
  void StudySubmitted(int64_t study_id);
  void StudyCancelRequested(int64_t study_id);

 private:
  struct Active {
    store::JobRecord rec;
    spec::CustomJob job;
    std::vector<std::string> replicas;  // names, once placed
    scheduler::Booked booked;
    int64_t last_cancel_us = 0;
    int64_t placed_us = 0;
  };
  struct Draining {  // ended jobs whose replicas are still being stopped
    int attempt = 0;
    std::vector<std::string> replicas;
    scheduler::Booked booked;
  };

  // A hyperparameter tuning job being driven (studies.cc).
  struct Study {
    store::StudyRecord rec;
    spec::HyperparameterTuningJob job;
    tune::Space space;
    std::unique_ptr<tune::Sampler> sampler;
    std::vector<store::TrialRecord> trials;
    std::map<int64_t, int64_t> metrics_mtime;  // trial id -> metrics file mtime seen
    bool grid_exhausted = false;
  };

  void AdoptStudy(store::StudyRecord rec);
  void TickStudies();
  void TickStudy(Study& s);
  void UpdateTrial(Study& s, store::TrialRecord& t);
  void SuggestTrials(Study& s);
  void StopTrialJob(int64_t job_id, const std::string& reason);
  bool MoveStudy(Study& s, spec::JobState to, store::TransitionUpdate update = {});
  void FinishStudy(Study& s, spec::JobState to, int error_code, const std::string& message);

  void Loop();
  void Tick();
  void Adopt(store::JobRecord rec);
  void HandleCancel(Active& a);
  void PollJob(Active& a);
  void Schedule();
  Status Launch(Active& a);
  Result<exec::JobLaunch> BuildLaunch(const Active& a);
  // Commits a transition and updates the in-memory record; false if the store refused.
  bool Move(Active& a, spec::JobState to, const std::string& reason,
            store::TransitionUpdate update = {});
  void Finish(Active& a, spec::JobState to, const std::string& reason, int error_code,
              const std::string& error_message);
  void Book(const scheduler::Booked& b, int sign);
  std::string LogTail(const Active& a, const std::string& replica) const;

  const Config& config_;
  const resources::Node& node_;
  store::Store& store_;
  exec::Executor& executor_;
  storage::Buckets& buckets_;
  const exec::Environments& environments_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<store::JobRecord> inbox_submitted_;
  std::set<int64_t> inbox_cancel_;
  std::set<int64_t> inbox_studies_;
  std::set<int64_t> inbox_study_cancel_;

  // Loop-thread state.
  std::map<int64_t, Active> active_;
  std::map<int64_t, Draining> draining_;
  scheduler::Booked booked_;
  std::map<int64_t, Study> studies_;
  std::thread thread_;
};

}  // namespace stoker::server
