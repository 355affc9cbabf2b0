// `stoker admin users ...`: users, roles and API tokens, and `stoker admin
// backup`: the store, through the admin routes of stokerd (/v1/admin/...,
// admins only).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/files.h"
#include "http/http.h"

namespace stoker::cli {

using nlohmann::json;

int AdminUsersAdd(const Globals& g, const AdminUserFlags& f) {
  json body = {{"name", f.name}, {"role", f.role}, {"unixUser", f.unix_user}};
  return CallAndPrint(
      g, [&](Connection& c) { return c.Call("POST", "/v1/admin/users", body.dump()); },
      [](const json& u) {
        std::cout << "Added user " << u.value("name", "") << " (role " << u.value("role", "")
                  << (u.value("unixUser", "").empty() ? ""
                                                      : ", unix user " + u.value("unixUser", ""))
                  << "). Give it a token with: stoker admin users token " << u.value("name", "")
                  << "\n";
      });
}

int AdminUsersList(const Globals& g) {
  return CallAndPrint(
      g, [](Connection& c) { return c.Call("GET", "/v1/admin/users"); },
      [](const json& out) {
        std::printf("%-20s %-7s %-16s %-12s %s\n", "NAME", "ROLE", "UNIX_USER", "MAX_PRIORITY",
                    "TOKENS");
        for (const json& u : out.value("users", json::array())) {
          std::string tokens;
          for (const json& t : u.value("tokens", json::array())) {
            if (!tokens.empty()) tokens += " ";
            tokens += t.value("id", "") + (t.contains("revokeTime") ? "(revoked)" : "");
          }
          // The role's ceiling is marked as such; a user's own is shown bare.
          std::string max_priority =
              u.contains("maxPriority") ? u["maxPriority"].dump() : std::string("-");
          if (u.value("maxPrioritySource", "") == "role") max_priority += " (role)";
          std::printf("%-20s %-7s %-16s %-12s %s\n", u.value("name", "").c_str(),
                      u.value("role", "").c_str(),
                      u.value("unixUser", "").empty() ? "-" : u.value("unixUser", "").c_str(),
                      max_priority.c_str(), tokens.empty() ? "-" : tokens.c_str());
        }
      });
}

int AdminUsersRemove(const Globals& g, const std::string& name) {
  return CallAndPrint(
      g,
      [&](Connection& c) { return c.Call("DELETE", "/v1/admin/users/" + http::UrlEncode(name)); },
      [&](const json&) { std::cout << "Removed user " << name << " and revoked its tokens.\n"; });
}

int AdminUsersToken(const Globals& g, const std::string& name) {
  return CallAndPrint(
      g,
      [&](Connection& c) {
        return c.Call("POST", "/v1/admin/users/" + http::UrlEncode(name) + "/tokens");
      },
      [](const json& t) {
        // The token alone on stdout, so that `TOKEN=$(stoker admin users token x)` works.
        std::cout << t.value("token", "") << "\n";
        std::cerr << "A new token (id " << t.value("id", "") << ") for user " << t.value("user", "")
                  << ". It is shown only now; give it to the user as STOKER_TOKEN or --token, "
                     "and revoke it with: stoker admin users revoke "
                  << t.value("id", "") << "\n";
      });
}

int AdminTokensRevoke(const Globals& g, const std::string& token_id) {
  return CallAndPrint(
      g,
      [&](Connection& c) {
        return c.Call("POST", "/v1/admin/tokens/" + http::UrlEncode(token_id) + ":revoke");
      },
      [&](const json&) { std::cout << "Revoked token " << token_id << ".\n"; });
}

int AdminUsersSetMaxPriority(const Globals& g, const std::string& name, const std::string& value) {
  json body;
  if (value == "role") {
    body["maxPriority"] = nullptr;
  } else {
    char* end = nullptr;
    long long n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0') {
      return Report(InvalidArgument("N: '" + value +
                                    "' is not a priority; give a whole number from -1000 to "
                                    "1000, or 'role' for the role's ceiling"));
    }
    body["maxPriority"] = n;
  }
  return CallAndPrint(
      g,
      [&](Connection& c) {
        return c.Call("POST", "/v1/admin/users/" + http::UrlEncode(name) + ":setMaxPriority",
                      body.dump());
      },
      [](const json& u) {
        std::cout << "User " << u.value("name", "") << " may now set priorities up to "
                  << u.value("maxPriority", 0)
                  << (u.value("maxPrioritySource", "") == "role" ? " (its role's ceiling)" : "")
                  << "; a job above it is stored at it, with a warning event.\n";
      });
}

