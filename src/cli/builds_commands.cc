// `stoker builds submit`: gcloud's Cloud Build command, for the builds a
// Vertex tutorial runs before its job: `--tag IMAGE` builds SOURCE's
// Dockerfile; `--config cloudbuild.yaml` runs the file's docker build and
// push steps (cloud_build.h) with the engine on this machine, as `stoker
// images build` does. Images stay in this machine's store, which is where
// jobs run them from.
#include <openssl/rand.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/cloud_build.h"
#include "cli/commands.h"
#include "common/files.h"
#include "common/json_yaml.h"

namespace stoker::cli {
namespace {

namespace fs = std::filesystem;

struct BuildSubmitFlags {
  std::string source = ".";
  std::string config;
  std::string tag;
  std::string substitutions;  // _A=1,_B=2
};

std::string BuildId() {
  unsigned char raw[8];
  if (RAND_bytes(raw, sizeof raw) != 1) return "local";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char c : raw) id += {kHex[c >> 4], kHex[c & 0xf]};
  return id;
}

int Submit(const Globals& g, const BuildSubmitFlags& f) {
  std::error_code ec;
  if (!fs::is_directory(f.source, ec)) {
    return Report(InvalidArgument("SOURCE: " + f.source +
                                  " is not a directory (a local build context; gs:// sources "
                                  "are not fetched)"));
  }
  if (f.config.empty() == f.tag.empty()) {
    return Report(InvalidArgument(
        "give one of --tag IMAGE (build SOURCE's Dockerfile) or --config FILE (a "
        "cloudbuild.yaml)"));
  }
  if (!f.tag.empty()) {
    BuildFlags b;
    b.tag = f.tag;
    b.dir = f.source;
    return ImagesBuild(b);
  }
  auto text = ReadFile(f.config);
  if (!text.ok()) {
    return Report(InvalidArgument("--config: cannot read " + f.config + ": " +
                                  text.status().message()));
  }
  auto doc = ParseYamlOrJson(*text, f.config);
  if (!doc.ok()) return Report(doc.status());
  std::map<std::string, std::string> vars = {
      {"PROJECT_ID", g.project}, {"LOCATION", g.region}, {"BUILD_ID", BuildId()}};
  std::stringstream pairs(f.substitutions);
  for (std::string kv; std::getline(pairs, kv, ',');) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Report(InvalidArgument("--substitutions: '" + kv + "' is not _NAME=VALUE"));
    }
    vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto plan = PlanCloudBuild(*doc, vars);
  if (!plan.ok()) return Report(plan.status());
  int built = 0;
  for (const CloudBuildStep& step : plan->steps) {
    if (step.kind == CloudBuildStep::Kind::kPush) {
      std::cout << step.id << ": push " << step.tags[0]
                << ": kept in this machine's image store, where jobs run it from (no registry "
                   "push)\n";
      continue;
    }
    for (const std::string& note : step.notes) std::cerr << step.id << ": " << note << "\n";
    std::cout << step.id << ": docker build -t " << step.tags[0] << " " << step.context << "\n";
    BuildFlags b;
    b.tag = step.tags[0];
    b.extra_tags.assign(step.tags.begin() + 1, step.tags.end());
    b.dir = (fs::path(f.source) / step.context).lexically_normal().string();
    b.file = step.file.empty() || step.file[0] == '/'
                 ? step.file
                 : (fs::path(f.source) / step.file).lexically_normal().string();
    b.build_args = step.build_args;
    if (int code = ImagesBuild(b); code != 0) {
      std::cerr << "ERROR: " << step.id << " failed; the steps after it did not run\n";
      return code;
    }
    ++built;
  }
  std::cout << "DONE: " << built << " image build(s) on this machine";
  if (!plan->images.empty()) {
    std::cout << "; images:";
    for (const std::string& i : plan->images) std::cout << " " << i;
  }
  std::cout << "\n";
  return 0;
}

}  // namespace

void RegisterBuildsCommands(CLI::App& app, Globals& g, int& rc) {
  auto* builds = app.add_subcommand(
      "builds", "Cloud Build's submit, for docker build and push steps (gcloud builds)");
  builds->require_subcommand(1);
  auto f = std::make_shared<BuildSubmitFlags>();
  auto* submit = builds->add_subcommand(
      "submit",
      "Build images on this machine from SOURCE: --tag IMAGE (its Dockerfile) or --config "
      "cloudbuild.yaml (its docker build and push steps; other steps are refused)");
  submit->add_option("SOURCE", f->source, "The build context directory (default .)");
  submit->add_option("--config", f->config, "A Cloud Build config file (cloudbuild.yaml)");
  submit->add_option("--tag,-t", f->tag, "Build SOURCE's Dockerfile into this image");
  submit->add_option("--substitutions", f->substitutions,
                     "_NAME=VALUE[,...]: the config's user substitutions");
  // Accepted for gcloud's command lines; a local build has no use for them.
  auto ignored = std::make_shared<std::vector<std::string>>(3);
  auto async = std::make_shared<bool>(false);
  submit->add_flag("--async", *async, "Accepted; the build runs in the foreground here");
  submit->add_option("--timeout", (*ignored)[0], "Accepted and ignored (no build timeout here)");
  submit->add_option("--machine-type", (*ignored)[1], "Accepted and ignored (this machine builds)");
  submit->add_option("--gcs-source-staging-dir", (*ignored)[2],
                     "Accepted and ignored (the source is built where it is)");
  submit->callback([&g, &rc, f, ignored, async] { rc = Submit(g, *f); });
}

}  // namespace stoker::cli
