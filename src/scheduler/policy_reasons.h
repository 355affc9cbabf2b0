// Internal to the scheduling policy (policy.h is its only public header):
// rule 8, the words. Why a job can never run (ShapeProblem, NeverFitsProblem),
// why a job does not fit now (Diagnose, in numbers), and the detailed reason
// each kind of wait gets. Only the first PolicyOptions::detailed_reasons
// waits pay for these; none of them is on the per-job path of a long queue.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/policy_cluster.h"
#include "scheduler/policy_shape.h"

namespace stoker::scheduler::internal {

// Why these asks can never be placed as given (bad GPU count, no GPU type,
// bad CPU count, no replicas); "" when they are well formed.
std::string ShapeProblem(const std::vector<ReplicaAsk>& replicas);

// "can never run on this cluster even when idle: <why>", for a shape that
// does not fit `idle`, the cluster with nothing booked.
std::string NeverFitsProblem(const Cluster& c, const State& idle, const Shape& shape,
                             const PolicyOptions& o);

// Aggregates of one state that explanations need: the most free on any one
// node. Valid for one state version; Diagnose fills it lazily.
struct Summary {
  bool cpu_done = false;
  double most_cpu = 0, most_mem = 0;
  // Per serving set: most free whole GPUs on one node, most room on one GPU.
  std::unordered_map<const Serving*, std::pair<int, double>> gpus;
};

// Why `shape` does not fit on `s`, in numbers. `sum` must be empty or filled
// by earlier calls on `s` as it stands now.
std::string Diagnose(const Cluster& c, const State& s, const Shape& shape, const PolicyOptions& o,
                     Summary& sum);

// "starts at 2026-11-22T10:00:00Z after jobs 12, 15 end", or that the start
// is unknown (start_us 0). With `expected_us` (the expected run times'
// start, the queue's estimate; 0 when unknown) that is the time said, and
// r.start_us, the latest start (the jobs ahead reaching their time
// limits), follows it: one estimate everywhere, the bound as such.
std::string ReservationText(const Reservation& r, std::optional<int64_t> expected_us = {});

// Appends "; N jobs ahead in the queue" ("1 job" for one); nothing for 0.
void AppendJobsAhead(std::string& out, int ahead);

// The detailed reasons of rule 8, one per kind of wait. `diagnosis` is
// Diagnose's text for the job's shape; `ahead` the waiting jobs ahead of it;
// `holder` the reservation holder's job id and `reserved` its
// ReservationText.
std::string QuotaJobsReason(const std::string& user, int jobs, int max_jobs);
std::string QuotaGpusReason(const std::string& user, double gpus, double max_gpus, double needs);
std::string ReservedReason(std::string diagnosis, const std::string& reserved);
std::string ResourcesReason(std::string diagnosis, int ahead);
std::string BackfillOffReason(const std::string& holder, int ahead);
std::string WouldDelayReason(const std::string& holder, const std::string& reserved);

}  // namespace stoker::scheduler::internal
