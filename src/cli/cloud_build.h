// A Cloud Build config (cloudbuild.yaml) read into what `stoker builds
// submit` can do on this machine: `docker build` steps become image builds
// with the local engine (`stoker images build`), `docker push` steps keep the
// image in the local store (Stoker runs images from it; there is no
// registry to push to), and every other step is refused before anything
// runs, each named with why. Pure: no engine, no files.
//
// Substitutions as Cloud Build makes them (https://cloud.google.com/build/docs/configuring-builds/substitute-variable-values):
// $PROJECT_ID, $BUILD_ID, $LOCATION and the user's $_NAME / ${_NAME} (from
// the file's `substitutions:` and --substitutions, the flag winning); `$$`
// is a literal `$`. A $_NAME with no value is refused, as Cloud Build does
// unless told otherwise. $COMMIT_SHA, $SHORT_SHA, $BRANCH_NAME, $TAG_NAME,
// $REPO_NAME and $REVISION_ID are empty (no trigger starts the build).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::cli {

struct CloudBuildStep {
  enum class Kind { kBuild, kPush };
  Kind kind = Kind::kBuild;
  std::string id;               // the step's id, or "step N"
  std::vector<std::string> tags;  // build: every -t; push: the image
  std::string file;             // build: -f ("" = the context's Dockerfile)
  std::vector<std::string> build_args;
  std::string context;          // build: relative to the source directory
  std::vector<std::string> notes;  // flags accepted and ignored, said to the user
};

struct CloudBuildPlan {
  std::vector<CloudBuildStep> steps;
  std::vector<std::string> images;  // `images:`, each checked to be built
};

// `config`: the parsed file; `vars`: PROJECT_ID, BUILD_ID, LOCATION and the
// --substitutions (their values win over the file's). InvalidArgument that
// lists every step Stoker cannot run (or the first bad field), naming it.
Result<CloudBuildPlan> PlanCloudBuild(const nlohmann::json& config,
                                      const std::map<std::string, std::string>& vars);

// "${_A}x$$y" with {"_A": "1"} -> "1x$y". InvalidArgument naming `where`
// and the variable for one without a value.
Result<std::string> Substitute(const std::string& text,
                               const std::map<std::string, std::string>& vars,
                               const std::string& where);

}  // namespace stoker::cli
