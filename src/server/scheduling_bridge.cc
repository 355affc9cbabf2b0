#include "server/scheduling_bridge.h"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "common/time.h"
#include "server/preemption.h"

namespace stoker::server {
namespace {

using nlohmann::json;
using spec::JobState;

// google.rpc.Code values used in CustomJob.error.
using spec::kRpcDeadlineExceeded;
using spec::kRpcInternal;

// A TCP port that is free on loopback now, for a replica's CLUSTER_SPEC
// address (the chief's is MASTER_PORT); 0 when none can be had.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// A free port that no allocation in `held` has: the kernel's free port may be
// one an active job was given but has not bound yet (its trainers are still
// importing torch), and two jobs must never rendezvous on one port.
int FreePortNotIn(const std::set<int>& held) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    int port = FreePort();
    if (port != 0 && !held.count(port)) return port;
  }
  return 0;
}

// "2x NVIDIA_TESLA_T4", "0.25 of a NVIDIA_L4", "" for a job without GPUs.
std::string GpuSummary(const std::vector<scheduler::ReplicaRequest>& requests) {
  std::map<std::string, double> by_type;
  for (const scheduler::ReplicaRequest& r : requests) {
    if (r.ask.gpus > 0) by_type[r.ask.gpu_type] += r.ask.gpus;
  }
  std::string out;
  for (const auto& [type, n] : by_type) {
    if (!out.empty()) out += ", ";
    json count = n == std::floor(n) ? json(static_cast<int64_t>(n)) : json(n);
    out += count.dump() + "x " + type;
  }
  return out;
}

}  // namespace

SchedulingBridge::SchedulingBridge(SchedulingBridgeDeps deps)
    : config_(*deps.config),
      node_(*deps.node),
      store_(*deps.store),
      executor_(*deps.executor),
      clock_(*deps.clock),
      metrics_(deps.metrics),
      table_(*deps.table),
      funnel_(*deps.funnel),
      attempts_(*deps.attempts),
      usage_(*deps.usage),
      launcher_(*deps.launcher),
      run_history_(*deps.run_history),
      warm_holdings_(deps.config->data_dir / "warm") {}

int64_t SchedulingBridge::ExpectedRunS(ActiveJob& a) {
  if (a.run_shape.empty()) a.run_shape = scheduler::ShapeKey(a.rec.spec);
  return run_history_.ExpectedSeconds({a.rec.user, a.rec.display_name, a.run_shape});
}

