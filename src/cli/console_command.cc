// `stoker console`: where the web console is, and a one-time link that signs
// the browser in as this CLI's user (docs/console.md). On a desktop (a
// DISPLAY or WAYLAND_DISPLAY and xdg-open) the link is opened in the
// browser; --no-browser only prints it.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "common/files.h"

extern char** environ;

namespace stoker::cli {
namespace {

using nlohmann::json;

bool OnADesktop() {
  for (const char* v : {"DISPLAY", "WAYLAND_DISPLAY"}) {
    if (const char* s = std::getenv(v); s && *s) return true;
  }
  return false;
}

// Starts `xdg-open url` and does not wait for the browser; false when it
// could not be started.
bool OpenInBrowser(const std::string& url) {
  std::string opener;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::filesystem::path candidate = std::filesystem::path(dir) / "xdg-open";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) {
      opener = candidate.string();
      break;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (opener.empty()) return false;
  pid_t pid;
  char* argv[] = {opener.data(), const_cast<char*>(url.c_str()), nullptr};
  if (::posix_spawn(&pid, opener.c_str(), nullptr, nullptr, argv, environ) != 0) return false;
  int status = 0;
  ::waitpid(pid, &status, 0);  // xdg-open hands the URL over and exits
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The local daemon (no --server, no $STOKER_SERVER) that is not on its
// fixed port: say why the address differs from the one in the docs.
std::string PortNote(const Globals& g, const std::string& url) {
  const char* env = std::getenv("STOKER_SERVER");
  auto port = LocalPort();
  if (!g.server.empty() || (env && *env) || !port.ok()) return "";
  if (url == "http://127.0.0.1:" + std::to_string(*port)) return "";
  return "(port " + std::to_string(*port) +
         " was taken when this daemon started, by another program or another user's stokerd, "
         "so it took the next free one; see stokerd.log in " +
         DefaultStokerHome().string() + ")\n";
}

int Console(const Globals& g, bool no_browser) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto link = (*conn)->Call("POST", "/v1/stoker/console:signInLink", "{}");
  if (!link.ok()) return Report(link.status());
  const std::string base = (*conn)->url();
  const std::string signin = base + link->value("path", "");
  json out = {{"url", base + "/"},
              {"signInUrl", signin},
              {"expireTime", link->value("expireTime", "")},
              {"user", link->value("user", "")}};
  if (Structured(g)) {
    PrintResource(g, out);
    return 0;
  }
  std::printf("Console:  %s/\n%s", base.c_str(), PortNote(g, base).c_str());
  std::printf("Sign in as %s (this link works once, for two minutes):\n  %s\n",
              out["user"].get<std::string>().c_str(), signin.c_str());
  if (!no_browser && OnADesktop()) {
    std::printf(OpenInBrowser(signin) ? "Opened in your browser.\n"
                                      : "Could not start xdg-open; open the link yourself.\n");
  }
  return 0;
}

}  // namespace

void RegisterConsoleCommand(CLI::App& app, Globals& g, int& rc) {
  auto no_browser = std::make_shared<bool>(false);
  auto* console = app.add_subcommand(
      "console", "Print the web console's address and a one-time sign-in link (and open it)");
  console->add_flag("--no-browser", *no_browser, "Only print the link, even on a desktop");
  console->callback([&g, &rc, no_browser] { rc = Console(g, *no_browser); });
}

}  // namespace stoker::cli
