#include "server/controller.h"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "common/files.h"
#include "common/time.h"
#include "exec/replica_env.h"

namespace stoker::server {
namespace {

using nlohmann::json;
using spec::JobState;

// google.rpc.Code values used in CustomJob.error.
constexpr int kRpcCancelled = 1;
constexpr int kRpcUnknown = 2;
constexpr int kRpcDeadlineExceeded = 4;
constexpr int kRpcInternal = 13;

// A free TCP port on loopback for a replica's CLUSTER_SPEC address.
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

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string OutputUri(const spec::CustomJob& job, int64_t id) {
  std::string base = job.job_spec.base_output_directory;
  if (base.empty()) base = std::string("gs://") + kDefaultOutputBucket + "/" + std::to_string(id);
  if (base.back() != '/') base += '/';
  return base;
}

}  // namespace

Controller::Controller(const Config& config, const resources::Node& node, store::Store& store,
                       exec::Executor& executor, storage::Buckets& buckets,
                       const exec::Environments& environments)
    : config_(config),
      node_(node),
      store_(store),
      executor_(executor),
      buckets_(buckets),
      environments_(environments) {}

Controller::~Controller() { Stop(); }

Status Controller::Start() {
  STOKER_ASSIGN_OR_RETURN(std::vector<store::JobRecord> jobs, store_.ActiveJobs());
  for (store::JobRecord& rec : jobs) Adopt(std::move(rec));
  if (!active_.empty()) spdlog::info("recovered {} active job(s) from the store", active_.size());
  STOKER_ASSIGN_OR_RETURN(std::vector<store::StudyRecord> studies, store_.ActiveStudies());
  for (store::StudyRecord& rec : studies) AdoptStudy(std::move(rec));
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Controller::Submitted(const store::JobRecord& job) {
  {
    std::lock_guard lock(mu_);
    inbox_submitted_.push_back(job);
  }
  cv_.notify_all();
}

void Controller::StudySubmitted(int64_t study_id) {
  {
    std::lock_guard lock(mu_);
    inbox_studies_.insert(study_id);
  }
  cv_.notify_all();
}

void Controller::StudyCancelRequested(int64_t study_id) {
  {
    std::lock_guard lock(mu_);
    inbox_study_cancel_.insert(study_id);
  }
  cv_.notify_all();
}

void Controller::CancelRequested(int64_t job_id) {
  {
    std::lock_guard lock(mu_);
    inbox_cancel_.insert(job_id);
  }
  cv_.notify_all();
}

void Controller::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    std::vector<store::JobRecord> submitted;
    std::set<int64_t> cancels, studies, study_cancels;
    submitted.swap(inbox_submitted_);
    cancels.swap(inbox_cancel_);
    studies.swap(inbox_studies_);
    study_cancels.swap(inbox_study_cancel_);
    lock.unlock();
    for (int64_t id : studies) {
      if (studies_.count(id)) continue;
      auto rec = store_.GetStudy(id);
      if (rec.ok()) AdoptStudy(std::move(rec).value());
    }
    for (int64_t id : study_cancels) {
      auto it = studies_.find(id);
      if (it != studies_.end()) it->second.rec.cancel_requested = true;
    }
    for (store::JobRecord& rec : submitted) {
      if (!active_.count(rec.id)) Adopt(std::move(rec));
    }
    for (int64_t id : cancels) {
      auto it = active_.find(id);
      if (it != active_.end()) it->second.rec.cancel_requested = true;
    }
    Tick();
    lock.lock();
    if (stop_) break;
    if (inbox_submitted_.empty() && inbox_cancel_.empty() && inbox_studies_.empty() &&
        inbox_study_cancel_.empty()) {
      cv_.wait_for(lock, std::chrono::milliseconds(config_.poll_interval_ms));
    }
  }
}

void Controller::Adopt(store::JobRecord rec) {
  Active a;
  auto job = spec::ParseCustomJob(rec.spec);
  int64_t id = rec.id;
  a.rec = std::move(rec);
  if (!job.ok()) {
    // Stored by an older or damaged daemon: fail it visibly rather than guess.
    a.job.display_name = a.rec.display_name;
    active_[id] = std::move(a);
    Finish(active_[id], JobState::kFailed, "stored spec no longer parses", kRpcInternal,
           "the stored job spec cannot be read: " + job.status().message());
    return;
  }
  a.job = std::move(job).value();
  if (a.rec.allocation.is_object()) {
    for (const json& r : a.rec.allocation["replicas"]) {
      a.replicas.push_back(r["name"].get<std::string>());
      a.booked.cpus += r["cpus"].get<double>();
      a.booked.memory_bytes += r["memory_bytes"].get<uint64_t>();
      for (int g : r["gpus"]) a.booked.gpus.insert(g);
    }
    Book(a.booked, +1);
  }
  bool pending = a.rec.state == JobState::kPending;
  active_[id] = std::move(a);
  // A PENDING job may have crashed mid-launch: launching again is idempotent.
  if (pending) {
    Status s = Launch(active_[id]);
    if (!s.ok()) Finish(active_[id], JobState::kFailed, "launch failed", kRpcInternal, s.message());
  }
}

