// Environments: which local interpreter runs a given executor or container
// image (DESIGN.md §5). Rules are shell globs tried in order; the first
// match wins. "auto" means the first Python 3 that can import torch:
// Debian's /usr/bin/python3 (python3-torch) before whatever `python3` is
// first on PATH. The choice is made once, at construction, and logged.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::exec {

struct ImageMatch {
  std::string glob;
  std::string python;  // path or "auto"
};

struct Environment {
  std::string python;                           // absolute interpreter path
  std::map<std::string, std::string> base_env;  // PATH (python first), PYTHONPATH, HOME, ...
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
  Environments(std::vector<ImageMatch> rules, std::filesystem::path shim_root,
               std::filesystem::path helpers_dir, std::string config_file);

  // InvalidArgument naming `field` and the config key to add when no rule
  // matches `image`.
  Result<Environment> ForImage(const std::string& image, const std::string& field) const;

  // What "auto" resolved to, and why (for the startup log).
  const std::string& auto_python() const { return auto_python_; }
  const std::string& auto_reason() const { return auto_reason_; }

 private:
  Environment Build(const std::string& python) const;

  std::vector<ImageMatch> rules_;
  std::filesystem::path shim_root_;
  std::filesystem::path helpers_dir_;
  std::string config_file_;
  std::string auto_python_;
  std::string auto_reason_;
};

}  // namespace stoker::exec
