#include "cli/cloud_build.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace stoker::cli {

using nlohmann::json;

namespace {

constexpr const char* kDockerBuilders[] = {"gcr.io/cloud-builders/docker", "docker",
                                           "gcr.io/cloud-builders/docker:latest"};
// Set by a trigger or a repository; empty for a submitted build.
constexpr const char* kTriggerVars[] = {"COMMIT_SHA", "SHORT_SHA", "BRANCH_NAME", "TAG_NAME",
                                        "REPO_NAME", "REVISION_ID", "TRIGGER_NAME"};

bool IsDocker(const std::string& name) {
  for (const char* d : kDockerBuilders) {
    if (name == d) return true;
  }
  return false;
}

bool NameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// One docker build's arguments (after "build").
Result<CloudBuildStep> ParseBuild(const std::vector<std::string>& args, const std::string& where) {
  CloudBuildStep s;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> Result<std::string> {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0) {
        return a.substr(flag.size() + 1);
      }
      if (i + 1 >= args.size()) return InvalidArgument(where + ": " + flag + " needs a value");
      return args[++i];
    };
    auto is = [&](std::initializer_list<const char*> flags) {
      for (const char* f : flags) {
        std::string flag = f;
        if (a == flag || a.compare(0, flag.size() + 1, flag + "=") == 0) return true;
      }
      return false;
    };
    if (is({"-t", "--tag"})) {
      STOKER_ASSIGN_OR_RETURN(std::string t, value(a.rfind("--", 0) == 0 ? "--tag" : "-t"));
      s.tags.push_back(t);
    } else if (is({"-f", "--file"})) {
      STOKER_ASSIGN_OR_RETURN(s.file, value(a.rfind("--", 0) == 0 ? "--file" : "-f"));
    } else if (is({"--build-arg"})) {
      STOKER_ASSIGN_OR_RETURN(std::string b, value("--build-arg"));
      s.build_args.push_back(b);
    } else if (is({"--network", "--cache-from"})) {
      std::string flag = a.substr(0, a.find('='));
      STOKER_ASSIGN_OR_RETURN(std::string v, value(flag));
      s.notes.push_back(flag + " " + v + " ignored (a local build: no Cloud Build network, "
                        "the engine's own cache)");
    } else if (a == "--no-cache" || a == "--pull" || a == "-q" || a == "--quiet") {
      s.notes.push_back(a + " ignored");
    } else if (!a.empty() && a[0] == '-') {
      return InvalidArgument(where + ": docker build " + a +
                             " is not something stoker builds submit runs; it runs -t/--tag, "
                             "-f/--file, --build-arg and the context directory");
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 1) {
    return InvalidArgument(where + ": docker build needs exactly one context directory, got " +
                           std::to_string(positional.size()));
  }
  if (s.tags.empty()) {
    return InvalidArgument(where + ": docker build needs -t IMAGE (Stoker runs images by name)");
  }
  s.context = positional[0];
  return s;
}

}  // namespace

Result<std::string> Substitute(const std::string& text,
                               const std::map<std::string, std::string>& vars,
                               const std::string& where) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      out.push_back('$');
      ++i;
      continue;
    }
    std::string name;
    size_t end = i + 1;
    if (end < text.size() && text[end] == '{') {
      size_t close = text.find('}', end);
      if (close == std::string::npos) {
        return InvalidArgument(where + ": '" + text + "' has a ${ without its }");
      }
      name = text.substr(end + 1, close - end - 1);
      end = close + 1;
    } else {
      while (end < text.size() && NameChar(text[end])) name.push_back(text[end++]);
      if (name.empty()) {  // a lone $: kept, as a shell would see it
        out.push_back('$');
        continue;
      }
    }
    auto it = vars.find(name);
    if (it == vars.end()) {
      bool trigger = false;
      for (const char* t : kTriggerVars) trigger = trigger || name == t;
      if (!trigger) {
        return InvalidArgument(where + ": $" + name + " has no value; give it with --substitutions=" +
                               name + "=VALUE or under `substitutions:` in the config (only "
                               "names starting with _ are yours)");
      }
    } else {
      out += it->second;
    }
    i = end - 1;
  }
  return out;
}