void Controller::Book(const scheduler::Booked& b, int sign) {
  booked_.cpus += sign * b.cpus;
  if (sign > 0) {
    booked_.memory_bytes += b.memory_bytes;
    booked_.gpus.insert(b.gpus.begin(), b.gpus.end());
  } else {
    booked_.memory_bytes -= b.memory_bytes;
    for (int g : b.gpus) booked_.gpus.erase(g);
  }
}

bool Controller::Move(Active& a, JobState to, const std::string& reason,
                      store::TransitionUpdate update) {
  Status s = store_.Transition(a.rec.id, a.rec.state, to, reason, update);
  if (!s.ok()) {
    spdlog::error("job {}: cannot record {} -> {}: {}", a.rec.id, spec::JobStateName(a.rec.state),
                  spec::JobStateName(to), s.ToString());
    return false;
  }
  a.rec.state = to;
  if (update.start_time_us) a.rec.start_time_us = *update.start_time_us;
  return true;
}

void Controller::Finish(Active& a, JobState to, const std::string& reason, int error_code,
                        const std::string& error_message) {
  store::TransitionUpdate u;
  u.end_time_us = NowMicros();
  if (error_code != 0) {
    u.error_code = error_code;
    u.error_message = error_message;
  }
  if (!Move(a, to, reason, u)) return;
  spdlog::info("job {} {}: {}", a.rec.id, spec::JobStateName(to), reason);
}

