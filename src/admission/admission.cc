#include "admission/admission.h"

#include <algorithm>
#include <string_view>

#include "admission/trainer_imports.h"
#include "scheduler/placement.h"
#include "storage/archive.h"
#include "study/study_logic.h"
#include "tune/sampler.h"

namespace stoker::admission {
namespace {

// Every gs:// token in `text` must name an existing bucket.
Status CheckUrisIn(const std::string& text, const std::string& field,
                   const storage::Buckets& buckets) {
  // A plain scan for gs://([^/\s,'"]*): std::regex recursed per character
  // and a multi-megabyte token in an argument overflowed the stack.
  static constexpr std::string_view kScheme = "gs://";
  for (size_t pos = text.find(kScheme); pos != std::string::npos; pos = text.find(kScheme, pos)) {
    size_t start = pos + kScheme.size();
    size_t end = std::min(text.find_first_of("/ \t\n\v\f\r,'\"", start), text.size());
    std::string bucket = text.substr(start, end - start);
    pos = end;
    auto parsed = storage::ParseGsUri("gs://" + bucket, field);
    if (!parsed.ok()) return parsed.status();
    if (!buckets.Exists(bucket)) {
      return InvalidArgument(field + ": bucket '" + bucket +
                             "' does not exist; create it with 'stoker storage mb gs://" + bucket +
                             "' or copy data into it with 'stoker storage cp'");
    }
  }
  return OkStatus();
}

// A package archive named by `uri` (field `f`): present in its bucket, with
// the content its staging name promises, and a tar.gz safe to unpack.
// Returns its bytes when `read_content` (else "").
Result<std::string> CheckPackage(const storage::Buckets& buckets, const std::string& uri,
                                 const std::string& f, bool read_content) {
  auto path = buckets.Resolve(uri, f);
  if (!path.ok()) return InvalidArgument(path.status().message());
  auto parsed = storage::ParseGsUri(uri, f);
  if (!parsed.ok()) return parsed.status();
  if (!read_content) {
    if (!buckets.Exists(parsed->bucket)) {
      return InvalidArgument(f + ": package " + uri + " does not exist (its bucket is gone)");
    }
    return std::string();
  }
  auto data = buckets.Get(parsed->bucket, parsed->object);
  if (!data.ok()) {
    return InvalidArgument(f + ": package " + uri +
                           " does not exist; upload it with 'stoker storage cp' or use "
                           "--package-path");
  }
  STOKER_RETURN_IF_ERROR(storage::CheckStagedContent(*parsed, *data, f));
  STOKER_RETURN_IF_ERROR(storage::CheckTarGz(*data, f + " (" + uri + ")"));
  return std::move(*data);
}

// The trainer's module, when the package archive `data` has it (*found),
// must not import a framework its interpreter lacks: the job would fail at
// run time with "No module named ...". Checked for every form of job,
// whatever its image's own framework (an AI Platform runtime's image is
// TensorFlow's, but its trainers may use scikit-learn or PyTorch instead).
Status CheckTrainerImports(const exec::Environments& environments, const exec::Environment& env,
                           const spec::PythonPackageSpec& pkg, std::string_view data,
                           const std::string& field, bool* found) {
  constexpr size_t kMaxSource = 4 << 20;
  std::string member;
  auto source = storage::ReadTarGzFile(
      data,
      [&](std::string_view path) {
        if (!IsModuleFile(path, pkg.python_module)) return false;
        member = path;
        return true;
      },
      kMaxSource);
  if (!source.ok() || !*source) return OkStatus();
  *found = true;
  for (const ModuleImport& m : ModuleLevelImports(**source)) {
    if (!environments.LacksFramework(env.python, m.module)) continue;
    return InvalidArgument(
        field + ".pythonModule: " + pkg.python_module + " imports " + m.module + " (" + member +
        ", line " + std::to_string(m.line) + "), but " + env.python +
        ", the interpreter that runs image '" + pkg.executor_image_uri + "' here (" + env.note +
        "), cannot import it; install " + m.module +
        " for that interpreter, point a rule under 'images:' in the daemon's config at an "
        "interpreter that has it, or choose an image of a framework this machine has (for "
        "an AI Platform job: --runtime-version or masterConfig.imageUri)");
  }
  return OkStatus();
}

}  // namespace

Status Admission::CheckJobSpec(const spec::CustomJobSpec& spec, const std::string& prefix,
                               bool read_packages, bool frameworks) const {
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[p];
    if (pool.empty) continue;
    std::string field = prefix + "workerPoolSpecs[" + std::to_string(p) + "]";
    const std::vector<spec::EnvVar>* env = nullptr;
    const std::vector<std::string>* args = nullptr;
    if (pool.python_package_spec) {
      const spec::PythonPackageSpec& pkg = *pool.python_package_spec;
      auto e = d_.environments->ForImage(pkg.executor_image_uri,
                                         field + ".pythonPackageSpec.executorImageUri", frameworks);
      if (!e.ok()) return e.status();
      // The first package with the trainer's module is the one Python finds.
      bool module_seen = !e->container_image.empty();  // an image's Python is its own
      for (size_t i = 0; i < pkg.package_uris.size(); ++i) {
        std::string f = field + ".pythonPackageSpec.packageUris[" + std::to_string(i) + "]";
        STOKER_ASSIGN_OR_RETURN(std::string data,
                                CheckPackage(*d_.buckets, pkg.package_uris[i], f, read_packages));
        if (module_seen || data.empty()) continue;
        STOKER_RETURN_IF_ERROR(CheckTrainerImports(*d_.environments, *e, pkg, data,
                                                   field + ".pythonPackageSpec", &module_seen));
      }
      env = &pkg.env;
      args = &pkg.args;
    } else {
      const spec::ContainerSpec& c = *pool.container_spec;
      auto e =
          d_.environments->ForImage(c.image_uri, field + ".containerSpec.imageUri", frameworks);
      if (!e.ok()) return e.status();
      if (c.command.empty() && e->container_image.empty()) {
        return InvalidArgument(
            field + ".containerSpec.command: required here, because image '" + c.image_uri +
            "' runs with a local interpreter (" + e->note +
            "), which cannot read the image's ENTRYPOINT; give it, e.g. [python3, -m, "
            "trainer.task], or build the image (`stoker images build -t " +
            c.image_uri + " DIR`) so that its ENTRYPOINT runs in a container");
      }
      for (size_t i = 0; i < c.command.size(); ++i) {
        STOKER_RETURN_IF_ERROR(
            CheckUrisIn(c.command[i], field + ".containerSpec.command[" + std::to_string(i) + "]",
                        *d_.buckets));
      }
      env = &c.env;
      args = &c.args;
    }
    std::string kind = pool.python_package_spec ? ".pythonPackageSpec" : ".containerSpec";
    for (size_t i = 0; i < args->size(); ++i) {
      STOKER_RETURN_IF_ERROR(
          CheckUrisIn((*args)[i], field + kind + ".args[" + std::to_string(i) + "]", *d_.buckets));
    }
    for (size_t i = 0; i < env->size(); ++i) {
      STOKER_RETURN_IF_ERROR(CheckUrisIn(
          (*env)[i].value, field + kind + ".env[" + std::to_string(i) + "].value", *d_.buckets));
    }
  }
  if (!spec.base_output_directory.empty()) {
    std::string field = prefix + "baseOutputDirectory.outputUriPrefix";
    STOKER_ASSIGN_OR_RETURN(storage::GsUri out,
                            storage::ParseGsUri(spec.base_output_directory, field));
    // The outputs bucket is made by the daemon when a job first needs it.
    if (out.bucket != storage::kOutputsBucket) {
      auto path = d_.buckets->Resolve(spec.base_output_directory, field);
      if (!path.ok()) return InvalidArgument(path.status().message());
    }
  }
  STOKER_ASSIGN_OR_RETURN(auto requests,
                          scheduler::RequestsFor(spec, {*d_.node}, prefix, d_.machine_types));
  if (d_.executor_places_replicas) return OkStatus();
  return scheduler::CheckCanEverFit(requests, {*d_.node}, d_.policy, prefix);
}

