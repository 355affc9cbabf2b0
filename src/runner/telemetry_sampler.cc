#include "runner/telemetry_sampler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/files.h"
#include "replica/replica_processes.h"
#include "resources/nvml.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

double NowSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// /proc/stat's first line: (busy, total) jiffies of all CPUs.
std::pair<uint64_t, uint64_t> MachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {0};
  in >> cpu;
  for (uint64_t& x : v) in >> x;
  uint64_t total = 0;
  for (uint64_t x : v) total += x;
  const uint64_t idle = v[3] + v[4];  // idle + iowait
  return {total - std::min(total, idle), total};
}

// /proc/meminfo: (used, total) bytes, used = MemTotal - MemAvailable.
std::pair<uint64_t, uint64_t> MachineMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0, total = 0, available = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemTotal:") total = value * 1024;
    if (key == "MemAvailable:") available = value * 1024;
  }
  return {total - std::min(total, available), total};
}

}  // namespace

std::vector<std::pair<pid_t, ProcStat>> ProcessTable::Below(pid_t root) {
  Result<std::vector<pid_t>> pids = ListPids();
  if (pids.ok()) {
    std::map<pid_t, pid_t> now;
    for (pid_t pid : *pids) {
      if (auto known = ppid_.find(pid); known != ppid_.end()) {
        now.emplace(pid, known->second);
      } else if (std::optional<ProcStat> st = ReadProcStat(pid)) {
        now.emplace(pid, st->ppid);  // only new processes are read
      }
    }
    ppid_ = std::move(now);
  }
  std::multimap<pid_t, pid_t> children;
  for (const auto& [pid, ppid] : ppid_) children.emplace(ppid, pid);
  std::vector<std::pair<pid_t, ProcStat>> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty() && out.size() < 100000) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      std::optional<ProcStat> st = ReadProcStat(it->second);
      if (!st) continue;
      if (st->ppid != p) {  // the pid was reused by another process since
        ppid_[it->second] = st->ppid;
        continue;
      }
      out.emplace_back(it->second, *st);
      todo.push_back(it->second);
    }
  }
  return out;
}

std::vector<int> VisibleGpuIndices(const std::string& cuda_visible_devices,
                                   const std::vector<std::string>& uuids) {
  std::vector<int> out;
  std::stringstream in(cuda_visible_devices);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    if (item.rfind("GPU-", 0) == 0) {
      for (size_t i = 0; i < uuids.size(); ++i) {
        // CUDA accepts a unique prefix of a UUID.
        if (uuids[i].rfind(item, 0) == 0) out.push_back(static_cast<int>(i));
      }
      continue;
    }
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (*end == '\0' && v >= 0 && v < 4096) out.push_back(static_cast<int>(v));
  }
  return out;
}

TelemetrySampler::TelemetrySampler(fs::path file, replica::TelemetrySpec spec,
                                   std::vector<int> gpu_indices, pid_t root, bool include_root)
    : file_(std::move(file)),
      spec_(spec),
      gpu_indices_(std::move(gpu_indices)),
      root_(root),
      include_root_(include_root) {}

std::vector<std::pair<pid_t, ProcStat>> TelemetrySampler::Tree() {
  if (cgroup_) {
    std::vector<std::pair<pid_t, ProcStat>> members;
    for (pid_t pid : cgroup_->Pids()) {
      if (std::optional<ProcStat> st = ReadProcStat(pid)) members.emplace_back(pid, *st);
    }
    return members;
  }
  std::vector<std::pair<pid_t, ProcStat>> out = table_.Below(root_);
  if (include_root_) {
    if (std::optional<ProcStat> st = ReadProcStat(root_)) out.emplace_back(root_, *st);
  }
  if (!also_pid_file_.empty() && also_root_ <= 0) {
    std::ifstream in(also_pid_file_);
    long pid = 0;
    if (in >> pid && pid > 1) also_root_ = static_cast<pid_t>(pid);
  }
  if (also_root_ > 0) {
    for (auto& p : table_.Below(also_root_)) out.push_back(std::move(p));
  }
  return out;
}

TelemetrySampler::~TelemetrySampler() { Stop(); }

void TelemetrySampler::Start() {
  if (spec_.interval_seconds <= 0 || thread_.joinable()) return;
  last_time_ = NowSeconds();
  std::tie(last_machine_busy_, last_machine_total_) = MachineCpu();
  thread_ = std::thread([this] { Loop(); });
}

void TelemetrySampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TelemetrySampler::Loop() {
  // The CPU counters need a first reading to take differences from.
  for (const auto& [pid, st] : Tree()) last_tree_ticks_ += st.cpu_ticks;
  have_tree_ticks_ = true;
  if (cgroup_) last_cgroup_ns_ = cgroup_->CpuNanos().value_or(0);
  // So are the GPUs' energy counters: a point's energy then covers the
  // same time as the points' dt since the start (the ledger divides one by
  // the other).
  if (!gpu_indices_.empty()) {
    for (const resources::GpuUsage& d : resources::QueryGpuSnapshot(gpu_indices_, 0).devices) {
      if (d.energy_mj) first_energy_mj_.emplace_back(d.index, *d.energy_mj);
    }
  }
  double wait = std::min(1.0, spec_.interval_seconds);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::duration<double>(wait), [this] { return stop_; })) {
    lock.unlock();
    telemetry::Point p = Sample();
    if (p.processes > 0) Write(p);
    lock.lock();
    wait = spec_.interval_seconds;
  }
}