int AdminWhoami(const Globals& g) {
  return CallAndPrint(
      g, [](Connection& c) { return c.Call("GET", "/v1/whoami"); },
      [](const json& w) {
        std::cout << w.value("user", "") << " (role " << w.value("role", "") << ", token "
                  << w.value("tokenId", "") << ")\n";
      });
}

int AdminBackup(const Globals& g, const std::string& file) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  Result<std::string> bytes = (*conn)->CallRaw("POST", "/v1/admin/backup");
  if (!bytes.ok()) return Report(bytes.status());
  if (bytes->rfind("SQLite format 3", 0) != 0) {
    return Report(
        Internal("stokerd answered the backup with something that is not an SQLite "
                 "database; nothing was written"));
  }
  if (file == "-") {
    std::cout.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    std::cout.flush();
    return std::cout ? 0 : Report(Internal("cannot write the backup to stdout"));
  }
  // The copy holds token hashes and every spec: private to the caller, as
  // the store is to the daemon. (The CLI is single-threaded: the umask
  // change affects nothing else.)
  mode_t old_mask = ::umask(077);
  Status written = WriteFileAtomic(file, *bytes);
  ::umask(old_mask);
  if (!written.ok()) return Report(written);
  std::cerr << "Wrote a copy of the store (" << bytes->size() << " bytes) to " << file
            << ". Restore it as docs/install.md says (stop stokerd, replace stoker.db).\n";
  return 0;
}

void RegisterAdminCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    AdminUserFlags uf;
    std::string user_name, token_id, max_priority, backup_file;
  };
  auto v = std::make_shared<Values>();
  auto* admin = app.add_subcommand("admin", "Administration (admins only)");
  admin->require_subcommand(1);
  auto* users = admin->add_subcommand("users", "Users, roles and API tokens");
  users->require_subcommand(1);
  auto* users_add = users->add_subcommand("add", "Add a user");
  users_add->add_option("NAME", v->uf.name, "User name (a-z, 0-9, _ . -)")->required();
  users_add->add_option("--role", v->uf.role, "admin, user or viewer")
      ->check(CLI::IsMember({"admin", "user", "viewer"}))
      ->capture_default_str();
  users_add->add_option("--unix-user", v->uf.unix_user,
                        "Unix account its replicas run as when stokerd runs as root");
  users_add->callback([&g, &rc, v] { rc = AdminUsersAdd(g, v->uf); });
  auto* users_list = users->add_subcommand("list", "List users and their token ids");
  users_list->callback([&g, &rc] { rc = AdminUsersList(g); });
  auto* users_remove = users->add_subcommand("remove", "Remove a user and revoke its tokens");
  users_remove->add_option("NAME", v->user_name)->required();
  users_remove->callback([&g, &rc, v] { rc = AdminUsersRemove(g, v->user_name); });
  auto* users_token =
      users->add_subcommand("token", "Issue a new token for a user (printed once, on stdout)");
  users_token->add_option("NAME", v->user_name)->required();
  users_token->callback([&g, &rc, v] { rc = AdminUsersToken(g, v->user_name); });
  auto* users_revoke = users->add_subcommand("revoke", "Revoke a token by its id");
  users_revoke->add_option("TOKEN_ID", v->token_id)->required();
  users_revoke->callback([&g, &rc, v] { rc = AdminTokensRevoke(g, v->token_id); });
  auto* users_max_priority = users->add_subcommand(
      "set-max-priority", "Set the highest job priority a user may set (N, or 'role')");
  users_max_priority->add_option("NAME", v->user_name)->required();
  users_max_priority
      ->add_option("N", v->max_priority,
                   "-1000..1000, or 'role' for the role's ceiling (config auth:)")
      ->required();
  users_max_priority->callback(
      [&g, &rc, v] { rc = AdminUsersSetMaxPriority(g, v->user_name, v->max_priority); });
  auto* whoami = admin->add_subcommand("whoami", "Show the user the token belongs to");
  whoami->callback([&g, &rc] { rc = AdminWhoami(g); });
  auto* backup = admin->add_subcommand(
      "backup", "Copy the daemon's store (every job, study, user) while it runs, into FILE");
  backup->add_option("FILE", v->backup_file, "Where to write the copy (mode 0600); - for stdout")
      ->required();
  backup->callback([&g, &rc, v] { rc = AdminBackup(g, v->backup_file); });
}

}  // namespace stoker::cli