Result<AdmittedJob> Admission::Admit(const spec::CustomJob& job, bool read_packages,
                                     bool frameworks) const {
  STOKER_RETURN_IF_ERROR(spec::Validate(job));
  STOKER_RETURN_IF_ERROR(CheckJobSpec(job.job_spec, "jobSpec.", read_packages, frameworks));
  AdmittedJob out;
  out.spec = spec::ToJson(job);
  for (const std::string& f : spec::UnhonouredFields(job)) {
    out.warnings.push_back("warning: " + f + " is accepted but has no effect on Stoker");
  }
  return out;
}

Result<AdmittedJob> Admission::AdmitJob(const spec::CustomJob& job, bool frameworks) const {
  return Admit(job, /*read_packages=*/true, frameworks);
}

Result<AdmittedJob> Admission::AdmitTrial(const spec::CustomJob& trial) const {
  return Admit(trial, /*read_packages=*/false, /*frameworks=*/false);
}

Status Admission::AdmitStudy(const spec::HyperparameterTuningJob& job, bool frameworks) const {
  // Every trial runs trialJobSpec: admit it now, as a custom job would be.
  STOKER_RETURN_IF_ERROR(CheckJobSpec(job.trial_job_spec, "trialJobSpec.", true, frameworks));
  if (job.study_spec.algorithm == spec::Algorithm::kGridSearch) {
    Status grid = tune::ValidateGridSpace(study::ToTuneSpace(job.study_spec));
    if (!grid.ok()) return InvalidArgument("studySpec.algorithm: " + grid.message());
  }
  return OkStatus();
}

}  // namespace stoker::admission