scheduler::Snapshot SchedulingBridge::TakeSnapshot(int64_t now_us) {
  scheduler::Snapshot snap;
  snap.nodes = {node_};
  snap.now_us = now_us;
  snap.options.cpu_oversubscription = config_.cpu_oversubscription;
  snap.options.accelerator_substitution = config_.accelerator_substitution;
  snap.options.backfill = config_.backfill;
  snap.options.aging_threshold_us = static_cast<int64_t>(config_.aging_hours * 3600e6);
  const config::PreemptionConfig& pc = config_.preemption;
  snap.options.preemption.enabled = pc.enabled;
  snap.options.preemption.priority_margin = pc.priority_margin;
  snap.options.preemption.min_run_us = static_cast<int64_t>(pc.min_run_seconds * 1e6);

  auto add_running = [&](const std::string& id, const std::string& user, int priority,
                         const std::vector<scheduler::PlacedReplica>& placed, int64_t start_us,
                         double timeout_s) -> scheduler::RunningJob& {
    scheduler::RunningJob& r = snap.running.emplace_back();
    r.id = id;
    r.user = user;
    r.priority = priority;
    r.replicas = placed;
    r.start_us = start_us;
    r.runtime_bound_s = static_cast<int64_t>(std::ceil(timeout_s));
    return r;
  };
  for (const auto& [key, d] : table_.draining) {
    // Stopping: bound by the grace period from now.
    add_running(std::to_string(key.first) + "/" + std::to_string(key.second), d.user, d.priority,
                d.placed, now_us, std::max(config_.cancel_grace_seconds, pc.grace_seconds) + 5)
        .stopping = true;
  }
  for (auto& [id, a] : table_.active) {
    if (spec::IsTerminal(a.rec.state)) continue;
    if (a.rec.state != JobState::kQueued) {
      if (!a.placed.empty()) {
        scheduler::RunningJob& r = add_running(
            std::to_string(id), a.rec.user, a.job.job_spec.scheduling.priority, a.placed,
            a.placed_us ? a.placed_us : now_us, a.job.job_spec.scheduling.timeout_seconds);
        r.stopping = a.rec.state == JobState::kCancelling || a.rec.cancel_requested;
        r.expected_runtime_s = ExpectedRunS(a);
        r.preemptible = pc.enabled && IsPreemptible(a.job, pc);
        if (r.preemptible) r.progress_us = attempts_.LastCheckpointUs(a, now_us);
      }
      continue;
    }
    if (a.rec.cancel_requested || a.requests.empty()) continue;
    scheduler::QueuedJob q;
    q.id = std::to_string(id);
    q.user = a.rec.user;
    q.priority = a.job.job_spec.scheduling.priority;
    q.submit_us = a.rec.create_time_us;
    q.replicas = scheduler::AsksOf(a.requests);
    q.runtime_bound_s = static_cast<int64_t>(std::ceil(a.job.job_spec.scheduling.timeout_seconds));
    q.expected_runtime_s = ExpectedRunS(a);
    snap.queued.push_back(std::move(q));
  }

  if (config_.warm_starts.enabled) snap.held = warm_holdings_.At(now_us);

  usage_.Accrue(now_us);
  snap.usage_gpu_seconds = usage_.FairShareUsage();

  // Quotas: named users, and "*" for everyone else who appears.
  auto fallback = config_.quotas.find("*");
  auto quota_for = [&](const std::string& user) {
    auto q = config_.quotas.find(user);
    if (q != config_.quotas.end()) {
      snap.quotas[user] = q->second;
    } else if (fallback != config_.quotas.end()) {
      snap.quotas[user] = fallback->second;
    }
  };
  for (const scheduler::QueuedJob& q : snap.queued) quota_for(q.user);
  for (const scheduler::RunningJob& r : snap.running) quota_for(r.user);
  return snap;
}

void SchedulingBridge::Schedule() {
  if (executor_.PlacesReplicas()) {
    HandOverQueued();
    return;
  }
  // Decide when something changed, and every few seconds for aging and estimates.
  constexpr int64_t kRefreshUs = 5'000'000;
  int64_t now = clock_.NowMicros();
  if (!table_.schedule_dirty && now - last_schedule_us_ < kRefreshUs) return;
  table_.schedule_dirty = false;
  last_schedule_us_ = now;
  const auto pass_start = std::chrono::steady_clock::now();
  scheduler::Snapshot snap = TakeSnapshot(now);
  scheduler::Decision d = scheduler::Schedule(snap);
  for (const scheduler::RejectedJob& r : d.rejected) {
    auto it = table_.active.find(std::stoll(r.job_id));
    if (it == table_.active.end()) continue;
    funnel_.Finish(it->second, JobState::kFailed, "can never be placed", kRpcInternal,
                   r.status.message());
  }
  std::string ahead_of = d.reservation ? d.reservation->job_id : "";
  for (const scheduler::StartJob& start : d.start) {
    auto it = table_.active.find(std::stoll(start.job_id));
    if (it != table_.active.end()) StartPlaced(it->second, start, ahead_of);
  }
  std::vector<store::Store::WaitNote> notes;
  for (const scheduler::WaitingJob& w : d.wait) {
    auto it = table_.active.find(std::stoll(w.job_id));
    if (it != table_.active.end()) RecordWait(it->second, w, now, notes);
  }
  Status recorded = store_.RecordWaits(notes);
  Preempt(d.preempt);
  PublishViews(snap, d);
  if (metrics_) {
    metrics_->SchedulingPassTook(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start).count());
  }
  if (!recorded.ok()) {
    // None of them is stored: forget them, so the next decision writes them again.
    spdlog::warn("cannot record why {} job(s) wait: {}", notes.size(), recorded.ToString());
    for (const store::Store::WaitNote& n : notes) {
      auto it = table_.active.find(n.id);
      if (it == table_.active.end()) continue;
      it->second.rec.wait_reason.clear();
      it->second.wait_jobs_ahead = -1;
      if (!n.event.empty()) it->second.wait_event_kind.clear();
    }
    table_.schedule_dirty = true;
  }
}

