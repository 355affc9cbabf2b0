#include "scheduler/placement.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace stoker::scheduler {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string Gb(uint64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << bytes / kGiB << " GB";
  return s.str();
}

bool GpuServes(const resources::Gpu& gpu, const std::string& type, const Options& options) {
  if (gpu.type == type) return true;
  if (!options.accelerator_substitution) return false;
  return gpu.memory_bytes >= resources::AcceleratorMemoryBytes(type);
}

}  // namespace

Result<std::vector<ReplicaRequest>> RequestsFor(const spec::CustomJobSpec& spec,
                                                const resources::Node& node,
                                                const std::string& field_prefix) {
  std::vector<ReplicaRequest> out;
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[p];
    if (pool.empty) continue;
    std::string field = field_prefix + "workerPoolSpecs[" + std::to_string(p) + "].machineSpec";
    auto shape = resources::LookupMachineType(pool.machine_spec.machine_type);
    if (!shape) {
      return InvalidArgument(field + ".machineType: unknown machine type '" +
                             pool.machine_spec.machine_type +
                             "'; use a Vertex type such as n1-standard-4, e2-standard-8, "
                             "a2-highgpu-1g or g2-standard-8");
    }
    ReplicaRequest r;
    r.pool = static_cast<int>(p);
    double want_mem = shape->memory_gb * kGiB;
    r.cpus = std::min(shape->vcpus, node.cpus);
    r.memory_bytes =
        static_cast<uint64_t>(std::min(want_mem, static_cast<double>(node.memory_bytes)));
    r.clamped = shape->vcpus > node.cpus || want_mem > static_cast<double>(node.memory_bytes);
    if (pool.machine_spec.accelerator_count > 0) {
      r.gpus = pool.machine_spec.accelerator_count;
      r.gpu_type = pool.machine_spec.accelerator_type;
    } else if (shape->gpu_count > 0) {
      r.gpus = shape->gpu_count;
      r.gpu_type = shape->gpu_type;
    }
    for (int64_t i = 0; i < pool.replica_count; ++i) {
      r.index = static_cast<int>(i);
      r.name = "workerpool" + std::to_string(p) + "-" + std::to_string(i);
      out.push_back(r);
    }
  }
  return out;
}

std::optional<std::vector<ReplicaPlacement>> PlaceGang(const std::vector<ReplicaRequest>& requests,
                                                       const resources::Node& node,
                                                       const Booked& booked, const Options& options,
                                                       std::string* why) {
  double cpu_cap = node.cpus * options.cpu_oversubscription;
  double mem_cap = static_cast<double>(node.memory_bytes) * options.cpu_oversubscription;
  double cpus = booked.cpus;
  double mem = static_cast<double>(booked.memory_bytes);
  std::set<int> busy = booked.gpus;
  std::vector<ReplicaPlacement> out;
  for (const ReplicaRequest& r : requests) {
    ReplicaPlacement p{r.name, r.cpus, r.memory_bytes, {}, {}};
    if (cpus + r.cpus > cpu_cap + 1e-9) {
      if (why) {
        *why = "needs " + std::to_string(static_cast<int>(std::ceil(r.cpus))) + " CPUs for " +
               r.name + ", " + std::to_string(std::max(0.0, cpu_cap - cpus)) + " free";
      }
      return std::nullopt;
    }
    if (mem + static_cast<double>(r.memory_bytes) > mem_cap + 1) {
      if (why) {
        *why = "needs " + Gb(r.memory_bytes) + " memory for " + r.name + ", " +
               Gb(static_cast<uint64_t>(std::max(0.0, mem_cap - mem))) + " free";
      }
      return std::nullopt;
    }
    // Exact type first, then substitutes.
    for (int pass = 0; pass < 2 && static_cast<int>(p.gpus.size()) < r.gpus; ++pass) {
      for (const resources::Gpu& g : node.gpus) {
        if (static_cast<int>(p.gpus.size()) == r.gpus) break;
        if (busy.count(g.index)) continue;
        bool exact = g.type == r.gpu_type;
        if (pass == 0 ? !exact : (exact || !GpuServes(g, r.gpu_type, options))) continue;
        p.gpus.push_back(g.index);
        busy.insert(g.index);
        if (!exact) {
          p.substitutions.push_back(r.gpu_type + " served by GPU " + std::to_string(g.index) +
                                    " (" + g.type + ")");
        }
      }
    }
    if (static_cast<int>(p.gpus.size()) < r.gpus) {
      if (why) {
        int free = 0;
        for (const resources::Gpu& g : node.gpus) {
          if (!booked.gpus.count(g.index) && GpuServes(g, r.gpu_type, options)) ++free;
        }
        *why = "needs " + std::to_string(r.gpus) + "x " + r.gpu_type + " for " + r.name + ", " +
               std::to_string(free) + " free";
      }
      return std::nullopt;
    }
    cpus += r.cpus;
    mem += static_cast<double>(r.memory_bytes);
    out.push_back(std::move(p));
  }
  return out;
}

Status CheckCanEverFit(const std::vector<ReplicaRequest>& requests, const resources::Node& node,
                       const Options& options, const std::string& field_prefix) {
  std::string why;
  if (PlaceGang(requests, node, Booked{}, options, &why)) return OkStatus();
  for (const ReplicaRequest& r : requests) {
    if (r.gpus == 0) continue;
    int serving = 0;
    for (const resources::Gpu& g : node.gpus) serving += GpuServes(g, r.gpu_type, options);
    return InvalidArgument(field_prefix + "workerPoolSpecs[" + std::to_string(r.pool) +
                           "].machineSpec.acceleratorCount: the job needs " + why +
                           " even on an idle machine; this machine has " +
                           std::to_string(node.gpus.size()) + " GPU(s), " +
                           std::to_string(serving) + " of which can serve " + r.gpu_type +
                           " (declare GPUs under inventory: in the config, or ask for fewer)");
  }
  return InvalidArgument(field_prefix + "workerPoolSpecs: the job cannot fit on this machine: " +
                         why + " (raise cpu_oversubscription in the config or use fewer replicas)");
}

}  // namespace stoker::scheduler
