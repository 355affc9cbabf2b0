// `stoker server ARGS...` becomes the stokerd installed beside this binary
// (exec: same pid, so a container's signals reach the daemon itself), with
// ARGS passed through unchanged (docs/install.md).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cli/commands.h"

namespace stoker::cli {

namespace fs = std::filesystem;

void RegisterServerCommand(CLI::App& app, Globals&, int& rc) {
  auto* server =
      app.add_subcommand("server", "Run stokerd in the foreground (arguments pass through)");
  server->allow_extras();
  server->callback([&rc, server] {
    std::error_code ec;
    fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
    std::string bin = (dir / "stokerd").string();
    std::vector<std::string> args = {bin};
    for (const std::string& a : server->remaining()) args.push_back(a);
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(bin.c_str(), cargs.data());
    rc = Report(FailedPrecondition("cannot run " + bin + ": " + std::strerror(errno) +
                                   "; stokerd must be installed beside stoker (cmake --install "
                                   "puts both in PREFIX/bin)"));
  });
}

}  // namespace stoker::cli