std::string Controller::LogTail(const Active& a, const std::string& replica) const {
  std::filesystem::path log = executor_.ReplicaDir(a.rec.id, a.rec.attempt, replica) / "output.log";
  std::ifstream in(log, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = std::max<std::streamoff>(0, size - 4096);
  in.seekg(start);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Keep the last 20 lines.
  int lines = 0;
  size_t pos = data.size();
  if (pos && data[pos - 1] == '\n') --pos;
  while (pos > 0) {
    size_t nl = data.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    if (++lines == 20) {
      pos = nl + 1;
      break;
    }
    pos = nl;
  }
  return data.substr(pos);
}

void Controller::Tick() {
  // Reap supervisors that exited (stokerd is their subreaper); their status is in files.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  // Ended jobs whose replicas are still stopping hold their bookings until they are gone.
  for (auto it = draining_.begin(); it != draining_.end();) {
    auto st = executor_.Poll(it->first, it->second.attempt, it->second.replicas);
    bool done =
        st.ok() && std::all_of(st->begin(), st->end(), [](const exec::ReplicaStatus& r) {
          return r.phase == exec::ReplicaPhase::kEnded || r.phase == exec::ReplicaPhase::kLost;
        });
    if (done) {
      Book(it->second.booked, -1);
      it = draining_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [id, a] : active_) {
    if (a.rec.cancel_requested) HandleCancel(a);
    if (!spec::IsTerminal(a.rec.state) && a.rec.state != JobState::kQueued) PollJob(a);
  }
  // Release what ended jobs held; keep replicas that still run as draining.
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = it->second;
    if (!spec::IsTerminal(a.rec.state)) {
      ++it;
      continue;
    }
    if (!a.replicas.empty()) {
      auto st = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
      bool running =
          !st.ok() || std::any_of(st->begin(), st->end(), [](const exec::ReplicaStatus& r) {
            return r.phase == exec::ReplicaPhase::kRunning ||
                   r.phase == exec::ReplicaPhase::kStarting;
          });
      if (running) {
        Status s = executor_.Cancel(a.rec.id, a.rec.attempt, a.replicas);
        if (!s.ok()) spdlog::warn("job {}: stopping replicas: {}", a.rec.id, s.ToString());
        draining_[a.rec.id] = Draining{a.rec.attempt, a.replicas, a.booked};
      } else {
        Book(a.booked, -1);
      }
    }
    it = active_.erase(it);
  }
  TickStudies();
  Schedule();
}

void Controller::HandleCancel(Active& a) {
  int64_t now = NowMicros();
  switch (a.rec.state) {
    case JobState::kQueued:
      Finish(a, JobState::kCancelled, "cancelled by user before it started", kRpcCancelled,
             "CANCELED");
      return;
    case JobState::kPending:
    case JobState::kRunning:
      if (!Move(a, JobState::kCancelling, "cancel requested; stopping replicas")) return;
      [[fallthrough]];
    case JobState::kCancelling:
      // Repeat now and then: a supervisor that was starting may have missed it.
      if (now - a.last_cancel_us > 2'000'000) {
        Status s = executor_.Cancel(a.rec.id, a.rec.attempt, a.replicas);
        if (!s.ok()) spdlog::warn("job {}: cancel: {}", a.rec.id, s.ToString());
        a.last_cancel_us = now;
      }
      return;
    default:
      return;
  }
}

void Controller::PollJob(Active& a) {
  auto polled = executor_.Poll(a.rec.id, a.rec.attempt, a.replicas);
  if (!polled.ok()) {
    spdlog::warn("job {}: poll: {}", a.rec.id, polled.status().ToString());
    return;
  }
  const std::vector<exec::ReplicaStatus>& st = *polled;
  int64_t first_start = 0;
  bool all_ended = true;
  for (const exec::ReplicaStatus& r : st) {
    if (r.start_us > 0 && (first_start == 0 || r.start_us < first_start)) first_start = r.start_us;
    if (r.phase != exec::ReplicaPhase::kEnded && r.phase != exec::ReplicaPhase::kLost)
      all_ended = false;
  }
  if (a.rec.state == JobState::kPending && first_start > 0) {
    Move(a, JobState::kRunning, "replicas started", {.start_time_us = first_start});
  }
  if (a.rec.state == JobState::kCancelling) {
    if (all_ended) Finish(a, JobState::kCancelled, "cancelled by user", kRpcCancelled, "CANCELED");
    return;
  }
  // The primary replica decides success; any failure fails the job.
  for (const exec::ReplicaStatus& r : st) {
    if (r.Succeeded()) {
      if (r.name == "workerpool0-0") {
        if (a.rec.start_time_us == 0) {
          Move(a, JobState::kRunning, "replicas started",
               {.start_time_us = r.start_us ? r.start_us : NowMicros()});
        }
        Finish(a, JobState::kSucceeded, "workerpool0-0 exited with status 0", 0, "");
        return;
      }
      continue;
    }
    if (r.phase == exec::ReplicaPhase::kStarting || r.phase == exec::ReplicaPhase::kRunning) {
      if (r.phase == exec::ReplicaPhase::kStarting && a.placed_us &&
          NowMicros() - a.placed_us > 60'000'000) {
        Finish(a, JobState::kFailed, r.name + " never started", kRpcInternal,
               "The replica " + r.name + " did not start within 60s; see " +
                   executor_.ReplicaDir(a.rec.id, a.rec.attempt, r.name).string() + "/runner.log");
        return;
      }
      continue;
    }
    // Ended badly or lost.
    std::string what;
    int code = kRpcUnknown;
    if (r.phase == exec::ReplicaPhase::kLost) {
      what = "The replica " + r.name + " was lost: " + r.message + ".";
      code = kRpcInternal;
    } else if (r.end_state == "timeout") {
      what = "The job exceeded its scheduling.timeout of " +
             FormatDuration(a.job.job_spec.scheduling.timeout_seconds) + "; replica " + r.name +
             " was stopped (" + r.message + ").";
      code = kRpcDeadlineExceeded;
    } else if (r.end_state == "launch_failed") {
      what = "The replica " + r.name + " could not start: " + r.message + ".";
      code = kRpcInternal;
    } else if (r.signal) {
      what = "The replica " + r.name + " was killed by signal " + std::to_string(*r.signal) + " (" +
             SignalName(*r.signal) + ").";
    } else if (r.end_state == "cancelled") {
      what =
          "The replica " + r.name + " was stopped from outside Stoker (SIGTERM to its supervisor).";
    } else {
      what = "The replica " + r.name + " exited with a non-zero status of " +
             std::to_string(r.exit_code.value_or(-1)) + ".";
    }
    std::string tail = LogTail(a, r.name);
    std::string message = what;
    if (!tail.empty()) message += " Last lines of its log:\n" + tail;
    if (a.rec.state == JobState::kPending) {
      Move(a, JobState::kRunning, "replicas started",
           {.start_time_us = r.start_us ? r.start_us : NowMicros()});
    }
    Finish(a, JobState::kFailed, what, code, message);
    return;
  }
  if (all_ended && !st.empty()) {
    // Every replica ended well but the primary did not report: cannot happen
    // unless pool 0 is missing; fail loudly rather than hang.
    Finish(a, JobState::kFailed, "no primary replica", kRpcInternal, "workerpool0-0 is missing");
  }
}

void Controller::Schedule() {
  scheduler::Options options{config_.cpu_oversubscription, config_.accelerator_substitution};
  for (auto& [id, a] : active_) {
    if (a.rec.state != JobState::kQueued || a.rec.cancel_requested) continue;
    auto requests = scheduler::RequestsFor(a.job.job_spec, node_, "jobSpec.");
    if (!requests.ok()) {
      Finish(a, JobState::kFailed, "cannot be placed", kRpcInternal, requests.status().message());
      continue;
    }
    std::string why;
    auto placed = scheduler::PlaceGang(*requests, node_, booked_, options, &why);
    if (!placed) {
      // Strict FIFO: nothing behind the head may start before it.
      std::string reason = "waiting for resources: " + why;
      if (reason != a.rec.wait_reason) {
        (void)store_.SetWaitReason(id, reason);
        a.rec.wait_reason = reason;
      }
      return;
    }
    json replicas = json::array();
    scheduler::Booked booked;
    std::vector<std::string> names;
    std::vector<std::string> notes;
    for (size_t i = 0; i < placed->size(); ++i) {
      const scheduler::ReplicaPlacement& p = (*placed)[i];
      const scheduler::ReplicaRequest& r = (*requests)[i];
      replicas.push_back({{"name", p.name},
                          {"pool", r.pool},
                          {"index", r.index},
                          {"cpus", p.cpus},
                          {"memory_bytes", p.memory_bytes},
                          {"gpus", p.gpus},
                          {"port", FreePort()}});
      booked.cpus += p.cpus;
      booked.memory_bytes += p.memory_bytes;
      booked.gpus.insert(p.gpus.begin(), p.gpus.end());
      names.push_back(p.name);
      for (const std::string& s : p.substitutions) notes.push_back(p.name + ": " + s);
      if (r.clamped) {
        notes.push_back(p.name + ": machine type clamped to this node (" +
                        std::to_string(static_cast<int>(p.cpus)) + " CPUs)");
      }
    }
    json allocation = {{"node", node_.name}, {"replicas", replicas}};
    for (const std::string& n : notes) (void)store_.AddEvent(id, n);
    if (!Move(a, JobState::kPending, "resources allocated on " + node_.name,
              {.allocation = allocation})) {
      return;
    }
    a.rec.allocation = allocation;
    a.replicas = names;
    a.booked = booked;
    a.placed_us = NowMicros();
    Book(booked, +1);
    Status s = Launch(a);
    if (!s.ok()) Finish(a, JobState::kFailed, "launch failed", kRpcInternal, s.message());
  }
}

Result<exec::JobLaunch> Controller::BuildLaunch(const Active& a) {
  const spec::CustomJobSpec& spec = a.job.job_spec;
  exec::JobLaunch launch;
  launch.job_id = a.rec.id;
  launch.attempt = a.rec.attempt;

  std::string output_uri = OutputUri(a.job, a.rec.id);
  auto parsed = storage::ParseGsUri(output_uri, "jobSpec.baseOutputDirectory.outputUriPrefix");
  if (!parsed.ok()) return parsed.status();
  if (parsed->bucket == kDefaultOutputBucket)
    STOKER_RETURN_IF_ERROR(buckets_.Create(kDefaultOutputBucket));
  STOKER_ASSIGN_OR_RETURN(
      std::filesystem::path output_dir,
      buckets_.Resolve(output_uri, "jobSpec.baseOutputDirectory.outputUriPrefix"));
  STOKER_RETURN_IF_ERROR(MakeDirs(output_dir));

  std::vector<std::vector<std::string>> addresses(spec.worker_pool_specs.size());
  for (const json& r : a.rec.allocation["replicas"]) {
    int pool = r["pool"].get<int>();
    addresses[pool].push_back("127.0.0.1:" + std::to_string(r["port"].get<int>()));
  }
  auto rewrite = [this](const std::string& s) { return storage::RewriteGsUris(s, buckets_); };

  // nfsMounts: Vertex mounts each share at /mnt/nfs/<mountPoint>. Here the
  // share is honoured when its path exists on this machine (already mounted
  // there), by a link at the same place; otherwise the job is told why not.
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const json& mounts = spec.worker_pool_specs[p].extra.value("nfsMounts", json::array());
    for (size_t i = 0; i < mounts.size(); ++i) {
      std::string field =
          "jobSpec.workerPoolSpecs[" + std::to_string(p) + "].nfsMounts[" + std::to_string(i) + "]";
      std::filesystem::path source = mounts[i].value("path", "");
      std::filesystem::path target =
          std::filesystem::path(config_.nfs_mount_root) / mounts[i].value("mountPoint", "");
      std::error_code ec;
      if (!std::filesystem::is_directory(source, ec)) {
        (void)store_.AddEvent(a.rec.id, "warning: " + field + " not mounted: " + source.string() +
                                            " does not exist on this machine");
        continue;
      }
      if (std::filesystem::is_symlink(target, ec)) {
        if (std::filesystem::read_symlink(target, ec) == source) continue;
      } else if (std::filesystem::exists(target, ec) &&
                 std::filesystem::equivalent(target, source, ec)) {
        continue;
      }
      std::filesystem::create_directories(target.parent_path(), ec);
      if (std::filesystem::exists(target, ec) || std::filesystem::is_symlink(target, ec) ||
          (std::filesystem::create_symlink(source, target, ec), ec)) {
        return FailedPrecondition(field + ".mountPoint: cannot make " + target.string() +
                                  " point at " + source.string() +
                                  (ec ? ": " + ec.message() : ": it exists and is something else") +
                                  "; use another mountPoint or remove it");
      }
    }
  }

  for (const json& r : a.rec.allocation["replicas"]) {
    int pool_index = r["pool"].get<int>();
    const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[pool_index];
    std::string field = "jobSpec.workerPoolSpecs[" + std::to_string(pool_index) + "]";
    std::string image = pool.python_package_spec ? pool.python_package_spec->executor_image_uri
                                                 : pool.container_spec->image_uri;
    STOKER_ASSIGN_OR_RETURN(exec::Environment env, environments_.ForImage(image, field));
    exec::ReplicaLaunch rl;
    rl.name = r["name"].get<std::string>();
    std::filesystem::path dir = executor_.ReplicaDir(a.rec.id, a.rec.attempt, rl.name);
    exec::ReplicaEnvInput in;
    in.job_id = std::to_string(a.rec.id);
    in.trial_id = a.rec.trial_id;
    in.project = a.rec.project;
    in.location = a.rec.location;
    in.spec = &spec;
    in.place = {pool_index, r["index"].get<int>(), r["gpus"].get<std::vector<int>>()};
    in.addresses = addresses;
    in.output_dir = output_dir.string();
    in.metric_file = (dir / "hypertune" / "output.metrics").string();
    in.base_env = env.base_env;
    in.python = env.python;
    in.rewrite_uris = rewrite;
    exec::ReplicaCommand cmd = exec::BuildReplicaCommand(in);
    rl.argv = std::move(cmd.argv);
    rl.env = std::move(cmd.env);
    if (a.rec.study_id != 0 && !config_.api_url.empty()) {
      // Trainers in any language may POST measurements here instead of
      // writing the hypertune file.
      rl.env["STOKER_METRICS_URL"] = config_.api_url + "/v1/projects/" + a.rec.project +
                                     "/locations/" + a.rec.location + "/studies/" +
                                     std::to_string(a.rec.study_id) + "/trials/" + a.rec.trial_id +
                                     ":addTrialMeasurement";
    }
    if (pool.python_package_spec) {
      for (size_t i = 0; i < pool.python_package_spec->package_uris.size(); ++i) {
        STOKER_ASSIGN_OR_RETURN(
            std::filesystem::path pkg,
            buckets_.Resolve(pool.python_package_spec->package_uris[i],
                             field + ".pythonPackageSpec.packageUris[" + std::to_string(i) + "]"));
        rl.packages.push_back(pkg.string());
      }
    }
    rl.timeout_seconds = spec.scheduling.timeout_seconds;
    rl.grace_seconds = config_.cancel_grace_seconds;
    launch.replicas.push_back(std::move(rl));
  }
  return launch;
}

Status Controller::Launch(Active& a) {
  STOKER_ASSIGN_OR_RETURN(exec::JobLaunch launch, BuildLaunch(a));
  return executor_.Launch(launch);
}

}  // namespace stoker::server
