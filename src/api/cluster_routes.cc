// Stoker's own read-only views of the cluster (not part of the Vertex API):
//   GET /v1/stoker/queue  the queue in the order the scheduler takes it, with
//                         each job's reason to wait and estimated start
//   GET /v1/stoker/nodes  nodes, their GPUs and what holds each
// Every role may read them (like Slurm's squeue and sinfo): they show job
// ids, users, positions and GPUs, never specs or logs; a job's display name
// only to those who may see the job (its owner, admins, viewers).
#include "api/routes.h"
#include "auth/auth.h"
#include "common/time.h"
#include "resources/nvml.h"

namespace stoker::api {

using nlohmann::json;

std::optional<http::Response> HandleClusterRoutes(const ApiDeps& d, const http::Request& req,
                                                  const auth::Principal& caller) {
  if (req.path == "/v1/stoker/queue") {
    if (req.method != "GET") return Error(InvalidArgument("only GET is supported on " + req.path));
    json jobs = json::array();
    int position = 0;
    for (const ControlPlane::QueueEntry& e : d.control_plane->Queue()) {
      json j = {{"position", ++position},
                {"jobId", std::to_string(e.job_id)},
                {"displayName", e.display_name},
                {"user", e.user},
                {"priority", e.priority},
                {"effectivePriority", e.effective_priority},
                {"createTime", FormatRfc3339(e.create_time_us)},
                {"gpus", e.gpus},
                {"reason", e.reason}};
      if (e.estimated_start_us) j["estimatedStartTime"] = FormatRfc3339(e.estimated_start_us);
      if (!auth::CanSee(caller, e.user)) j.erase("displayName");
      jobs.push_back(std::move(j));
    }
    return Json({{"jobs", jobs}});
  }
  if (req.path == "/v1/stoker/nodes") {
    if (req.method != "GET") return Error(InvalidArgument("only GET is supported on " + req.path));
    json nodes = d.control_plane->Nodes();
    // Live utilization and memory in use, where NVML answers (this node
    // only), for GPUs that were found through NVML (they have a UUID): a GPU
    // declared in the config is not the physical GPU of the same index.
    std::vector<resources::GpuUsage> usage = resources::QueryGpuUsage();
    if (!usage.empty() && nodes.contains("nodes") && !nodes["nodes"].empty()) {
      for (json& gpu : nodes["nodes"][0]["gpus"]) {
        if (gpu.value("uuid", "").empty()) continue;
        for (const resources::GpuUsage& u : usage) {
          if (u.index != gpu.value("index", -1)) continue;
          gpu["utilization_percent"] = u.utilization_percent;
          gpu["memory_used_bytes"] = u.memory_used_bytes;
        }
      }
    }
    return Json(nodes);
  }
  return std::nullopt;
}

}  // namespace stoker::api
