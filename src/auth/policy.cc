#include "auth/policy.h"

namespace stoker::auth {

Status ValidatePriorityCeiling(int64_t ceiling, std::string_view field) {
  if (ceiling < -kPriorityLimit || ceiling > kPriorityLimit) {
    return InvalidArgument(std::string(field) + ": " + std::to_string(ceiling) +
                           " is not a priority; use a whole number from -1000 to 1000");
  }
  return OkStatus();
}

Status ParseAuthPolicy(const nlohmann::json& value, const std::string& at, AuthPolicy& out) {
  const std::string example = " (e.g. auth: {max_priority: {user: 100, admin: 1000}})";
  if (!value.is_object()) return InvalidArgument(at + ": must be a mapping" + example);
  for (auto& [key, v] : value.items()) {
    const std::string field = at + "." + key;
    if (key == "max_priority") {
      if (!v.is_object()) {
        return InvalidArgument(field + ": must be a mapping of role to priority" + example);
      }
      for (auto& [role_name, n] : v.items()) {
        const std::string role_field = field + "." + role_name;
        auto role = ParseRole(role_name, role_field);
        if (!role.ok()) return role.status();
        if (!n.is_number_integer()) {
          return InvalidArgument(role_field + ": must be a whole number from -1000 to 1000, got " +
                                 n.dump());
        }
        STOKER_RETURN_IF_ERROR(ValidatePriorityCeiling(n.get<int64_t>(), role_field));
        int ceiling = n.get<int>();
        if (*role == Role::kAdmin) out.max_priority.admin = ceiling;
        if (*role == Role::kUser) out.max_priority.user = ceiling;
        if (*role == Role::kViewer) out.max_priority.viewer = ceiling;
      }
    } else if (key == "console_session_hours") {
      if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > 24 * 366) {
        return InvalidArgument(
            field + ": must be a number of hours above 0 (at most a year), got " + v.dump());
      }
      out.console_session_seconds = static_cast<int64_t>(v.get<double>() * 3600);
      if (out.console_session_seconds < 1) out.console_session_seconds = 1;
    } else {
      return InvalidArgument(field + ": unknown key (known: max_priority, console_session_hours)");
    }
  }
  return OkStatus();
}

int PriorityCeiling(const PriorityCeilings& ceilings, Role role, std::optional<int> own) {
  if (own) return *own;
  switch (role) {
    case Role::kAdmin:
      return ceilings.admin;
    case Role::kUser:
      return ceilings.user;
    case Role::kViewer:
      return ceilings.viewer;
  }
  return ceilings.viewer;
}

PriorityDecision ClampPriority(int requested, int ceiling, std::string_view user) {
  if (requested <= ceiling) return {requested, ""};
  const std::string who(user);
  return {ceiling, "warning: priority " + std::to_string(requested) + " was lowered to " +
                       std::to_string(ceiling) + ", the highest user " + who +
                       " may set; an admin can raise it with `stoker admin users "
                       "set-max-priority " +
                       who + " N`"};
}

}  // namespace stoker::auth
