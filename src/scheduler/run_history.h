// How long a queued job is expected to run, from how long similar jobs ran:
// the run time the queue's estimated starts assume (policy.h rule 8,
// RunningJob/QueuedJob::expected_runtime_s). Never the job's timeout: a
// 7-day default timeout is no run time, so without history the answer is
// "unknown" (0).
//
// Pure and in memory: the daemon feeds it the successful runs it loads from
// the store at start and those that end later. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace stoker::scheduler {

// What makes two jobs similar. Runs match first by `user` and
// `display_name`; else by `shape`, the same code on the same machines.
struct RunKey {
  std::string user;
  std::string display_name;
  std::string shape;  // ShapeKey of the job's spec
};

// The shape of a CustomJob (JSON, `jobSpec` or a bare CustomJobSpec): per
// worker pool its image (containerSpec.imageUri, or the executor image and
// python module of pythonPackageSpec), machine type, accelerator type and
// count, and replica count. "" when the spec has no pools.
std::string ShapeKey(const nlohmann::json& job_spec);

class RunHistory {
 public:
  // Keeps the last `keep` runs per key (the median is over those).
  explicit RunHistory(size_t keep = 5) : keep_(keep) {}

  // Records a successful run of `seconds` (> 0; others are ignored), in the
  // order the runs ended.
  void Add(const RunKey& key, double seconds);

  // The median of the last runs of the same user and display name; else of
  // the same shape; 0 when there are none (unknown). Whole seconds, at least 1.
  int64_t ExpectedSeconds(const RunKey& key) const;

 private:
  static int64_t Median(const std::deque<double>& runs);
  void Push(std::deque<double>& runs, double seconds);

  size_t keep_;
  std::map<std::pair<std::string, std::string>, std::deque<double>> by_name_;
  std::map<std::string, std::deque<double>> by_shape_;
};

}  // namespace stoker::scheduler
