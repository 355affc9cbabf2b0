#include "server/job_table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "storage/buckets.h"

namespace stoker::server {

using nlohmann::json;
using spec::JobState;

std::vector<scheduler::PlacedReplica> PlacedFromAllocation(const json& allocation,
                                                           const resources::Node& node) {
  std::vector<scheduler::PlacedReplica> out;
  for (const json& r : allocation.value("replicas", json::array())) {
    scheduler::PlacedReplica p;
    p.node = 0;  // one local node
    p.cpus = r.value("cpus", 0.0);
    p.memory_bytes = r.value("memory_bytes", uint64_t{0});
    if (r.contains("gpu_shares")) {
      for (const json& g : r["gpu_shares"]) {
        p.gpus.push_back(
            {g.value("gpu", 0), g.value("fraction", 1.0), g.value("memory_bytes", uint64_t{0})});
      }
    } else {
      for (const json& g : r.value("gpus", json::array())) {
        int index = g.get<int>();
        uint64_t memory = 0;
        for (const resources::Gpu& gpu : node.gpus) {
          if (gpu.index == index) memory = gpu.memory_bytes;
        }
        p.gpus.push_back({index, 1.0, memory});
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

void AddPorts(const json& allocation, std::set<int>& ports) {
  if (!allocation.is_object()) return;
  for (const json& r : allocation.value("replicas", json::array())) {
    if (r.is_object() && r.contains("port") && r["port"].is_number_integer()) {
      ports.insert(r["port"].get<int>());
    }
  }
}

std::string OutputUri(const spec::CustomJob& job, int64_t id) {
  std::string base = job.job_spec.base_output_directory;
  if (base.empty())
    base = std::string("gs://") + storage::kOutputsBucket + "/" + std::to_string(id);
  if (base.back() != '/') base += '/';
  return base;
}

json WebhookJob(const store::JobRecord& r, int attempt) {
  return {{"id", std::to_string(r.id)},
          {"name", "projects/" + r.project + "/locations/" + r.location + "/customJobs/" +
                       std::to_string(r.id)},
          {"displayName", r.display_name},
          {"user", r.user},
          {"attempt", attempt}};
}

scheduler::RunKey RunKeyOf(const store::JobRecord& rec) {
  return {rec.user, rec.display_name, scheduler::ShapeKey(rec.spec)};
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

bool JobFunnel::Move(ActiveJob& a, JobState to, const std::string& reason,
                     store::TransitionUpdate update) {
  if (!webhooks_.empty()) {
    // Webhook deliveries are written with the transition: one commit, never lost.
    json body = {{"job", WebhookJob(a.rec, update.attempt.value_or(a.rec.attempt))},
                 {"from", spec::JobStateName(a.rec.state)},
                 {"to", spec::JobStateName(to)},
                 {"reason", reason}};
    if (update.error_code && *update.error_code != 0) {
      body["error"] = {{"code", *update.error_code},
                       {"message", update.error_message.value_or("")}};
    }
    const int64_t now = clock_.NowMicros();
    for (const char* event : {"job.state", "job.failed"}) {
      if (event == std::string("job.failed") && to != JobState::kFailed) continue;
      for (store::OutboxMessage& m : WebhookMessages(webhooks_, event, body, now)) {
        update.outbox.push_back(std::move(m));
      }
    }
  }
  Status s = store_.Transition(a.rec.id, a.rec.state, to, reason, update);
  if (!s.ok()) {
    spdlog::error("job {}: cannot record {} -> {}: {}", a.rec.id, spec::JobStateName(a.rec.state),
                  spec::JobStateName(to), s.ToString());
    return false;
  }
  if (metrics_ && to == JobState::kRunning && a.rec.start_time_us == 0 && update.start_time_us) {
    // Its first start (a retry keeps the first start time).
    metrics_->JobStarted(std::max<int64_t>(0, *update.start_time_us - a.rec.create_time_us) / 1e6);
  }
  a.rec.state = to;
  if (update.start_time_us) a.rec.start_time_us = *update.start_time_us;
  if (to == JobState::kSucceeded && a.rec.start_time_us) {
    int64_t end_us = update.end_time_us.value_or(clock_.NowMicros());
    run_history_.Add(RunKeyOf(a.rec), (end_us - a.rec.start_time_us) / 1e6);
  }
  return true;
}

void JobFunnel::Finish(ActiveJob& a, JobState to, const std::string& reason, int error_code,
                       const std::string& error_message) {
  store::TransitionUpdate u;
  u.end_time_us = clock_.NowMicros();
  if (error_code != 0) {
    u.error_code = error_code;
    u.error_message = error_message;
  }
  if (!Move(a, to, reason, u)) return;
  spdlog::info("job {} {}: {}", a.rec.id, spec::JobStateName(to), reason);
}

void JobFunnel::RecordNote(int64_t job_id, const std::string& note) {
  constexpr size_t kMaxRememberedNotes = 10000;
  auto key = std::make_pair(job_id, note);
  if (noted_.count(key)) return;
  if (noted_.size() >= kMaxRememberedNotes) noted_.clear();
  noted_.insert(key);
  auto events = store_.Events(job_id);
  if (!events.ok()) return;  // the job is gone
  for (const store::Event& e : *events) {
    if (e.reason == note) return;
  }
  (void)store_.AddEvent(job_id, note);
}

}  // namespace stoker::server
