// The verdict on one attempt of a job, from its replicas' statuses: a pure
// function (no I/O, no clock), so the rules a user relies on — which exit
// decides success, what counts as the infrastructure's fault, what may be
// retried — read in one place and are tested without processes.
//
// The rules, in replica order (pool, then index); the first replica that
// decides, decides:
// - the primary replica (workerpool0-0) exiting 0 is success (the others
//   are then stopped); another replica exiting 0 decides nothing;
// - a replica that ended otherwise, or was lost, fails the attempt: lost or
//   unable to start is the infrastructure's fault; a timeout or a stop from
//   outside Stoker is final; anything else may be retried by the job's
//   retry rules (Controller::Retry);
// - a replica still starting after `start_limit_us` fails it, unless the
//   executor places replicas itself (Slurm: it waits as long as its queue)
//   or the replica is preparing (its supervisor installs requirements);
// - every replica ended well but none is the primary: a failure that cannot
//   happen with a valid spec, reported rather than hanging.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace stoker::server {

inline constexpr char kPrimaryReplica[] = "workerpool0-0";

struct AttemptFacts {
  double timeout_seconds = 0;  // scheduling.timeout, named in a timeout's message
  int64_t placed_us = 0;       // when the attempt was launched; 0 = unknown
  int64_t now_us = 0;
  bool executor_places_replicas = false;
  int64_t start_limit_us = 60'000'000;  // how long a replica may stay kStarting
};

struct Verdict {
  enum class Kind {
    kUndecided,     // replicas still starting or running
    kSucceeded,     // the primary exited 0
    kFailed,        // a replica ended badly or was lost
    kNeverStarted,  // a replica stayed kStarting past the limit
    kNoPrimary,     // every replica ended well, none was the primary
  };
  Kind kind = Kind::kUndecided;
  std::string replica;          // the replica that decided ("" for kNoPrimary)
  std::string what;             // one or two sentences for the event and the error
  int error_code = 0;           // google.rpc code when the attempt failed
  bool retriable = false;       // kFailed: neither a timeout nor a stop from outside
  bool infrastructure = false;  // kFailed: lost, or could not start
  bool worker = false;          // the deciding replica is not the primary
  int64_t start_us = 0;         // the deciding replica's trainer start; 0 = none
};

Verdict JudgeAttempt(const std::vector<exec::ReplicaStatus>& replicas, const AttemptFacts& facts);

}  // namespace stoker::server
