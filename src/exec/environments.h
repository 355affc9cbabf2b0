// Environments: which local interpreter runs a given executor or container
// image (DESIGN.md §5). Rules are shell globs tried in order; the first
// match wins. "auto" means the first Python 3 that can import torch:
// Debian's /usr/bin/python3 (python3-torch) before whatever `python3` is
// first on PATH. The choice is made once, at construction, and logged.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/containers.h"
#include "exec/image_catalog.h"
#include "exec/interpreter_checks.h"

namespace stoker::exec {

struct ImageMatch {
  std::string glob;
  std::string python;  // path or "auto"
  // A module the interpreter must import for this image to make sense
  // ("tensorflow" for a TensorFlow image); "" = none checked.
  std::string framework;
};

struct Environment {
  std::string python;  // absolute interpreter path; "python3" in a container
  std::map<std::string, std::string> base_env;  // PATH (python first), PYTHONPATH, HOME, ...
  // Set: the replica runs in this image through `engine` (a client's
  // absolute path) instead of on the host.
  std::string container_image;
  std::string engine;
  // The image is not in the engine's store: the replica's supervisor pulls
  // it first (its registry answered when this was decided).
  bool pull = false;
  // Pulls are on (containers.pull: missing): should the image be gone from
  // the store by the time the replica starts (removed since it was seen
  // there), the engine pulls it rather than failing.
  bool pull_if_missing = false;
  bool insecure_registry =
      false;         // pulled without TLS verification (containers.insecure_registries)
  std::string note;  // which path runs the image and why, for the job's events
};

class Environments {
 public:
  // `shim_root`: a directory for per-interpreter bin/ dirs with python and
  // python3 links, put first on PATH so `python3` in a command means the
  // environment's interpreter. An interpreter in a virtual environment
  // (<venv>/bin/python3 with <venv>/pyvenv.cfg) gets the venv's own bin/
  // first on PATH and VIRTUAL_ENV instead: a link elsewhere would lose the
  // venv. `helpers_dir`: Stoker's own Python modules
  // (hypertune), appended to PYTHONPATH. `config_file`: named in errors.
  // `interpreter_cache`: where interpreter checks are remembered across
  // restarts (interpreter_checks.h); "" = in memory only.
  Environments(std::vector<ImageMatch> rules, std::filesystem::path shim_root,
               std::filesystem::path helpers_dir, std::string config_file,
               std::filesystem::path interpreter_cache = {});

  // Checks, on a thread of its own, that each rule's interpreter imports
  // the rule's framework, so that no submission waits for it (`done`,
  // optional, is called on that thread when all are checked).
  void CheckInterpretersInBackground(std::function<void()> done = {});

  // What the engine's store holds is read from `catalog` (image_catalog.h)
  // instead of asking the engine; it is asked only while the catalog says
  // "unknown".
  void UseCatalog(std::shared_ptr<const ImageCatalog> catalog) { catalog_ = std::move(catalog); }

  // Images present in `engine`'s store run in containers (docs/containers.md).
  void UseEngine(ContainerEngine engine) { engine_ = std::move(engine); }
  const ContainerEngine& engine() const { return engine_; }

  // Images missing from the engine's store that no rule maps are pulled
  // from their registry when it answers (containers.pull: missing, the
  // default); `insecure` names registries ("localhost:5000") pulled from
  // without TLS verification.
  void UsePulls(bool enabled, std::vector<std::string> insecure) {
    pulls_ = enabled;
    insecure_registries_ = std::move(insecure);
  }

  // `image` is parsed first (common/image_reference.h): a name that is not
  // an image reference is InvalidArgument naming `field`, and only the
  // parsed form reaches the engine or the result.
  // A container when the engine holds `image` (the catalog's answer; without
  // one, the engine's, and a yes is trusted for 30 s; a name the catalog
  // lacks that no rule maps is asked of the engine before a pull or a
  // refusal);
  // else the first rule that matches, whose interpreter must import the
  // rule's framework; else, with pulls on, a container whose image is
  // pulled when the image's registry answers (asked at most every 30 s) at
  // a public address, or at any address when it is an insecure registry.
  // Otherwise InvalidArgument naming `field` and the fixes: the config rule
  // to add, and with an engine, how to build, import or reach the image.
  // `check_framework` false: the rule's framework is not asked for (a
  // launch, after its submission was checked; AI Platform runtimes).
  Result<Environment> ForImage(const std::string& image, const std::string& field,
                               bool check_framework = true) const;

  // True when `module` is a framework some rule names ("tensorflow",
  // "torch", ...) and `python` (an interpreter ForImage gave) cannot import
  // it: known ahead of time for every rule's interpreter. Other modules are
  // not judged (false).
  bool LacksFramework(const std::string& python, const std::string& module) const;

  // What "auto" resolved to, and why (for the startup log).
  const std::string& auto_python() const { return auto_python_; }
  const std::string& auto_reason() const { return auto_reason_; }

 private:
  Environment Build(const std::string& python) const;
  Environment ContainerEnvironment(const ImageReference& image) const;
  bool Insecure(const ImageReference& image) const;
  // ProbeRegistry for `image`'s registry, asked at most every 30 s.
  RegistryProbe ProbeCached(const ImageReference& image) const;
  // The end of ForImage for an image neither the store nor a rule has:
  // a pull when its registry may be and can be reached; else the error.
  Result<Environment> PullOrRefuse(const ImageReference& image, const std::string& field,
                                   const std::string& fix) const;
  // Whether `python` can `import module`: the ahead-of-time answer, else
  // asked now (CheckInterpretersInBackground has not reached the pair yet,
  // or the interpreter changed since).
  bool CanImport(const std::string& python, const std::string& module) const;
  // Whether the engine's store holds `ref`: the catalog, else the engine.
  // `catalog_absent`: set when the catalog answered "absent".
  Result<bool> InStore(const ImageReference& ref, bool* catalog_absent) const;

  std::vector<ImageMatch> rules_;
  std::filesystem::path shim_root_;
  std::filesystem::path helpers_dir_;
  std::string config_file_;
  std::string auto_python_;
  std::string auto_reason_;
  ContainerEngine engine_;
  std::shared_ptr<const ImageCatalog> catalog_;
  std::unique_ptr<InterpreterChecks> checks_;
  mutable std::mutex imports_mu_;
  // Without a catalog's answer: images the engine had, and until when
  // (steady clock, ms) that answer is trusted: a job's launch right after
  // its submission does not ask the engine again. Absence is never
  // remembered: a new build shows at once.
  mutable std::map<std::string, int64_t> present_until_;
  bool pulls_ = true;
  std::vector<std::string> insecure_registries_;
  // Registry name -> (asked again after, what the probe found).
  mutable std::map<std::string, std::pair<int64_t, RegistryProbe>> registries_;
};

}  // namespace stoker::exec
