// stoker: the command-line client. A thin HTTP client of stokerd; it
// validates job files locally for early, precise errors, and packs trainer
// packages. Each command group registers itself (commands.h, "Command
// groups"); this file parses the line and turns parse errors into exit codes.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "cli/did_you_mean.h"

using namespace stoker;
using namespace stoker::cli;

int main(int argc, char** argv) {
  CLI::App app{"stoker: run Vertex AI-style training jobs on your own machines"};
  app.require_subcommand(1);
  Globals g;
  AddGlobalFlags(app, g);
  int rc = 0;
  RegisterSessionCommands(app, g, rc);
  RegisterConsoleCommand(app, g, rc);
  RegisterBuildsCommands(app, g, rc);
  RegisterJobsCommands(app, g, rc);
  RegisterHptuningCommands(app, g, rc);
  RegisterAiCommands(app, g, rc);
  RegisterAiPlatformCommands(app, g, rc);
  RegisterStorageCommands(app, g, rc);
  RegisterImagesCommands(app, g, rc);
  RegisterAdminCommands(app, g, rc);
  RegisterClusterCommands(app, g, rc);
  RegisterCostCommands(app, g, rc);
  RegisterServerCommand(app, g, rc);

  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    // gcloud's global flags may stand anywhere before `--`.
    auto hoisted = HoistGlobalFlags(args, FlagsWithValues());
    if (!hoisted.ok()) return Report(hoisted.status());
    args = hoisted->rest;
    g.quiet = hoisted->quiet;
    if (hoisted->format) {
      g.format = *hoisted->format;
      bool usage_command = std::find(args.begin(), args.end(), "usage") != args.end();
      if (g.format != "csv" || !usage_command) {  // `usage --format csv`: its own CSV report
        auto output = ParseFormat(g.format);
        if (!output.ok()) return Report(output.status());
        g.output = *output;
      }
    }
    MarkEmptyGcloudListValues(args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    if (app.get_name().empty()) app.name(argv[0]);
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      std::string hint = DidYouMean(app, std::vector<std::string>(argv + 1, argv + argc), e);
      if (!hint.empty()) {
        std::cerr << "ERROR: " << hint << "\n";
        return 2;
      }
    }
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return rc;
}