telemetry::Point TelemetrySampler::Sample() {
  telemetry::Point p;
  p.t = NowSeconds();
  p.dt = std::max(0.0, p.t - last_time_);
  const double since = last_time_;
  last_time_ = p.t;
  p.cpus = spec_.cpus;
  p.memory_booked_bytes = spec_.memory_bytes;

  static const long kTicks = ::sysconf(_SC_CLK_TCK);
  static const long kPage = ::sysconf(_SC_PAGESIZE);
  std::set<uint32_t> pids;
  uint64_t ticks = 0, rss_pages = 0;
  for (const auto& [pid, st] : Tree()) {
    if (st.state == 'Z' || st.state == 'X') continue;
    pids.insert(static_cast<uint32_t>(pid));
    ticks += st.cpu_ticks;
    rss_pages += st.rss_pages;
  }
  p.processes = static_cast<int>(pids.size());
  for (uint32_t pid : pids) {
    if (p.new_pids.size() >= telemetry::kMaxNewPids) break;
    if (seen_pids_.insert(pid).second) p.new_pids.push_back(pid);
  }
  // A process that died since the last sample takes its ticks along
  // (unless its parent in the tree reaped it): never a negative use.
  if (have_tree_ticks_ && ticks > last_tree_ticks_ && p.dt > 0 && kTicks > 0) {
    p.cpu_percent =
        100.0 * static_cast<double>(ticks - last_tree_ticks_) / static_cast<double>(kTicks) / p.dt;
  }
  last_tree_ticks_ = ticks;
  if (std::optional<uint64_t> ns = cgroup_ ? cgroup_->CpuNanos() : std::nullopt) {
    // The cgroup's own account: members that exited since are in it too.
    if (*ns >= last_cgroup_ns_ && p.dt > 0) {
      p.cpu_percent = 100.0 * static_cast<double>(*ns - last_cgroup_ns_) / 1e9 / p.dt;
    }
    last_cgroup_ns_ = *ns;
  }
  p.rss_bytes = p.rss_max_bytes = rss_pages * static_cast<uint64_t>(kPage > 0 ? kPage : 4096);

  auto [busy, total] = MachineCpu();
  if (total > last_machine_total_ && busy >= last_machine_busy_) {
    static const long kCpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    p.machine_cpu_percent = 100.0 * static_cast<double>(kCpus) *
                            static_cast<double>(busy - last_machine_busy_) /
                            static_cast<double>(total - last_machine_total_);
  }
  last_machine_busy_ = busy;
  last_machine_total_ = total;
  std::tie(p.machine_memory_used_bytes, p.machine_memory_total_bytes) = MachineMemory();

  if (!gpu_indices_.empty()) {
    resources::GpuSnapshot snap =
        resources::QueryGpuSnapshot(gpu_indices_, static_cast<uint64_t>(since * 1e6));
    for (const resources::GpuUsage& d : snap.devices) {
      telemetry::GpuPoint g;
      g.index = d.index;
      g.device_util_percent = d.utilization_percent;
      g.device_memory_bytes = d.memory_used_bytes;
      g.device_memory_total_bytes = d.memory_total_bytes;
      g.power_watts = d.power_watts;
      if (d.energy_mj) {
        auto first = std::find_if(first_energy_mj_.begin(), first_energy_mj_.end(),
                                  [&](const auto& e) { return e.first == d.index; });
        if (first == first_energy_mj_.end()) {
          first_energy_mj_.emplace_back(d.index, *d.energy_mj);
          g.energy_joules = 0;
        } else if (*d.energy_mj >= first->second) {
          g.energy_joules = static_cast<double>(*d.energy_mj - first->second) / 1000.0;
        }
      }
      bool any_samples = false;
      double sm = 0;
      for (const resources::GpuProcessUsage& pu : snap.processes) {
        if (pu.index != d.index) continue;
        any_samples = any_samples || pu.sm_percent.has_value();
        if (!pids.count(pu.pid)) continue;
        g.memory_bytes += pu.memory_bytes;
        sm += pu.sm_percent.value_or(0);
      }
      // NVML samples only processes that ran kernels: with samples for
      // others and none for ours, ours were idle. With none at all, say nothing.
      if (any_samples) g.util_percent = std::min(100.0, sm);
      p.gpus.push_back(g);
    }
  }
  p.sampler_cpu_seconds = ThreadCpuSeconds();
  return p;
}

void TelemetrySampler::Write(const telemetry::Point& p) {
  points_.push_back(p);
  if (points_.size() > telemetry::kMaxPoints) {
    telemetry::Compact(points_);
    std::string text;
    for (const telemetry::Point& q : points_) text += telemetry::FormatPoint(q) + "\n";
    (void)WriteFileAtomic(file_, text, Durability::kNoSync);
    return;
  }
  std::string line = telemetry::FormatPoint(p) + "\n";
  int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
  ::close(fd);
}

}  // namespace stoker::runner
