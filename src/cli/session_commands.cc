// gcloud's commands around a job that scripts call (issue #30): `auth
// print-access-token` (seed scripts curl the API with it), `config list`
// and `config get-value` (a script asks which project it is in). They say
// what this CLI uses, as gcloud says what it would use; nothing is stored.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "common/files.h"

namespace stoker::cli {
namespace {

using nlohmann::json;

// The server this CLI talks to, without starting or asking anything:
// --server, else $STOKER_SERVER, else the local daemon's address when one
// has written it, else "" (the first command starts one).
std::string ServerInUse(const Globals& g) {
  if (!g.server.empty()) return g.server;
  if (const char* s = std::getenv("STOKER_SERVER"); s && *s) return s;
  auto addr = ReadFile(DefaultStokerHome() / "stokerd.addr");
  if (!addr.ok()) return "";
  std::string url = *addr;
  while (!url.empty() && (url.back() == '\n' || url.back() == ' ')) url.pop_back();
  return url;
}

// gcloud's sections and properties, as this CLI has them.
json Properties(const Globals& g) {
  json p = {{"core", {{"project", g.project}}},
            {"compute", {{"region", g.region}}},
            {"ai", {{"region", g.region}}}};
  if (std::string server = ServerInUse(g); !server.empty()) p["stoker"]["server"] = server;
  return p;
}

// "project", "core/project" or "core.project" -> {"core", "project"};
// a bare name is looked up in every section (gcloud's default is core).
Result<std::pair<std::string, std::string>> FindProperty(const json& props,
                                                         const std::string& name) {
  std::string section, key = name;
  if (size_t cut = name.find_first_of("/."); cut != std::string::npos) {
    section = name.substr(0, cut);
    key = name.substr(cut + 1);
  }
  for (const char* s : {"core", "compute", "ai", "stoker"}) {
    if (!section.empty() && section != s) continue;
    if (props.contains(s) && props[s].contains(key))
      return std::pair<std::string, std::string>{s, key};
  }
  std::string known;
  for (const auto& [s, keys] : props.items()) {
    for (const auto& [k, v] : keys.items()) known += (known.empty() ? "" : ", ") + s + "/" + k;
  }
  return InvalidArgument("config: unknown property '" + name + "'; this CLI has " + known);
}

int ConfigList(const Globals& g, const std::string& only) {
  json props = Properties(g);
  if (!only.empty()) {
    auto found = FindProperty(props, only);
    if (!found.ok()) return Report(found.status());
    props = {{found->first, {{found->second, props[found->first][found->second]}}}};
  }
  if (Structured(g)) {
    PrintResource(g, props);
    return 0;
  }
  for (const auto& [section, keys] : props.items()) {
    std::printf("[%s]\n", section.c_str());
    for (const auto& [key, value] : keys.items()) {
      std::printf("%s = %s\n", key.c_str(), value.get<std::string>().c_str());
    }
  }
  return 0;
}

int ConfigGetValue(const Globals& g, const std::string& name) {
  json props = Properties(g);
  auto found = FindProperty(props, name);
  if (!found.ok()) return Report(found.status());
  std::printf("%s\n", props[found->first][found->second].get<std::string>().c_str());
  return 0;
}

int PrintAccessToken(const Globals& g) {
  // Connect: the token a command would send (the local daemon's, once it
  // has started and written it).
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  if ((*conn)->token().empty()) {
    return Report(FailedPrecondition(
        "no token: pass --token, set $STOKER_TOKEN, or ask an admin for one (stoker admin users "
        "token NAME)"));
  }
  std::printf("%s\n", (*conn)->token().c_str());
  return 0;
}

}  // namespace

void RegisterSessionCommands(CLI::App& app, Globals& g, int& rc) {
  auto* auth = app.add_subcommand("auth", "The credentials this CLI sends (gcloud auth)");
  auth->require_subcommand(1);
  auth->add_subcommand("print-access-token",
                       "Print the bearer token this CLI sends (for curl -H \"Authorization: "
                       "Bearer $(stoker auth print-access-token)\")")
      ->callback([&] { rc = PrintAccessToken(g); });

  auto* config = app.add_subcommand("config", "The project, region and server this CLI uses");
  config->require_subcommand(1);
  auto only = std::make_shared<std::string>();
  auto* list = config->add_subcommand("list", "List the properties (gcloud config list)");
  list->add_option("PROPERTY", *only, "Only this one: project, core/project, region, ...");
  list->callback([&g, &rc, only] { rc = ConfigList(g, *only); });
  for (const char* verb : {"get-value", "get"}) {
    auto name = std::make_shared<std::string>();
    auto* get = config->add_subcommand(verb, "Print one property's value (gcloud config get)");
    get->add_option("PROPERTY", *name, "project, core/project, region, compute/region, ...")
        ->required();
    get->callback([&g, &rc, name] { rc = ConfigGetValue(g, *name); });
  }
}

}  // namespace stoker::cli
