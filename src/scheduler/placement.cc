#include "scheduler/placement.h"

#include <algorithm>

namespace stoker::scheduler {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

}  // namespace

Result<std::vector<ReplicaRequest>> RequestsFor(const spec::CustomJobSpec& spec,
                                                const std::vector<resources::Node>& nodes,
                                                const std::string& field_prefix,
                                                const resources::MachineCatalog& machine_types) {
  double max_cpus = 0, max_mem = 0;
  for (const resources::Node& n : nodes) {
    max_cpus = std::max(max_cpus, n.cpus);
    max_mem = std::max(max_mem, static_cast<double>(n.memory_bytes));
  }
  std::vector<ReplicaRequest> out;
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[p];
    if (pool.empty) continue;
    std::string field = field_prefix + "workerPoolSpecs[" + std::to_string(p) + "].machineSpec";
    auto shape = resources::LookupMachineType(pool.machine_spec.machine_type, machine_types);
    if (!shape) {
      return InvalidArgument(field + ".machineType: unknown machine type '" +
                             pool.machine_spec.machine_type +
                             "'; use a Vertex type such as n1-standard-4, e2-standard-8, "
                             "a2-highgpu-1g or g2-standard-8, or define it under machine_types: "
                             "in the daemon's config");
    }
    ReplicaRequest r;
    r.pool = static_cast<int>(p);
    double want_mem = shape->memory_gb * kGiB;
    r.ask.cpus = std::min(shape->vcpus, max_cpus);
    r.ask.memory_bytes = static_cast<uint64_t>(std::min(want_mem, max_mem));
    r.clamped = shape->vcpus > max_cpus || want_mem > max_mem;
    if (pool.machine_spec.accelerator_count > 0) {
      r.ask.gpus = pool.machine_spec.accelerator_count;
      r.ask.gpu_type = pool.machine_spec.accelerator_type;
    } else if (shape->gpu_count > 0) {
      r.ask.gpus = shape->gpu_count;
      r.ask.gpu_type = shape->gpu_type;
    }
    for (int64_t i = 0; i < pool.replica_count; ++i) {
      r.index = static_cast<int>(i);
      r.name = "workerpool" + std::to_string(p) + "-" + std::to_string(i);
      out.push_back(r);
    }
  }
  return out;
}

std::vector<ReplicaAsk> AsksOf(const std::vector<ReplicaRequest>& requests) {
  std::vector<ReplicaAsk> asks;
  asks.reserve(requests.size());
  for (const ReplicaRequest& r : requests) asks.push_back(r.ask);
  return asks;
}

Status CheckCanEverFit(const std::vector<ReplicaRequest>& requests,
                       const std::vector<resources::Node>& nodes, const PolicyOptions& options,
                       const std::string& field_prefix) {
  QueuedJob job;
  job.id = "new";
  job.replicas = AsksOf(requests);
  Status s = ValidateJob(job, nodes, options);
  if (s.ok()) return s;
  // The policy says "job new: <problem>"; point at the pool that asks for GPUs.
  std::string problem = s.message();
  if (size_t colon = problem.find(": "); colon != std::string::npos) problem.erase(0, colon + 2);
  size_t gpus = 0;
  for (const resources::Node& n : nodes) gpus += n.gpus.size();
  for (const ReplicaRequest& r : requests) {
    if (r.ask.gpus <= 0) continue;
    return InvalidArgument(
        field_prefix + "workerPoolSpecs[" + std::to_string(r.pool) +
        "].machineSpec.acceleratorCount: the job " + problem + "; the cluster has " +
        std::to_string(gpus) +
        " GPU(s) (declare GPUs under inventory: in the config, or ask for fewer)");
  }
  return InvalidArgument(field_prefix + "workerPoolSpecs: the job " + problem +
                         " (raise cpu_oversubscription in the config or use fewer replicas)");
}

}  // namespace stoker::scheduler
