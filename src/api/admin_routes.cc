// Users and tokens (admin only; the role check in api.cc guards /v1/admin/):
//   GET    /v1/admin/users                      {"users": [User + "tokens"]}
//   POST   /v1/admin/users                      {"name", "role", "unixUser"} -> User
//   DELETE /v1/admin/users/{name}               removes it and revokes its tokens
//   POST   /v1/admin/users/{name}/tokens        -> {"id", "user", "token"}: shown once
//   POST   /v1/admin/users/{name}:setMaxPriority  {"maxPriority": N | null} -> User;
//                                                  null: back to its role's ceiling
//   POST   /v1/admin/tokens/{id}:revoke         -> {}; ends the user's console sessions
// The store (admin only):
//   POST   /v1/admin/backup                     -> the bytes of a consistent copy
//                                                  of stoker.db (application/vnd.sqlite3)
// and, for every authenticated caller:
//   GET    /v1/whoami                           {"user", "role", "unixUser", "tokenId"}
#include <spdlog/spdlog.h>

#include <regex>

#include "api/routes.h"
#include "common/time.h"

namespace stoker::api {
namespace {

using nlohmann::json;

// A user with its priority ceiling: maxPriority (the one that applies) and
// maxPrioritySource ("user": set for it by an admin; "role": its role's).
json RenderUser(const ApiDeps& d, const auth::User& u, const std::vector<auth::TokenInfo>& tokens) {
  json j = {
      {"name", u.name},
      {"role", auth::RoleName(u.role)},
      {"unixUser", u.unix_user},
      {"createTime", FormatRfc3339(u.create_time_us)},
      {"maxPriority", auth::PriorityCeiling(d.auth_policy.max_priority, u.role, u.max_priority)},
      {"maxPrioritySource", u.max_priority ? "user" : "role"},
      {"tokens", json::array()}};
  for (const auth::TokenInfo& t : tokens) {
    if (t.user != u.name) continue;
    json tj = {{"id", t.id}, {"createTime", FormatRfc3339(t.create_time_us)}};
    if (t.revoke_time_us) tj["revokeTime"] = FormatRfc3339(t.revoke_time_us);
    j["tokens"].push_back(tj);
  }
  return j;
}

http::Response AddUser(const ApiDeps& d, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j["name"].is_string()) {
    return Error(InvalidArgument(
        "body: expected {\"name\": \"alice\", \"role\": \"user\", \"unixUser\": \"alice\"}"));
  }
  auth::User u;
  u.name = j["name"].get<std::string>();
  const json& role = j.value("role", json("user"));
  if (!role.is_string()) return Error(InvalidArgument("role: use admin, user or viewer"));
  auto parsed = auth::ParseRole(role.get<std::string>(), "role");
  if (!parsed.ok()) return Error(parsed.status());
  u.role = *parsed;
  const json& unix_user = j.value("unixUser", json(""));
  if (!unix_user.is_string()) return Error(InvalidArgument("unixUser: must be a Unix user name"));
  u.unix_user = unix_user.get<std::string>();
  if (!u.unix_user.empty()) {
    if (Status s = auth::ValidateUserName(u.unix_user, "unixUser"); !s.ok()) return Error(s);
  }
  if (Status s = d.auth->AddUser(u); !s.ok()) return Error(s);
  auto stored = d.auth->GetUser(u.name);
  if (!stored.ok()) return Error(stored.status());
  return Json(RenderUser(d, *stored, {}));
}

// {"maxPriority": N} sets the user's own ceiling; {"maxPriority": null}
// clears it back to its role's.
http::Response SetMaxPriority(const ApiDeps& d, const std::string& name, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("maxPriority") ||
      !(j["maxPriority"].is_null() || j["maxPriority"].is_number_integer())) {
    return Error(InvalidArgument(
        "maxPriority: expected {\"maxPriority\": N} with N a whole number from -1000 to 1000, or "
        "{\"maxPriority\": null} for the role's ceiling"));
  }
  std::optional<int> ceiling;
  if (!j["maxPriority"].is_null()) {
    const int64_t n = j["maxPriority"].get<int64_t>();
    if (Status s = auth::ValidatePriorityCeiling(n, "maxPriority"); !s.ok()) return Error(s);
    ceiling = static_cast<int>(n);
  }
  if (Status s = d.auth->SetMaxPriority(name, ceiling); !s.ok()) return Error(s);
  auto u = d.auth->GetUser(name);
  if (!u.ok()) return Error(u.status());
  return Json(RenderUser(d, *u, {}));
}

}  // namespace

