#include "runner/replica_python_env.h"

#include <unistd.h>

#include "runner/python_env.h"

namespace stoker::runner {

namespace fs = std::filesystem;

namespace {

// The requirements the packages under `package_roots` declare (each file's
// note goes into output.log), appended to *requirements. InvalidArgument,
// naming the file, for one that cannot be read.
Status AddDeclaredRequirements(const ReplicaServices& services,
                               const std::vector<fs::path>& package_roots,
                               std::vector<std::string>* requirements) {
  for (const fs::path& root : package_roots) {
    DeclaredRequirements d = ReadDeclaredRequirements(root);
    std::string rel = root.lexically_relative(services.dir / "packages").string();
    if (!d.note.empty()) services.WriteOutput("stoker-run: package " + rel + ": " + d.note + "\n");
    if (d.requirements.empty()) continue;
    // Checked here so that the message names the file.
    if (auto checked = NormaliseRequirements(d.requirements, rel + "/" + d.source + ": ");
        !checked.ok()) {
      return checked.status();
    }
    requirements->insert(requirements->end(), d.requirements.begin(), d.requirements.end());
  }
  return OkStatus();
}

}  // namespace

Status PrepareReplicaPythonEnv(const ReplicaServices& services, LaunchSpec& spec,
                               const std::vector<fs::path>& package_roots,
                               std::vector<fs::path>* python_path, std::string* note) {
  const replica::PythonEnvSpec& p = *spec.python_env;
  std::vector<std::string> requirements = p.requirements;
  STOKER_RETURN_IF_ERROR(AddDeclaredRequirements(services, package_roots, &requirements));
  if (requirements.empty()) return OkStatus();
  PythonEnvRequest req;
  req.cache_dir = p.cache_dir;
  req.python = p.python;
  if (spec.container) {
    // The image's own Python runs the trainer: pip runs in the image too.
    req.python = "python3";
    req.container = PythonEnvRequest::Image{spec.container->engine, spec.container->image,
                                            ContainerUlimitFlags()};
    if (services.cgroup && fs::path(spec.container->engine).filename() == "podman") {
      req.container->cgroup_parent = services.cgroup->ContainerParent();
    }
  }
  req.find_links = p.find_links;
  req.index_url = p.index_url;
  req.requirements = std::move(requirements);
  req.on_slow = services.set_preparing;
  ScopedFds join{services.CgroupJoinFds()};
  req.cgroup_fds = join.fds;
  Result<PythonEnv> built = EnsurePythonEnv(req, services.cancel_requested);
  ::unlink((services.dir / replica::kPreparingFile).c_str());
  if (!built.ok()) return built.status();
  const PythonEnv& env = *built;
  *note = DescribePythonEnv(env);
  services.WriteOutput("stoker-run: " + *note + "\n");
  python_path->insert(python_path->begin(), env.site_dirs.begin(), env.site_dirs.end());
  if (!env.bin_dir.empty()) {
    std::string& path = spec.env["PATH"];
    path = (path.empty() ? "/usr/local/bin:/usr/bin:/bin" : path) + ":" + env.bin_dir.string();
  }
  return OkStatus();
}

}  // namespace stoker::runner
