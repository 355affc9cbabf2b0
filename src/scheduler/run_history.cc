#include "scheduler/run_history.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace stoker::scheduler {

using nlohmann::json;

std::string ShapeKey(const json& job_spec) {
  const json& spec = job_spec.contains("jobSpec") ? job_spec["jobSpec"] : job_spec;
  if (!spec.is_object() || !spec.contains("workerPoolSpecs") ||
      !spec["workerPoolSpecs"].is_array()) {
    return "";
  }
  std::string key;
  for (const json& pool : spec["workerPoolSpecs"]) {
    key += "|";
    if (!pool.is_object() || pool.empty()) continue;
    const json& m = pool.value("machineSpec", json::object());
    std::string code;
    if (pool.contains("containerSpec")) {
      code = pool["containerSpec"].value("imageUri", "");
    } else if (pool.contains("pythonPackageSpec")) {
      const json& p = pool["pythonPackageSpec"];
      code = p.value("executorImageUri", "") + " -m " + p.value("pythonModule", "");
    }
    key += code + ";" + m.value("machineType", "") + ";" + m.value("acceleratorType", "") + ";" +
           m.value("acceleratorCount", json(0)).dump() + ";" +
           pool.value("replicaCount", json(1)).dump();
  }
  return key;
}

void RunHistory::Push(std::deque<double>& runs, double seconds) {
  runs.push_back(seconds);
  while (runs.size() > keep_) runs.pop_front();
}

void RunHistory::Add(const RunKey& key, double seconds) {
  if (!(seconds > 0)) return;
  Push(by_name_[{key.user, key.display_name}], seconds);
  if (!key.shape.empty()) Push(by_shape_[key.shape], seconds);
}

int64_t RunHistory::Median(const std::deque<double>& runs) {
  std::vector<double> v(runs.begin(), runs.end());
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(m)));
}

int64_t RunHistory::ExpectedSeconds(const RunKey& key) const {
  if (auto it = by_name_.find({key.user, key.display_name}); it != by_name_.end()) {
    return Median(it->second);
  }
  if (key.shape.empty()) return 0;
  if (auto it = by_shape_.find(key.shape); it != by_shape_.end()) return Median(it->second);
  return 0;
}

}  // namespace stoker::scheduler