void SchedulingBridge::Preempt(const std::vector<scheduler::Preemption>& preempt) {
  for (const scheduler::Preemption& p : preempt) {
    auto victim = table_.active.find(std::stoll(p.job_id));
    auto for_job = table_.active.find(std::stoll(p.for_job_id));
    if (victim == table_.active.end() || for_job == table_.active.end()) continue;
    const ActiveJob& f = for_job->second;
    const ActiveJob& v = victim->second;
    funnel_.RecordNote(f.rec.id, "preempting job " + p.job_id + " (user " + v.rec.user +
                                     ", priority " +
                                     std::to_string(v.job.job_spec.scheduling.priority) +
                                     ") to make room; starts once its replicas are gone");
    attempts_.Preempt(victim->second,
                      "by job " + p.for_job_id + " (user " + f.rec.user + ", priority " +
                          std::to_string(f.job.job_spec.scheduling.priority) +
                          "), which needs its resources; about " +
                          Num(std::round(p.lost_gpu_seconds)) +
                          " GPU-seconds of work since its last checkpoint may be redone");
  }
}

void SchedulingBridge::StartPlaced(ActiveJob& a, const scheduler::StartJob& start,
                                   const std::string& ahead_of) {
  json replicas = json::array();
  std::vector<std::string> names;
  std::vector<std::string> notes;
  std::set<int> held_ports;  // every port a job that may still run was given
  for (const auto& [id, other] : table_.active) AddPorts(other.rec.allocation, held_ports);
  for (const auto& [key, d] : table_.draining) held_ports.insert(d.ports.begin(), d.ports.end());
  for (size_t i = 0; i < start.replicas.size() && i < a.requests.size(); ++i) {
    const scheduler::PlacedReplica& p = start.replicas[i];
    const scheduler::ReplicaRequest& r = a.requests[i];
    json gpus = json::array(), shares = json::array();
    std::string gpu_type;  // the booked GPUs' type, for the usage ledger
    for (const scheduler::GpuShare& g : p.gpus) {
      gpus.push_back(g.gpu);
      shares.push_back(
          {{"gpu", g.gpu}, {"fraction", g.fraction}, {"memory_bytes", g.memory_bytes}});
      for (const resources::Gpu& n : node_.gpus) {
        if (n.index == g.gpu) gpu_type = n.type;
      }
    }
    replicas.push_back({{"name", r.name},
                        {"pool", r.pool},
                        {"index", r.index},
                        {"node", p.node},
                        {"cpus", p.cpus},
                        {"memory_bytes", p.memory_bytes},
                        {"gpus", gpus},
                        {"gpu_shares", shares},
                        {"gpu_type", gpu_type},
                        {"port", FreePortNotIn(held_ports)}});
    held_ports.insert(replicas.back()["port"].get<int>());
    names.push_back(r.name);
    for (const std::string& sub : p.substitutions) notes.push_back(r.name + ": " + sub);
    if (r.clamped) {
      notes.push_back(r.name + ": machine type clamped to this node (" + Num(p.cpus) + " CPUs, " +
                      Num(p.memory_bytes / double(1ull << 30)) + " GB)");
    }
  }
  if (start.backfilled && !ahead_of.empty()) {
    notes.push_back("backfilled: started ahead of job " + ahead_of +
                    " because it ends (scheduling.timeout) before that job can start");
  }
  json allocation = {{"node", node_.name}, {"replicas", replicas}};
  // The launch's files first: a job submitted a moment ago may still have
  // its commit's fsync running, which the PENDING commit below waits for
  // (decision 0048). Nothing starts before that commit.
  json before = std::exchange(a.rec.allocation, allocation);
  Launcher::Prepared launch = launcher_.Prepare(a);
  // Not synced: this machine runs the replicas, so a crash of the machine
  // ends them too, and recovery finds the job QUEUED again or its replicas'
  // claims (store.h, TransitionUpdate::synced). A crash of stokerd alone
  // keeps the commit. The fsync (~1 ms) is off the start path.
  if (!funnel_.Move(a, JobState::kPending, "resources allocated on " + node_.name,
                    {.allocation = allocation, .synced = false})) {
    a.rec.allocation = std::move(before);
    return;
  }
  a.rec.wait_reason.clear();
  a.wait_jobs_ahead = -1;
  a.replicas = names;
  a.placed = start.replicas;
  a.placed_us = clock_.NowMicros();
  Status s = launcher_.Start(a.rec.id, std::move(launch));
  if (!s.ok()) funnel_.Finish(a, JobState::kFailed, "launch failed", kRpcInternal, s.message());
  // After the launch, as the launch's own events: each is a commit.
  for (const std::string& n : notes) (void)store_.AddEvent(a.rec.id, n);
}

