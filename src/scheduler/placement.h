// From a job's spec to what the scheduling policy (policy.h) places: one
// ReplicaAsk per replica, with the names and positions the executor needs.
// Pure functions of the spec, the nodes and the options.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "resources/resources.h"
#include "scheduler/policy.h"
#include "spec/custom_job.h"

namespace stoker::scheduler {

struct ReplicaRequest {
  std::string name;  // workerpool<i>-<j>
  int pool = 0;
  int index = 0;
  ReplicaAsk ask;        // CPUs and memory already clamped to the largest node
  bool clamped = false;  // the machine type asked for more than any node has
};

// What the replicas of one job ask for, in launch order (pool, then index):
// the machine type's vCPUs and memory (clamped to the largest node) and its
// accelerators (acceleratorCount, a share of one GPU when below 1, or the
// machine type's built-in GPUs). Machine types are looked up in
// `machine_types` (the config's) before the built-in catalog.
// InvalidArgument naming the field for an unknown machine type.
Result<std::vector<ReplicaRequest>> RequestsFor(
    const spec::CustomJobSpec& spec, const std::vector<resources::Node>& nodes,
    const std::string& field_prefix, const resources::MachineCatalog& machine_types = {});

// The asks of `requests`, in order (QueuedJob::replicas).
std::vector<ReplicaAsk> AsksOf(const std::vector<ReplicaRequest>& requests);

// InvalidArgument naming the field, with the numbers, when the job could not
// run even on the idle cluster (more GPUs of a kind than exist, say).
Status CheckCanEverFit(const std::vector<ReplicaRequest>& requests,
                       const std::vector<resources::Node>& nodes, const PolicyOptions& options,
                       const std::string& field_prefix);

}  // namespace stoker::scheduler