std::optional<http::Response> HandleAdminRoutes(const ApiDeps& d, const http::Request& req,
                                                const auth::Principal& caller) {
  static const std::regex kUser(R"(^/v1/admin/users/([^/]+)$)");
  static const std::regex kUserTokens(R"(^/v1/admin/users/([^/]+)/tokens$)");
  static const std::regex kRevoke(R"(^/v1/admin/tokens/([^/:]+):revoke$)");
  static const std::regex kSetMaxPriority(R"(^/v1/admin/users/([^/:]+):setMaxPriority$)");
  std::smatch m;
  const std::string& path = req.path;
  if (path == "/v1/whoami" && req.method == "GET") {
    return Json({{"user", caller.user},
                 {"role", auth::RoleName(caller.role)},
                 {"unixUser", caller.unix_user},
                 {"tokenId", caller.token_id}});
  }
  if (path.rfind("/v1/admin/", 0) != 0) return std::nullopt;
  auto not_supported = [&req] {
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
  };
  if (path == "/v1/admin/users") {
    if (req.method == "POST") return AddUser(d, req.body);
    if (req.method != "GET") return not_supported();
    auto users = d.auth->ListUsers();
    if (!users.ok()) return Error(users.status());
    auto tokens = d.auth->ListTokens();
    if (!tokens.ok()) return Error(tokens.status());
    json out = {{"users", json::array()}};
    for (const auth::User& u : *users) out["users"].push_back(RenderUser(d, u, *tokens));
    return Json(out);
  }
  if (path == "/v1/admin/backup") {
    if (req.method != "POST") return not_supported();
    // The copy comes back to the caller, who writes it as its own account:
    // the daemon writes no path a request names.
    auto bytes = d.store->Backup();
    if (!bytes.ok()) return Error(bytes.status());
    spdlog::info("store backup ({} bytes) sent to admin '{}'", bytes->size(), caller.user);
    http::Response r;
    r.content_type = "application/vnd.sqlite3";
    r.body = std::move(*bytes);
    return r;
  }
  if (std::regex_match(path, m, kSetMaxPriority)) {
    if (req.method != "POST") return not_supported();
    return SetMaxPriority(d, m[1], req.body);
  }
  if (std::regex_match(path, m, kUser)) {
    if (req.method == "GET") {
      auto u = d.auth->GetUser(m[1]);
      if (!u.ok()) return Error(u.status());
      auto tokens = d.auth->ListTokens(u->name);
      if (!tokens.ok()) return Error(tokens.status());
      return Json(RenderUser(d, *u, *tokens));
    }
    if (req.method != "DELETE") return not_supported();
    if (m[1] == caller.user) {
      return Error(FailedPrecondition(
          "you cannot remove yourself ('" + caller.user +
          "'); another admin can, which keeps at least one admin able to manage users"));
    }
    if (Status s = d.auth->RemoveUser(m[1]); !s.ok()) return Error(s);
    return Json(json::object());
  }
  if (std::regex_match(path, m, kUserTokens)) {
    if (req.method != "POST") return not_supported();
    auto issued = d.auth->IssueToken(m[1]);
    if (!issued.ok()) return Error(issued.status());
    return Json({{"id", issued->id}, {"user", m[1].str()}, {"token", issued->token}});
  }
  if (std::regex_match(path, m, kRevoke)) {
    if (req.method != "POST") return not_supported();
    if (Status s = d.auth->RevokeToken(m[1]); !s.ok()) return Error(s);
    return Json(json::object());
  }
  return Error(NotFound("no route for " + req.method + " " + path));
}

}  // namespace stoker::api
