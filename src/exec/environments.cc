#include "exec/environments.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "exec/command.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    fs::path candidate = fs::path(p.substr(start, end - start)) / name;
    if (!candidate.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

}  // namespace

Environments::Environments(std::vector<ImageMatch> rules, fs::path shim_root, fs::path helpers_dir,
                           std::string config_file, fs::path interpreter_cache)
    : rules_(std::move(rules)),
      shim_root_(std::move(shim_root)),
      helpers_dir_(std::move(helpers_dir)),
      config_file_(std::move(config_file)),
      checks_(std::make_unique<InterpreterChecks>(std::move(interpreter_cache))) {
  std::vector<std::string> candidates = {"/usr/bin/python3", OnPath("python3")};
  for (const std::string& c : candidates) {
    // Found, not imported (milliseconds); remembered across restarts.
    if (!c.empty() && checks_->Check(c, "torch", ModuleCheck::kFind)) {
      auto_python_ = c;
      auto_reason_ = "it can import torch";
      return;
    }
  }
  for (const std::string& c : candidates) {
    if (!c.empty() && ::access(c.c_str(), X_OK) == 0) {
      auto_python_ = c;
      auto_reason_ = "no Python 3 here can import torch (install python3-torch); using it anyway";
      return;
    }
  }
  auto_python_ = "/usr/bin/python3";
  auto_reason_ = "no Python 3 found (install python3)";
}

Environment Environments::Build(const std::string& python) const {
  Environment env;
  env.python = python;
  const std::string system_path = ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::error_code ec;
  fs::path bin = fs::path(python).parent_path();
  if (fs::exists(bin.parent_path() / "pyvenv.cfg", ec)) {
    // A virtual environment: Python finds it from the pyvenv.cfg beside the
    // path it was started by, so `python3` must be found in the venv's own
    // bin/ (a link to it elsewhere starts the base interpreter without the
    // venv's packages). Its tools (torchrun, pip) come with it, as after
    // `source bin/activate`.
    env.base_env["PATH"] = bin.string() + system_path;
    env.base_env["VIRTUAL_ENV"] = bin.parent_path().string();
  } else {
    // bin/ with python and python3 pointing at the interpreter, first on PATH.
    std::string key;
    for (char ch : python) key += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    bin = shim_root_ / key / "bin";
    fs::create_directories(bin, ec);
    for (const char* name : {"python", "python3"}) {
      fs::path link = bin / name;
      if (!fs::is_symlink(link, ec)) fs::create_symlink(python, link, ec);
    }
    env.base_env["PATH"] = bin.string() + system_path;
  }
  env.base_env["PYTHONPATH"] = helpers_dir_.string();
  env.base_env["PYTHONUNBUFFERED"] = "1";  // so logs stream while the trainer runs
  for (const char* pass : {"HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"}) {
    if (const char* v = std::getenv(pass)) env.base_env[pass] = v;
  }
  return env;
}

void Environments::CheckInterpretersInBackground(std::function<void()> done) {
  std::vector<std::pair<std::string, std::string>> imports;
  for (const ImageMatch& r : rules_) {
    if (!r.framework.empty())
      imports.push_back({r.python == "auto" ? auto_python_ : r.python, r.framework});
  }
  checks_->CheckInBackground(std::move(imports), std::move(done));
}

bool Environments::LacksFramework(const std::string& python, const std::string& module) const {
  bool known = std::any_of(rules_.begin(), rules_.end(),
                           [&](const ImageMatch& r) { return r.framework == module; });
  return known && !CanImport(python, module);
}

bool Environments::CanImport(const std::string& python, const std::string& module) const {
  if (auto known = checks_->Cached(python, module, ModuleCheck::kImport)) return *known;
  // Nobody could check this pair yet (the daemon just started, or the
  // interpreter changed): asked here, inline, once.
  return checks_->Check(python, module, ModuleCheck::kImport);
}

Result<bool> Environments::InStore(const ImageReference& ref, bool* catalog_absent) const {
  *catalog_absent = false;
  if (catalog_) {
    switch (catalog_->Lookup(ref)) {
      case ImageCatalog::Presence::kPresent:
        return true;
      case ImageCatalog::Presence::kAbsent:
        *catalog_absent = true;
        return false;
      case ImageCatalog::Presence::kUnknown:
        break;  // not read yet: the engine answers
    }
  }
  const std::string image = ref.ToString();
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    auto it = present_until_.find(image);
    if (it != present_until_.end() && it->second > now) return true;
  }
  STOKER_ASSIGN_OR_RETURN(bool present, HasImage(engine_, ref));
  std::lock_guard<std::mutex> lock(imports_mu_);
  if (present) present_until_[image] = now + 30000;
  return present;
}

bool Environments::Insecure(const ImageReference& image) const {
  return std::find(insecure_registries_.begin(), insecure_registries_.end(), image.Registry()) !=
         insecure_registries_.end();
}

