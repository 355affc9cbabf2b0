// GET .../customJobs/{id}/trainingMetrics (and AI Platform's
// /v1/projects/{p}/jobs/{jobId}/trainingMetrics): a job's training metrics
// as time series, read when asked from the files the trainer wrote
// (docs/training-metrics.md, docs/decisions/0024):
//   - the chief's hypertune reports of the latest attempt (its
//     CLOUD_ML_HP_METRIC_FILE and the pushed measurements), source "hypertune";
//   - the scalars of every TensorBoard event file under the job's
//     AIP_TENSORBOARD_LOG_DIR (<baseOutputDirectory>/logs/), source "tensorboard";
//     where several processes (replicas) wrote there, each one's series
//     apart, with a "writer" ("<host> pid <pid>", tfevents::EventFileWriter)
//     and, when that process is the trainer a replica's supervisor started
//     (its trainer.json), the "replica" ("workerpool1-0"; "workerpool1-0
//     (attempt 1)" for an earlier attempt's).
// Files or values that cannot be read are listed in "skipped" and become a
// job event each (once), through the control loop (ControlPlane::NoteJobEvent).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

#include "api/routes.h"
#include "exec/replica_files.h"
#include "replica/replica_contract.h"
#include "study/hypertune_report.h"
#include "telemetry/telemetry.h"
#include "tfevents/event_dir.h"

