// Requirement environments (docs/python-packages.md,
// docs/decisions/0031-requirements-environments.md): the requirements of a
// pythonPackageSpec's packages (their install_requires) and gcloud's
// `requirements=` are installed by pip into a cached directory per
// (interpreter, requirement set, wheelhouse/index), which goes first on the
// trainer's PYTHONPATH. Never into the interpreter's own site-packages.
//
// The pure part reads requirements from package metadata without running
// anything of the package (no setup.py is executed), checks them, and
// names the environment. EnsurePythonEnv does the I/O: it finds the
// environment in the cache or builds it with
// `PYTHON -s -m pip install --prefix DIR --only-binary=:all: ...`, once even
// when many replicas ask at the same time (a flock per key; a finished
// environment has its marker file, written last; a half-built one from a
// crash is removed and built again).
//
// Used by stoker-run (before the trainer starts, so the daemon never waits
// on pip) and by `stoker ai custom-jobs local-run --requirements`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stoker::runner {

// ---- pure ----

// `text` (trimmed) when it is a requirement pip may be given on its command
// line: a distribution name (letters, digits, . _ -), optional [extras],
// version specifiers and an optional `; marker`. Refused (InvalidArgument
// saying why): anything that could be read as a pip option (a leading -),
// direct references and URLs (`name @ URL`, paths), which would fetch from
// elsewhere than the wheelhouse or index, and characters no requirement has.
Result<std::string> CheckRequirement(std::string_view text);

// `requirements` checked, sorted and without duplicates; the first refused
// one is InvalidArgument prefixed with `where`.
Result<std::vector<std::string>> NormaliseRequirements(const std::vector<std::string>& requirements,
                                                       const std::string& where);

// The unconditional requirements of an `*.egg-info/requires.txt`, with
// `[:MARKER]` sections as `REQ; MARKER`; extras' sections are left out.
std::vector<std::string> ParseRequiresTxt(std::string_view text);

// The `Requires-Dist:` headers of a PKG-INFO or METADATA file, without
// those that only an extra asks for.
std::vector<std::string> ParseRequiresDist(std::string_view text);

// install_requires from a setup.py's text, read, never run: the literal
// list after `install_requires=` (or `"install_requires": `). Empty when
// setup.py names none; nullopt when it is not a literal list of strings
// (a variable, a function call), which only running setup.py could tell.
std::optional<std::vector<std::string>> ParseSetupPyRequires(std::string_view text);

// install_requires of setup.cfg's [options] section (one per line).
std::vector<std::string> ParseSetupCfgRequires(std::string_view text);

// [project] dependencies of a pyproject.toml; nullopt when the list is not
// literal TOML strings.
std::optional<std::vector<std::string>> ParsePyprojectDependencies(std::string_view text);

// What a package declares it requires.
struct DeclaredRequirements {
  std::vector<std::string> requirements;
  std::string source;  // the file they came from, relative to the package root ("" = none)
  std::string note;    // "" or why some may have been missed (setup.py not literal)
};

// The requirements of a package root (the top directory of an unpacked
// sdist, or a directory a local package was packed from), in this order of
// trust: `*.egg-info/requires.txt` (in the root or root/src: what
// setuptools wrote when the sdist was built), else PKG-INFO's
// Requires-Dist, else a static reading of setup.cfg, pyproject.toml and
// setup.py. Reads files only.
DeclaredRequirements ReadDeclaredRequirements(const std::filesystem::path& root);

// What names an environment: everything that changes what pip would put in
// it.
struct EnvKeyInputs {
  std::string python;                     // as given
  std::string python_id;                  // its real path, inode, size and mtime (InterpreterId)
  std::vector<std::string> requirements;  // normalised
  std::string sources;                    // the index URL and the wheelhouses' listings (SourcesId)
};
// Lower-case hex SHA-256 of the inputs.
std::string EnvKey(const EnvKeyInputs& in);

// The pip command line that installs `requirements` into `prefix` with
// `python`: wheels only (no package's build code runs), from `find_links`
// only unless `index_url` is set (then also from the index), the
// interpreter's user site ignored.
std::vector<std::string> PipInstallArgv(const std::string& python,
                                        const std::filesystem::path& prefix,
                                        const std::vector<std::filesystem::path>& find_links,
                                        const std::string& index_url,
                                        const std::vector<std::string>& requirements);

// ---- I/O ----