Result<CloudBuildPlan> PlanCloudBuild(const json& config,
                                      const std::map<std::string, std::string>& given) {
  if (!config.is_object() || !config.contains("steps") || !config["steps"].is_array() ||
      config["steps"].empty()) {
    return InvalidArgument("the build config has no `steps:` (a list of {name, args})");
  }
  std::map<std::string, std::string> vars;
  if (config.contains("substitutions")) {
    if (!config["substitutions"].is_object()) {
      return InvalidArgument("substitutions: expected a map of _NAME: value");
    }
    for (const auto& [k, v] : config["substitutions"].items()) {
      if (k.empty() || k[0] != '_') {
        return InvalidArgument("substitutions." + k + ": user substitutions start with _");
      }
      vars[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  for (const auto& [k, v] : given) vars[k] = v;

  CloudBuildPlan plan;
  std::vector<std::string> refused;
  for (size_t i = 0; i < config["steps"].size(); ++i) {
    const json& step = config["steps"][i];
    std::string where = "steps[" + std::to_string(i) + "]";
    if (!step.is_object() || !step.contains("name") || !step["name"].is_string()) {
      return InvalidArgument(where + ": a step needs `name:` (its builder image)");
    }
    std::string name = step["name"];
    std::string id = step.value("id", "step " + std::to_string(i + 1));
    where += " (" + id + ")";
    if (!IsDocker(name) || step.contains("entrypoint") || step.contains("script")) {
      refused.push_back(where + ": " + name +
                        (IsDocker(name) ? " with its own entrypoint or script"
                                        : " (only the docker builder's build and push run here)"));
      continue;
    }
    std::vector<std::string> args;
    for (const json& a : step.value("args", json::array())) {
      if (!a.is_string()) return InvalidArgument(where + ".args: expected strings");
      STOKER_ASSIGN_OR_RETURN(std::string s, Substitute(a.get<std::string>(), vars, where + ".args"));
      args.push_back(std::move(s));
    }
    if (args.empty() || (args[0] != "build" && args[0] != "push")) {
      refused.push_back(where + ": docker " + (args.empty() ? std::string("(no args)") : args[0]) +
                        " (only build and push run here)");
      continue;
    }
    if (args[0] == "push") {
      std::vector<std::string> rest(args.begin() + 1, args.end());
      rest.erase(std::remove(rest.begin(), rest.end(), "--all-tags"), rest.end());
      rest.erase(std::remove(rest.begin(), rest.end(), "-a"), rest.end());
      if (rest.size() != 1) return InvalidArgument(where + ": docker push needs one image");
      CloudBuildStep push;
      push.kind = CloudBuildStep::Kind::kPush;
      push.id = id;
      push.tags = rest;
      plan.steps.push_back(std::move(push));
      continue;
    }
    STOKER_ASSIGN_OR_RETURN(CloudBuildStep build,
                            ParseBuild(std::vector<std::string>(args.begin() + 1, args.end()), where));
    build.id = id;
    std::string dir = step.value("dir", "");
    if (!dir.empty()) {
      STOKER_ASSIGN_OR_RETURN(dir, Substitute(dir, vars, where + ".dir"));
      build.context = dir + "/" + build.context;
      if (!build.file.empty() && build.file[0] != '/') build.file = dir + "/" + build.file;
    }
    plan.steps.push_back(std::move(build));
  }
  if (!refused.empty()) {
    std::string text = "stoker builds submit runs only `docker build` and `docker push` steps "
                       "(gcr.io/cloud-builders/docker); these cannot run here:";
    for (const std::string& r : refused) text += "\n  " + r;
    text += "\nRun them yourself, or leave them out of the config";
    return InvalidArgument(text);
  }
  std::set<std::string> built;
  for (const CloudBuildStep& s : plan.steps) {
    if (s.kind == CloudBuildStep::Kind::kBuild) built.insert(s.tags.begin(), s.tags.end());
  }
  for (const json& image : config.value("images", json::array())) {
    if (!image.is_string()) return InvalidArgument("images: expected image names");
    STOKER_ASSIGN_OR_RETURN(std::string name, Substitute(image.get<std::string>(), vars, "images"));
    if (!built.count(name)) {
      return InvalidArgument("images: " + name + " is not built by any step (a docker build "
                             "with -t " + name + ")");
    }
    plan.images.push_back(name);
  }
  for (const CloudBuildStep& s : plan.steps) {
    if (s.kind == CloudBuildStep::Kind::kPush && !built.count(s.tags[0])) {
      return InvalidArgument(s.id + ": docker push " + s.tags[0] +
                             ": no step builds it (pushes of images from elsewhere do not "
                             "run here)");
    }
  }
  return plan;
}

}  // namespace stoker::cli