namespace stoker::api {
namespace {

using nlohmann::json;

constexpr size_t kMaxHypertuneBytes = 1 << 20;  // per source (the file, the pushed ones)
constexpr size_t kMaxPoints = 1000;             // per series
constexpr size_t kMaxHypertuneSeries = 256;
constexpr size_t kMaxTagBytes = 256;
constexpr size_t kMaxNotesPerRead = 16;

// One reader for the daemon: its cache makes a repeated read of a growing
// file cost only the new records.
tfevents::EventDirReader& Reader() {
  static tfevents::EventDirReader* reader = new tfevents::EventDirReader(
      tfevents::Limits{.max_tag_bytes = kMaxTagBytes, .max_points = kMaxPoints});
  return *reader;
}

json PointJson(const tfevents::Point& p) {
  return {{"step", p.step}, {"t", p.wall_time}, {"value", p.value}};
}

// The local directory of a job's AIP_TENSORBOARD_LOG_DIR: the controller
// gives replicas <baseOutputDirectory>/logs, where a job without one has
// gs://stoker-outputs/<id>/ (server/controller.cc, OutputUri).
std::optional<std::filesystem::path> TensorboardDir(const ApiDeps& d, const store::JobRecord& r) {
  std::string base = std::string("gs://") + storage::kOutputsBucket + "/" + std::to_string(r.id);
  const json* prefix = nullptr;
  if (auto js = r.spec.find("jobSpec"); js != r.spec.end() && js->is_object()) {
    if (auto b = js->find("baseOutputDirectory"); b != js->end() && b->is_object()) {
      if (auto p = b->find("outputUriPrefix"); p != b->end() && p->is_string()) prefix = &*p;
    }
  }
  if (prefix && !prefix->get<std::string>().empty()) base = prefix->get<std::string>();
  if (base.back() != '/') base += '/';
  auto dir = d.buckets->Resolve(base + "logs", "jobSpec.baseOutputDirectory");
  if (!dir.ok()) return std::nullopt;  // its bucket is gone: nothing to read
  return *dir;
}

constexpr int kMaxNamedAttempts = 8;       // the latest ones: older writers keep "<host> pid <pid>"
constexpr size_t kMaxNamedReplicas = 256;  // trainer.json files read per request
constexpr size_t kWriterTelemetryBytes = 4 << 20;  // each replica's telemetry.jsonl, read whole

// The trainers of the job's replicas, latest attempts first, for naming
// the series their event files hold; with `processes`, also every process
// each replica's telemetry saw (the trainer's children: a launcher's
// workers write under their own pids), which costs a read of each
// telemetry file. The node is the allocation's (this machine's host name
// for the local executor); an executor that places replicas itself (Slurm,
// node "executor") leaves it unknown.
std::vector<tfevents::KnownWriter> ReplicaWriters(const ApiDeps& d, const store::JobRecord& r,
                                                  bool processes) {
  std::vector<tfevents::KnownWriter> out;
  if (!d.files || !r.allocation.is_object()) return out;
  auto text = [](const json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string node = text(r.allocation, "node");
  auto replicas = r.allocation.find("replicas");
  if (replicas == r.allocation.end() || !replicas->is_array()) return out;
  size_t read = 0;
  for (int attempt = r.attempt; attempt >= 0 && attempt > r.attempt - kMaxNamedAttempts;
       --attempt) {
    for (const json& x : *replicas) {
      if (!x.is_object() || !x.contains("name") || !x["name"].is_string()) continue;
      if (read++ >= kMaxNamedReplicas) return out;
      const std::string name = x["name"];
      std::optional<replica::TrainerInfo> trainer =
          exec::ReadTrainerInfo(d.files->ReplicaDir(r.id, attempt, name));
      if (!trainer || trainer->pid <= 0) continue;
      std::string host = text(x, "node").empty() ? node : text(x, "node");
      if (host == "executor") host = "";
      const std::string shown =
          attempt == r.attempt ? name : name + " (attempt " + std::to_string(attempt + 1) + ")";
      const int64_t pid = trainer->pid;
      out.push_back({shown, host, pid});
      if (!processes) continue;
      for (int64_t child : telemetry::ProcessesSeen(telemetry::ParsePoints(
               d.files->ReadTelemetry(r.id, attempt, name, kWriterTelemetryBytes)))) {
        if (child != pid) out.push_back({shown, host, child});
      }
    }
  }
  return out;
}

struct Skip {
  std::string file;
  std::string reason;
  bool note = true;  // worth a job event
};

// Hypertune lines ({"timestamp": t, "global_step": "n", "<tag>": "<value>",
// "trial": .., "checkpoint_path": ..}) as series by tag, in report order.
void AddHypertune(const std::string& text, std::map<std::string, std::vector<tfevents::Point>>& out,
                  std::vector<Skip>& skipped) {
  const std::string file = "CLOUD_ML_HP_METRIC_FILE";
  std::set<std::string> reported;
  auto problem = [&](const std::string& kind, const std::string& reason) {
    if (reported.insert(kind).second) skipped.push_back({file, reason});
  };
  study::HypertuneReports parsed = study::ParseHypertuneReports(text);
  if (parsed.skipped_nested)
    problem("nested", "lines that are not flat JSON objects were left out");
  int64_t ordinal = 0;
  for (const study::HypertuneReport& r : parsed.reports) {
    tfevents::Point p;
    p.step = ++ordinal;
    p.wall_time = r.timestamp && std::isfinite(*r.timestamp) ? *r.timestamp : 0;
    if (!r.global_step.empty()) {
      char* end = nullptr;
      long long step = std::strtoll(r.global_step.c_str(), &end, 10);
      if (end != r.global_step.c_str()) p.step = step;
    }
    for (const auto& [key, v] : r.values) {
      if (key.size() > kMaxTagBytes) {
        problem("long", "metrics with names longer than " + std::to_string(kMaxTagBytes) +
                            " bytes were left out");
        continue;
      }
      std::string name = tfevents::SanitizeTag(key);
      if (name.empty()) {
        problem("empty", "metrics with an empty or unprintable name were left out");
        continue;
      }
      if (!std::isfinite(v)) {
        problem("nonfinite " + name, "metric '" + name.substr(0, 64) +
                                         "': non-finite values (NaN or infinity) were left "
                                         "out, the first at step " +
                                         std::to_string(p.step));
        continue;
      }
      if (!out.count(name) && out.size() >= kMaxHypertuneSeries) {
        problem("many", "more than " + std::to_string(kMaxHypertuneSeries) +
                            " metrics: later new names were left out");
        continue;
      }
      std::vector<tfevents::Point>& series = out[name];
      p.value = v;
      series.push_back(p);
      if (series.size() > 4 * kMaxPoints) series = tfevents::Downsample(series, 2 * kMaxPoints);
    }
  }
}

http::Response TrainingMetrics(const ApiDeps& d, const store::JobRecord& r, size_t max_points) {
  json series = json::array();
  std::vector<Skip> skipped;

  // The chief of the latest attempt (a job that never ran reads as nothing).
  exec::TrialMetrics reports;
  if (d.files) {
    reports = d.files->ReadTrialMetrics(r.id, r.attempt, "workerpool0-0", kMaxHypertuneBytes);
  }
  for (const std::string& source : reports.too_large) {
    skipped.push_back(
        {source, "larger than " + std::to_string(kMaxHypertuneBytes) + " bytes: not read"});
  }
  std::map<std::string, std::vector<tfevents::Point>> hypertune;
  AddHypertune(reports.text, hypertune, skipped);
  for (const auto& [name, points] : hypertune) {
    json p = json::array();
    for (const tfevents::Point& x : tfevents::Downsample(points, max_points)) {
      p.push_back(PointJson(x));
    }
    series.push_back({{"name", name}, {"source", "hypertune"}, {"points", std::move(p)}});
  }

  if (std::optional<std::filesystem::path> dir = TensorboardDir(d, r)) {
    tfevents::DirScalars tb = Reader().Read(*dir);
    // Writers are named by the replicas' trainers, and only when one is
    // not, by every process of the replicas (a second, dearer look).
    std::vector<tfevents::KnownWriter> replicas;
    auto unnamed = [&] {
      return std::any_of(tb.series.begin(), tb.series.end(), [&](const tfevents::NamedSeries& s) {
        return !s.writer.empty() && tfevents::KnownWriterName(s.writer, replicas).empty();
      });
    };
    if (unnamed()) replicas = ReplicaWriters(d, r, /*processes=*/false);
    if (!replicas.empty() && unnamed()) replicas = ReplicaWriters(d, r, /*processes=*/true);
    for (const tfevents::NamedSeries& s : tb.series) {
      json p = json::array();
      for (const tfevents::Point& x : tfevents::Downsample(s.points, max_points)) {
        p.push_back(PointJson(x));
      }
      json one = {{"name", s.name}, {"source", "tensorboard"}, {"points", std::move(p)}};
      if (!s.writer.empty()) {  // one of several processes (replicas)
        one["writer"] = s.writer;
        std::string replica = tfevents::KnownWriterName(s.writer, replicas);
        if (!replica.empty()) one["replica"] = std::move(replica);
      }
      series.push_back(std::move(one));
    }
    for (const tfevents::Skipped& s : tb.skipped) {
      skipped.push_back({"logs/" + s.file, s.reason, !s.transient});
    }
  }

  json out = {{"series", std::move(series)}, {"skipped", json::array()}};
  size_t notes = 0;
  for (const Skip& s : skipped) {
    out["skipped"].push_back({{"file", s.file}, {"reason", s.reason}});
    if (s.note && notes++ < kMaxNotesPerRead) {
      d.control_plane->NoteJobEvent(r.id, "training metrics: skipped " + s.file + ": " + s.reason);
    }
  }
  return Json(out);
}

}  // namespace

std::optional<http::Response> HandleTrainingMetricsRoutes(const ApiDeps& d,
                                                          const http::Request& req,
                                                          const auth::Principal& caller) {
  static const std::regex kCustom(
      R"(^/v1/projects/([^/]+)/locations/([^/]+)/customJobs/([^/:]+)/trainingMetrics$)");
  static const std::regex kLegacy(R"(^/v1/projects/([^/]+)/jobs/([^/:]+)/trainingMetrics$)");
  std::smatch m;
  std::string project, id;
  if (std::regex_match(req.path, m, kCustom)) {
    project = m[1];
    id = m[3];
  } else if (std::regex_match(req.path, m, kLegacy)) {
    project = m[1];
    id = m[2];
  } else {
    return std::nullopt;
  }
  if (req.method != "GET") {
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
  }
  size_t max_points = kMaxPoints;
  if (auto it = req.query.find("maxPoints"); it != req.query.end()) {
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || v < 2 || v > static_cast<long long>(kMaxPoints)) {
      return Error(InvalidArgument("maxPoints: must be a whole number from 2 to " +
                                   std::to_string(kMaxPoints) + ", got '" + it->second + "'"));
    }
    max_points = static_cast<size_t>(v);
  }
  Result<store::JobRecord> rec = VisibleJob(d, project, id, caller);
  if (!rec.ok()) return Error(rec.status());
  return TrainingMetrics(d, *rec, max_points);
}

}  // namespace stoker::api