Environment Environments::ContainerEnvironment(const ImageReference& image) const {
  Environment env;
  env.python = "python3";
  env.container_image = image.ToString();
  env.engine = engine_.path;
  env.base_env["PYTHONPATH"] = helpers_dir_.string();
  env.base_env["PYTHONUNBUFFERED"] = "1";
  env.pull_if_missing = pulls_;
  env.insecure_registry = Insecure(image);
  return env;
}

RegistryProbe Environments::ProbeCached(const ImageReference& image) const {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const std::string registry = image.Registry();
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    auto it = registries_.find(registry);
    if (it != registries_.end() && it->second.first > now) return it->second.second;
  }
  // Asked outside the lock: a slow name lookup holds up nobody else's image.
  RegistryProbe probe = ProbeRegistry(image, Insecure(image), 1500);
  std::lock_guard<std::mutex> lock(imports_mu_);
  registries_[registry] = {now + 30000, probe};
  return probe;
}

Result<Environment> Environments::PullOrRefuse(const ImageReference& ref, const std::string& field,
                                               const std::string& fix) const {
  const std::string image = ref.ToString();
  const std::string registry = ref.Registry();
  std::string unreachable = "pulls are off (containers.pull: never)";
  if (pulls_) {
    RegistryProbe probe = ProbeCached(ref);
    if (probe.refused) {
      std::string where =
          config_file_.empty() ? "the daemon's config file (stokerd --config FILE)" : config_file_;
      return InvalidArgument(field + ": image '" + image + "': its registry " + registry +
                             " resolves to " + probe.why +
                             ", which stokerd does not pull from unless told to trust it; if it "
                             "is your own registry, list it in containers.insecure_registries in " +
                             where + ", e.g. containers: {insecure_registries: [\"" + registry +
                             "\"]}");
    }
    if (probe.why.empty()) {
      Environment env = ContainerEnvironment(ref);
      env.pull = true;
      env.note = "runs in a container: image " + image + " is not in " + engine_.name +
                 "'s store and is pulled from " + registry;
      return env;
    }
    unreachable = "its registry " + registry + " cannot be reached to pull it (" + probe.why + ")";
  }
  return InvalidArgument(field + ": image '" + image + "' is not in " + engine_.name +
                         "'s image store, " + unreachable +
                         ", and no interpreter rule matches it; build it with "
                         "`stoker images build -t " +
                         image +
                         " DIR`, import a root file "
                         "system with `stoker images import FILE.tar " +
                         image + "`, or " + fix);
}

Result<Environment> Environments::ForImage(const std::string& name, const std::string& field,
                                           bool check_framework) const {
  // From here on only the parsed form is used: it cannot be an option or
  // a transport to the engine.
  STOKER_ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(name, field));
  const std::string image = ref.ToString();
  std::string no_container = "no container engine (" + engine_.why + ")";
  auto in_store = [&] {
    Environment env = ContainerEnvironment(ref);
    env.note = "runs in a container: image " + image + " is in " + engine_.name + "'s store";
    return env;
  };
  bool catalog_absent = false;
  if (engine_.usable()) {
    STOKER_ASSIGN_OR_RETURN(bool present, InStore(ref, &catalog_absent));
    if (present) return in_store();
    no_container = "image not in " + engine_.name + "'s store";
  }
  std::string where =
      config_file_.empty() ? "the daemon's config file (stokerd --config FILE)" : config_file_;
  for (const ImageMatch& r : rules_) {
    if (::fnmatch(r.glob.c_str(), image.c_str(), 0) != 0) continue;
    std::string python = r.python == "auto" ? auto_python_ : r.python;
    if (check_framework && !r.framework.empty() && !CanImport(python, r.framework)) {
      return InvalidArgument(
          field + ": image '" + image + "' needs Python module '" + r.framework +
          "', but its interpreter " + python + " (images rule '" + r.glob +
          "') cannot import it; install it for that interpreter, point a rule under 'images:' "
          "in " +
          where + " at an interpreter that has it" +
          (engine_.usable() ? ", or build the image with `stoker images build -t " + image + " DIR`"
                            : "") +
          ", or use an image of a framework this machine has");
    }
    Environment env = Build(python);
    env.note = "runs with the interpreter " + python + " (images rule '" + r.glob + "'; " +
               no_container + ")";
    return env;
  }
  std::string fix = "add a rule under 'images:' in " + where +
                    ", e.g.\n  images:\n    - match: \"" + image +
                    "\"\n      python: auto   # or a path such as /opt/venv/bin/python";
  if (engine_.usable()) {
    if (catalog_absent) {
      // Before a refusal or a pull (never for a name a rule maps), the
      // engine itself is asked once: an image built a moment ago may not
      // have reached the catalog yet (its event is on the way).
      STOKER_ASSIGN_OR_RETURN(bool present, HasImage(engine_, ref));
      if (present) return in_store();
    }
    return PullOrRefuse(ref, field, fix);
  }
  return InvalidArgument(field + ": no environment is configured for image '" + image + "' (" +
                         no_container + "); " + fix);
}

}  // namespace stoker::exec