// A command (argv[0] an absolute path) run to its end in a session of its
// own, stdin /dev/null, umask 022, in `cwd` with exactly `env`.
struct CapturedRun {
  int exit_status = -1;  // wait status
  std::string output;    // stdout and stderr together, their last 64 KiB or so
  bool cancelled = false;
};
// Kills the command's session when `cancelled` (polled every 100 ms) says
// so. `cgroup_fds` (ReplicaCgroup::OpenJoinFds): the command joins the
// replica's cgroup before it execs, so that it dies with the replica.
// Errors only when it cannot be started.
Result<CapturedRun> RunCapturing(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env,
                                 const std::filesystem::path& cwd,
                                 const std::function<bool()>& cancelled,
                                 const std::vector<int>& cgroup_fds = {});

// The last `lines` non-empty lines of `output` (those starting "ERROR"
// when there are any: pip's), each cut at 300 characters.
std::string OutputTail(const std::string& output, size_t lines);

struct PythonEnvRequest {
  std::filesystem::path cache_dir;  // made if missing; environments are <cache_dir>/<key>/
  std::string python;               // absolute
  std::vector<std::filesystem::path> find_links;
  std::string index_url;
  std::vector<std::string> requirements;  // not yet normalised
  // Set: the environment is for this container image's own Python
  // (`python` is then "python3", as the image names it): pip runs in the
  // image, as root without capabilities, with the environment's directory
  // and the wheelhouses mounted at their own paths; the key names the
  // image's ID, so a rebuilt image gets a new environment.
  struct Image {
    std::string engine;  // absolute path of podman or docker
    std::string image;
    std::vector<std::string> ulimits;  // ContainerUlimitFlags()
    // podman's --cgroup-parent (ReplicaCgroup::ContainerParent): pip's
    // container runs in the replica's cgroup and dies with it; "" = none.
    std::string cgroup_parent;
  };
  std::optional<Image> container;
  // Where the fix goes, for messages ("python_packages in /etc/stoker/config.yaml").
  std::string config_hint = "python_packages in the daemon's config";
  // Called (when set) once the environment is found not ready, before
  // waiting for another builder or running pip, with what it waits for:
  // "installing requirements [a, b] (environment 3f2a9c1b4d5e)".
  std::function<void(const std::string&)> on_slow;
  // pip (or the engine's client) joins the replica's cgroup through these
  // (RunCapturing); empty: it stays where the caller is.
  std::vector<int> cgroup_fds;
};

// `engine run ... IMAGE python3 -s -m pip install ...` for `pip_argv`: pip
// in the image, as kPipUid without capabilities, `dir` writable and
// `find_links` read-only, each at its own path, no network unless
// `index_url` is set, pip's settings (`pip_env`, but PATH) as inline
// variables (none is secret), under image.cgroup_parent. Pure.
std::vector<std::string> PipInContainerArgv(const PythonEnvRequest::Image& image,
                                            const std::string& name,
                                            const std::filesystem::path& dir,
                                            const std::vector<std::filesystem::path>& find_links,
                                            const std::string& index_url,
                                            const std::vector<std::string>& pip_argv,
                                            const std::vector<std::string>& pip_env);

struct PythonEnv {
  std::string key;
  std::filesystem::path dir;
  std::vector<std::string> requirements;         // normalised
  std::vector<std::filesystem::path> site_dirs;  // for PYTHONPATH, first (may be empty)
  std::filesystem::path bin_dir;                 // console scripts ("" = none)
  bool built = false;                            // false: reused
  int64_t elapsed_ms = 0;                        // including any wait for another builder
  bool waited = false;                           // another process was building it
};

// "requirements [a, b]: environment 3f2a9c1b4d5e built in 3.2 s" or
// "... reused in 4 ms".
std::string DescribePythonEnv(const PythonEnv& env);

// The environment for `req`, from the cache or built now. `cancelled` is
// polled while waiting for another builder and while pip runs (pip is
// killed when it says true): then Cancelled. FailedPrecondition with pip's
// last lines and the fix when pip fails (a requirement the wheelhouse
// lacks, an interpreter without pip); InvalidArgument for a refused
// requirement. Thread-compatible; safe across processes.
Result<PythonEnv> EnsurePythonEnv(const PythonEnvRequest& req,
                                  const std::function<bool()>& cancelled);

}  // namespace stoker::runner