void SchedulingBridge::LaunchOrFail(ActiveJob& a) {
  Status s = launcher_.Launch(a);
  if (!s.ok()) funnel_.Finish(a, JobState::kFailed, "launch failed", kRpcInternal, s.message());
}

void SchedulingBridge::RecordWait(ActiveJob& a, const scheduler::WaitingJob& w, int64_t now_us,
                                  std::vector<store::Store::WaitNote>& notes) {
  const std::optional<double>& max_wait = a.job.job_spec.scheduling.max_wait_seconds;
  if (max_wait && *max_wait > 0 && now_us - a.rec.create_time_us > *max_wait * 1e6) {
    std::string why = "waited longer than its scheduling.maxWaitDuration of " +
                      FormatDuration(*max_wait) + " for resources; last reason: " + w.Reason();
    funnel_.Finish(a, JobState::kFailed, why, kRpcDeadlineExceeded, why);
    return;
  }
  // The same place in line as stored: nothing to write, no string to build
  // (most of a long queue on most decisions).
  if (w.detail.empty() && w.jobs_ahead == a.wait_jobs_ahead) return;
  std::string reason = w.Reason();
  a.wait_jobs_ahead = w.detail.empty() ? w.jobs_ahead : -1;
  if (reason == a.rec.wait_reason) return;
  constexpr int64_t kRepeatWaitEventUs = 600'000'000;  // ten minutes
  std::string event;
  if (scheduler::WaitEventDue(w, a.wait_event_kind, a.wait_event_us, now_us, kRepeatWaitEventUs)) {
    event = "waiting: " + reason;
    a.wait_event_us = now_us;
    a.wait_event_kind = scheduler::WaitKind(w);
  }
  notes.push_back({a.rec.id, reason, std::move(event)});
  a.rec.wait_reason = std::move(reason);
}

