// A replica's telemetry: what its processes used, sampled while it runs.
//
// stoker-run samples its trainer's process tree every few seconds
// (runner/telemetry_sampler.h) and writes one Point per line, as JSON, to
// the replica directory's telemetry.jsonl; stokerd reads that file to show
// charts, summaries and live views (docs/telemetry.md). This file is the
// format both sides share and the pure arithmetic on it: no I/O.
//
// Bounded storage: a file holds at most kMaxPoints points. When a sampler
// would go past that, Compact() merges the oldest points pairwise, so the
// recent past stays at full resolution and older stretches get coarser
// (each merge halves them) while the whole run is still covered.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::telemetry {

// The file in the replica directory (written by stoker-run only).
inline constexpr char kTelemetryFile[] = "telemetry.jsonl";
inline constexpr size_t kMaxPoints = 1000;
// Points Compact() leaves untouched at the end (the recent past).
inline constexpr size_t kKeepRecent = 200;

// One GPU the replica was given. Process figures are the replica's own
// processes on that GPU (NVML's per-process lists), so that replicas
// sharing a GPU are told apart; device figures are the whole GPU's.
struct GpuPoint {
  int index = 0;                       // NVML index
  std::optional<double> util_percent;  // the replica's SM use; nullopt: NVML gave no sample
  uint64_t memory_bytes = 0;           // the replica's GPU memory
  double device_util_percent = 0;
  uint64_t device_memory_bytes = 0;
  uint64_t device_memory_total_bytes = 0;
  std::optional<double> power_watts;    // the whole GPU's draw
  std::optional<double> energy_joules;  // the whole GPU's counter since the replica started
};

struct Point {
  double t = 0;            // unix seconds at the end of the interval
  double dt = 0;           // seconds the point covers (merged points cover more)
  double cpu_percent = 0;  // CPU time of the process tree over dt (100 = one core)
  uint64_t rss_bytes = 0;  // resident memory of the process tree (average when merged)
  uint64_t rss_max_bytes = 0;
  int processes = 0;
  // What the replica booked (for utilisation as a share of it); 0 = unknown.
  double cpus = 0;
  uint64_t memory_booked_bytes = 0;
  // The machine's: all CPUs (100 = one core) and memory in use.
  double machine_cpu_percent = 0;
  uint64_t machine_memory_used_bytes = 0;
  uint64_t machine_memory_total_bytes = 0;
  // CPU seconds the sampler itself used so far (cumulative): its overhead.
  double sampler_cpu_seconds = 0;
  std::vector<GpuPoint> gpus;
  // The replica's processes first seen in this sample (at most
  // kMaxNewPids; merged points keep the earliest): what tells that a file
  // a process wrote (a TensorBoard event file names its writer's pid) came
  // from this replica, also for a process the trainer started.
  std::vector<int64_t> new_pids;
};
inline constexpr size_t kMaxNewPids = 64;

// One JSON line (no newline) / back. ParsePoint is nullopt for a line that
// is not a point (a torn last line, or anything else).
std::string FormatPoint(const Point& p);
std::optional<Point> ParsePoint(std::string_view line);
// Every point of a file's text, in order; lines that do not parse are skipped.
std::vector<Point> ParsePoints(std::string_view text);

// Every process the points saw (their new_pids), in order, each once.
std::vector<int64_t> ProcessesSeen(const std::vector<Point>& points);

// One point covering both `older` and `newer` (adjacent): time-weighted
// averages, the larger maximum, the newer cumulative counters.
Point Merge(const Point& older, const Point& newer);
// When `points` holds more than kMaxPoints: merges pairs among all but the
// last kKeepRecent points. Otherwise unchanged.
void Compact(std::vector<Point>& points);

// The run at a glance, the table of the job's resource summary.
struct GpuSummary {
  int index = 0;
  std::optional<double> util_percent;  // time-weighted mean of the replica's use
  double memory_util_percent = 0;      // mean of its GPU memory over the GPU's total
  uint64_t memory_max_bytes = 0;
  std::optional<double> power_watts;  // mean draw of the whole GPU
  double idle_share = 0;              // share of sampled time under kIdleGpuPercent
};
inline constexpr double kIdleGpuPercent = 15;

struct Summary {
  double sampled_seconds = 0;
  double cpu_percent = 0;                  // mean, 100 = one core
  std::optional<double> cpu_util_percent;  // of the booked CPUs; nullopt when unknown
  uint64_t rss_mean_bytes = 0, rss_max_bytes = 0;
  std::optional<double> memory_util_percent;  // peak over the booked memory
  std::vector<GpuSummary> gpus;
  double sampler_cpu_seconds = 0;
  // Sentences naming waste or risk: a GPU under 15% busy for most of the
  // run, CPUs mostly idle, memory near its limit.
  std::vector<std::string> flags;
};
// Nullopt for no points.
std::optional<Summary> Summarize(const std::vector<Point>& points);

// The replica's use of one GPU in a point, in percent of the whole GPU:
// its own processes' SM use where NVML sampled them, else the device's use
// times the replica's `share` of the GPU (1 for a whole GPU). The one
// answer to "how busy was this replica's GPU": the summary, the usage
// ledger and the job.gpu_idle hooks all use it. Pure.
double ReplicaGpuPercent(const GpuPoint& g, double share);

// What a replica's GPUs did over its points, as the usage ledger records it.
struct GpuUse {
  double sampled_s = 0;   // seconds covered by points that carry a GPU
  double busy_gpu_s = 0;  // sum over points and GPUs of ReplicaGpuPercent / 100 * dt
  // The replica's share of its GPUs' energy over the sampled time: each
  // GPU's counter since the sampler started (the last value the points
  // have) times the share; nullopt when a GPU never had an energy counter.
  std::optional<double> energy_j;
};
// `share_of`: the replica's fraction of the GPU with that NVML index; a GPU
// it does not name counts whole (a Slurm task's GPUs are its own). Pure.
GpuUse UseOfGpus(const std::vector<Point>& points, const std::function<double(int)>& share_of);

// The REST shapes (docs/telemetry.md): {"t", "dt", "cpuPercent", ...}.
nlohmann::json PointJson(const Point& p);
nlohmann::json SummaryJson(const Summary& s);

}  // namespace stoker::telemetry
