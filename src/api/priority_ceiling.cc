// Priority ceilings at submission (auth/policy.h, docs/security.md): every
// route that stores a job or a tuning job lowers its priority to its user's
// ceiling here, before admission.
#include <spdlog/spdlog.h>

#include "api/routes.h"

namespace stoker::api {

Result<std::string> ApplyPriorityCeiling(const ApiDeps& d, const std::string& user,
                                         spec::CustomJobSpec& spec) {
  auth::Role role = auth::Role::kUser;
  std::optional<int> own;
  if (d.auth) {
    auto u = d.auth->GetUser(user);
    if (u.ok()) {
      role = u->role;
      own = u->max_priority;
    } else if (u.status().code() != Code::kNotFound) {
      return u.status();
    }
  }
  const int ceiling = auth::PriorityCeiling(d.auth_policy.max_priority, role, own);
  auth::PriorityDecision decision = auth::ClampPriority(spec.scheduling.priority, ceiling, user);
  if (!decision.warning.empty()) {
    spdlog::info("user {}: priority {} lowered to {}", user, spec.scheduling.priority,
                 decision.priority);
  }
  spec.scheduling.priority = decision.priority;
  return decision.warning;
}

}  // namespace stoker::api