void SchedulingBridge::PublishViews(const scheduler::Snapshot& snap, const scheduler::Decision& d) {
  std::vector<api::ControlPlane::QueueEntry> queue;
  queue.reserve(d.wait.size());
  for (const scheduler::WaitingJob& w : d.wait) {
    auto it = table_.active.find(std::stoll(w.job_id));
    if (it == table_.active.end() || it->second.rec.state != JobState::kQueued) continue;
    const ActiveJob& a = it->second;
    api::ControlPlane::QueueEntry e;
    e.job_id = a.rec.id;
    e.display_name = a.rec.display_name;
    e.user = a.rec.user;
    e.priority = a.job.job_spec.scheduling.priority;
    scheduler::QueuedJob q;
    q.priority = e.priority;
    q.submit_us = a.rec.create_time_us;
    e.effective_priority = scheduler::EffectivePriority(q, snap.now_us, snap.options);
    e.create_time_us = a.rec.create_time_us;
    e.gpus = GpuSummary(a.requests);
    e.reason = a.rec.wait_reason;  // RecordWait's text for this decision
    e.estimated_start_us = w.estimated_start_us;
    queue.push_back(std::move(e));
  }

  // Nodes and who holds each GPU (running jobs and stopping attempts).
  json nodes = json::array();
  for (size_t n = 0; n < snap.nodes.size(); ++n) {
    const resources::Node& node = snap.nodes[n];
    double cpus = 0, memory = 0;
    std::map<int, json> holders;
    for (const scheduler::RunningJob& r : snap.running) {
      for (size_t i = 0; i < r.replicas.size(); ++i) {
        const scheduler::PlacedReplica& p = r.replicas[i];
        if (p.node != static_cast<int>(n)) continue;
        cpus += p.cpus;
        memory += static_cast<double>(p.memory_bytes);
        auto job = table_.active.find(std::atoll(r.id.c_str()));
        std::string replica = job != table_.active.end() && i < job->second.replicas.size()
                                  ? job->second.replicas[i]
                                  : "";
        for (const scheduler::GpuShare& g : p.gpus) {
          holders[g.gpu].push_back(
              {{"job", r.id}, {"replica", replica}, {"user", r.user}, {"fraction", g.fraction}});
        }
      }
    }
    json held = json::array();
    for (const scheduler::Held& h : snap.held) {
      if (h.node != static_cast<int>(n)) continue;
      memory += static_cast<double>(h.memory_bytes);
      held.push_back({{"user", h.user}, {"what", h.what}, {"memory_bytes", h.memory_bytes}});
    }
    json gpus = json::array();
    for (const resources::Gpu& g : node.gpus) {
      gpus.push_back({{"index", g.index},
                      {"type", g.type},
                      {"memory_bytes", g.memory_bytes},
                      {"uuid", g.uuid},
                      {"holders", holders.count(g.index) ? holders[g.index] : json::array()}});
    }
    nodes.push_back({{"name", node.name},
                     {"cpus", node.cpus},
                     {"memory_bytes", node.memory_bytes},
                     {"cpus_booked", cpus},
                     {"memory_booked_bytes", memory},
                     {"held", held},
                     {"cpu_oversubscription", snap.options.cpu_oversubscription},
                     {"gpus", gpus}});
  }
  std::lock_guard lock(view_mu_);
  queue_view_ = std::move(queue);
  nodes_view_ = {{"nodes", nodes}};
}

std::vector<api::ControlPlane::QueueEntry> SchedulingBridge::Queue() const {
  std::lock_guard lock(view_mu_);
  return queue_view_;
}

json SchedulingBridge::Nodes() const {
  std::lock_guard lock(view_mu_);
  return nodes_view_;
}

void SchedulingBridge::HandOverQueued() {
  for (auto& [id, a] : table_.active) {
    if (a.rec.state != JobState::kQueued || a.rec.cancel_requested || a.requests.empty()) continue;
    // The executor (Slurm) decides where replicas run: nothing to place here.
    json replicas = json::array();
    std::vector<std::string> names;
    for (const scheduler::ReplicaRequest& r : a.requests) {
      replicas.push_back({{"name", r.name},
                          {"pool", r.pool},
                          {"index", r.index},
                          {"cpus", r.ask.cpus},
                          {"memory_bytes", r.ask.memory_bytes},
                          {"gpus", json::array()},
                          {"port", 0}});
      names.push_back(r.name);
    }
    json allocation = {{"node", "executor"}, {"replicas", replicas}};
    if (!funnel_.Move(a, JobState::kPending, "handed to the executor, which places the replicas",
                      {.allocation = allocation})) {
      continue;
    }
    a.rec.allocation = allocation;
    a.replicas = names;
    a.placed_us = clock_.NowMicros();
    LaunchOrFail(a);
  }
}

}  // namespace stoker::server
