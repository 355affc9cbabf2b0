// Gang placement on one node: pure functions of the requests, the node and
// what is already booked. The FIFO queue in the controller calls these; the
// full policy (priorities, fair share, backfill) is issue #4.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "resources/resources.h"
#include "spec/custom_job.h"

namespace stoker::scheduler {

struct ReplicaRequest {
  std::string name;  // workerpool<i>-<j>
  int pool = 0;
  int index = 0;
  double cpus = 0;  // already clamped to the node
  uint64_t memory_bytes = 0;
  int gpus = 0;
  std::string gpu_type;  // Vertex enum name; "" when gpus == 0
  bool clamped = false;  // the machine type asked for more than the node has
};

// What the replicas of one job ask for. InvalidArgument naming the field for
// an unknown machine type.
Result<std::vector<ReplicaRequest>> RequestsFor(const spec::CustomJobSpec& spec,
                                                const resources::Node& node,
                                                const std::string& field_prefix);

struct Booked {
  double cpus = 0;
  uint64_t memory_bytes = 0;
  std::set<int> gpus;
};

struct ReplicaPlacement {
  std::string name;
  double cpus = 0;
  uint64_t memory_bytes = 0;
  std::vector<int> gpus;
  std::vector<std::string> substitutions;  // "NVIDIA_TESLA_T4 -> gpu 1 (NVIDIA_L4)"
};

struct Options {
  double cpu_oversubscription = 1.0;
  bool accelerator_substitution = true;
};

// Places every replica or none. On failure `why` says what is missing.
std::optional<std::vector<ReplicaPlacement>> PlaceGang(const std::vector<ReplicaRequest>& requests,
                                                       const resources::Node& node,
                                                       const Booked& booked, const Options& options,
                                                       std::string* why);

// InvalidArgument with the numbers when the job could not run even on the
// empty node (more GPUs of a kind than exist).
Status CheckCanEverFit(const std::vector<ReplicaRequest>& requests, const resources::Node& node,
                       const Options& options, const std::string& field_prefix);

}  // namespace stoker::scheduler
