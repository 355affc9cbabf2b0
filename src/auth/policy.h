// The `auth:` section of stokerd's configuration (docs/config.md) and the
// pure rules it feeds: how high a submitter may set a job's priority
// (priority ceilings) and how long a web console session lasts
// (docs/security.md, docs/decisions/0036). No I/O; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "auth/auth.h"
#include "common/status.h"

namespace stoker::auth {

// Priorities run from -kPriorityLimit to kPriorityLimit (spec/custom_job.cc).
inline constexpr int kPriorityLimit = 1000;

// The highest scheduling.priority each role may give its jobs when an admin
// set no ceiling for the user itself (`stoker admin users set-max-priority`).
// With preemption on, a higher priority may stop another user's job: the
// user role's default keeps plain users below what admins may use.
struct PriorityCeilings {
  int viewer = 0;  // viewers cannot submit; here for completeness
  int user = 100;
  int admin = kPriorityLimit;
};

// auth: {max_priority: {user: 100, admin: 1000}, console_session_hours: 12}
struct AuthPolicy {
  PriorityCeilings max_priority;
  int64_t console_session_seconds = 12 * 3600;  // a console session ends this long after sign-in
};

// Reads the `auth:` mapping over `out` (keys not given keep their
// defaults). InvalidArgument naming the key (`at` is its path, e.g.
// "config.yaml: auth") and the allowed values.
Status ParseAuthPolicy(const nlohmann::json& value, const std::string& at, AuthPolicy& out);

// The ceiling of a user of `role`: `own` (an admin's per-user setting)
// when set, else the role's.
int PriorityCeiling(const PriorityCeilings& ceilings, Role role, std::optional<int> own);

// What a submission's priority becomes under `ceiling`: `requested` when it
// is at most the ceiling, else the ceiling, with the warning recorded as an
// event of the job (it names the user and how an admin raises the ceiling).
struct PriorityDecision {
  int priority = 0;
  std::string warning;  // "" when the priority was kept
};
PriorityDecision ClampPriority(int requested, int ceiling, std::string_view user);

// Checks an admin's per-user ceiling: -kPriorityLimit..kPriorityLimit.
// InvalidArgument naming `field` otherwise.
Status ValidatePriorityCeiling(int64_t ceiling, std::string_view field);

}  // namespace stoker::auth
