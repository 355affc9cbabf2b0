// What the API needs from the control plane (DESIGN.md §2): notifications
// of the intents a route stores, and the views the
// scheduler publishes. server::Controller implements it; route tests use a
// fake. So src/api depends on this interface, never on src/server.
//
// Every method is thread-safe and returns at once: notifications only wake
// the control loop (which also finds every intent in the store on its own at
// start, so a notification lost in a crash loses nothing), and the views are
// copies of what the last scheduling decision published.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/store.h"

namespace stoker::api {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  // A job was inserted as QUEUED and its commit is in flight
  // (store::Store::CreateWatcher): the loop may place it and prepare what
  // needs no record while the commit's fsync runs; its first store write
  // about the job waits for the commit and fails if the commit did.
  virtual void Submitted(const store::JobRecord& job) = 0;
  // The commit of a job told as Submitted failed: the job does not exist
  // (and its id may come again with a later job).
  virtual void SubmitFailed(int64_t job_id) = 0;
  // A job's cancel request was stored (store::Store::RequestCancel).
  virtual void CancelRequested(int64_t job_id) = 0;
  // A tuning job was stored as QUEUED.
  virtual void StudySubmitted(int64_t study_id) = 0;
  // A tuning job's cancel request was stored.
  virtual void StudyCancelRequested(int64_t study_id) = 0;
  // Something a route found about a job's files that the job's events
  // should tell (a TensorBoard file skipped: training_metrics_routes.cc).
  // Only the control loop writes events: it records `note` as an event of
  // job `job_id` once; the same (job, note) asked again adds nothing, across
  // restarts too. Notes beyond a bound while the loop is busy are dropped
  // (the route asks again on its next read). Fakes that do not care need not
  // override it.
  virtual void NoteJobEvent(int64_t job_id, const std::string& note) {
    (void)job_id;
    (void)note;
  }

  // One queued job as the policy sees it, for `stoker queue`.
  struct QueueEntry {
    int64_t job_id = 0;
    std::string display_name;
    std::string user;
    int priority = 0;
    int64_t effective_priority = 0;  // with aging
    int64_t create_time_us = 0;
    std::string gpus;                // "2x NVIDIA_TESLA_T4", "" for none
    std::string reason;              // why it waits
    int64_t estimated_start_us = 0;  // 0 = unknown
  };
  // The queue in the order the policy takes it, as of the last decision.
  virtual std::vector<QueueEntry> Queue() const = 0;
  // Nodes, their GPUs and what holds each ({"nodes": [...]}) as of the last
  // decision; see cluster_routes.cc for the shape.
  virtual nlohmann::json Nodes() const = 0;
};

}  // namespace stoker::api
