#include "server/attempt_verdict.h"

#include <string.h>

#include "common/time.h"
#include "spec/job_state.h"

namespace stoker::server {
namespace {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Why a replica that ended badly (or was lost) ended, and the error code.
Verdict Failure(const exec::ReplicaStatus& r, const AttemptFacts& facts) {
  Verdict v;
  v.kind = Verdict::Kind::kFailed;
  v.replica = r.name;
  v.start_us = r.start_us;
  v.worker = r.name != kPrimaryReplica;
  v.error_code = spec::kRpcUnknown;
  if (r.phase == exec::ReplicaPhase::kLost) {
    v.what = "The replica " + r.name + " was lost: " + r.message + ".";
    v.error_code = spec::kRpcInternal;
  } else if (r.end_state == exec::EndState::kTimeout) {
    v.what = "The job exceeded its scheduling.timeout of " + FormatDuration(facts.timeout_seconds) +
             "; replica " + r.name + " was stopped (" + r.message + ").";
    v.error_code = spec::kRpcDeadlineExceeded;
  } else if (r.end_state == exec::EndState::kLaunchFailed) {
    v.what = "The replica " + r.name + " could not start: " + r.message + ".";
    v.error_code = spec::kRpcInternal;
  } else if (r.oom_killed) {
    // The supervisor's sentence names the limit and the machine type.
    v.what = "The replica " + r.name + " ran out of memory: " + r.message + ".";
    v.error_code = spec::kRpcResourceExhausted;
  } else if (r.signal) {
    v.what = "The replica " + r.name + " was killed by signal " + std::to_string(*r.signal) + " (" +
             SignalName(*r.signal) + ").";
  } else if (r.end_state == exec::EndState::kCancelled) {
    v.what =
        "The replica " + r.name + " was stopped from outside Stoker (SIGTERM to its supervisor).";
  } else {
    v.what = "The replica " + r.name + " exited with a non-zero status of " +
             std::to_string(r.exit_code.value_or(-1)) + ".";
  }
  // A memory limit exceeded once is exceeded again, and so is a launch
  // failure the supervisor calls permanent: not retried.
  const bool permanent = r.end_state == exec::EndState::kLaunchFailed && r.permanent;
  v.retriable = r.end_state != exec::EndState::kTimeout &&
                r.end_state != exec::EndState::kCancelled && !r.oom_killed && !permanent;
  v.infrastructure = r.phase == exec::ReplicaPhase::kLost ||
                     (r.end_state == exec::EndState::kLaunchFailed && !permanent);
  return v;
}

}  // namespace

Verdict JudgeAttempt(const std::vector<exec::ReplicaStatus>& replicas, const AttemptFacts& facts) {
  bool all_ended = true;
  for (const exec::ReplicaStatus& r : replicas) {
    if (r.phase != exec::ReplicaPhase::kEnded && r.phase != exec::ReplicaPhase::kLost) {
      all_ended = false;
    }
  }
  for (const exec::ReplicaStatus& r : replicas) {
    if (r.Succeeded()) {
      if (r.name != kPrimaryReplica) continue;
      Verdict v;
      v.kind = Verdict::Kind::kSucceeded;
      v.replica = r.name;
      v.what = r.name + " exited with status 0";
      v.start_us = r.start_us;
      return v;
    }
    if (r.phase == exec::ReplicaPhase::kStarting || r.phase == exec::ReplicaPhase::kRunning) {
      if (r.phase == exec::ReplicaPhase::kStarting && facts.placed_us != 0 &&
          !facts.executor_places_replicas && !r.preparing &&
          facts.now_us - facts.placed_us > facts.start_limit_us) {
        Verdict v;
        v.kind = Verdict::Kind::kNeverStarted;
        v.replica = r.name;
        v.what = "The replica " + r.name + " did not start within " +
                 FormatDuration(static_cast<double>(facts.start_limit_us) / 1e6);
        v.error_code = spec::kRpcInternal;
        v.worker = r.name != kPrimaryReplica;
        return v;
      }
      continue;
    }
    return Failure(r, facts);
  }
  if (all_ended && !replicas.empty()) {
    Verdict v;
    v.kind = Verdict::Kind::kNoPrimary;
    v.what = std::string(kPrimaryReplica) + " is missing";
    v.error_code = spec::kRpcInternal;
    return v;
  }
  return {};
}

}  // namespace stoker::server
