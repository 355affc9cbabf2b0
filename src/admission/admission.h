// Admission: everything about a submitted job or tuning job that can be
// checked before anything is stored, in one unit below the API (as
// Kubernetes keeps admission apart from its HTTP handlers). Every route and
// form goes through it: Vertex CustomJob JSON, gcloud flags and AI Platform
// trainingInput (the CLI and the legacy routes translate to a CustomJob
// first), tuning jobs, and each trial the study driver starts. A route is
// then a thin translation: parse, admit, store, notify.
//
// Admit* never write anything and never block on a trainer; they read the
// buckets (package archives, bucket existence) and the inventory. Thread-safe
// (every dependency it reads is).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/environments.h"
#include "resources/resources.h"
#include "scheduler/policy.h"
#include "spec/custom_job.h"
#include "spec/study.h"
#include "storage/buckets.h"

namespace stoker::admission {

// What admission reads. The pointers must outlive the Admission.
struct AdmissionDeps {
  const storage::Buckets* buckets = nullptr;
  const exec::Environments* environments = nullptr;  // images -> local interpreters
  const resources::Node* node = nullptr;             // for the can-it-ever-fit check
  scheduler::PolicyOptions policy;                   // likewise
  resources::MachineCatalog machine_types;           // the config's, before the built-in catalog
  // The executor decides where replicas run (Slurm): this node's inventory
  // says nothing about the cluster, so the can-it-ever-fit check is left to
  // the executor, which fails the job with its own words.
  bool executor_places_replicas = false;
};

// A custom job ready to be stored: its canonical Vertex JSON and the
// warnings to record as its first events.
struct AdmittedJob {
  nlohmann::json spec;
  std::vector<std::string> warnings;  // "warning: jobSpec.network is accepted but ..."
};

class Admission {
 public:
  explicit Admission(AdmissionDeps deps) : d_(std::move(deps)) {}

  // A custom job from any form. Validates the whole job (spec::Validate),
  // resolves every image to an environment, every package to an intact,
  // safe archive in its bucket, every gs:// path in commands, arguments and
  // env to an existing bucket, the output directory, the machine types; and
  // checks that the job could run at all on the idle cluster.
  // InvalidArgument (or the check's own code) naming the field and the fix.
  // `frameworks`: a prebuilt image's interpreter must import its framework
  // (exec::ImageMatch); off for AI Platform jobs, whose runtimeVersion maps
  // to a TensorFlow image but whose runtimes carried scikit-learn and
  // XGBoost too (a trainer may need none of TensorFlow).
  Result<AdmittedJob> AdmitJob(const spec::CustomJob& job, bool frameworks = true) const;

  // A tuning job: its trialJobSpec is admitted as a custom job would be
  // (errors name trialJobSpec.*), and a grid search must have a finite grid.
  Status AdmitStudy(const spec::HyperparameterTuningJob& job, bool frameworks = true) const;

  // One trial of an admitted study, built by the study driver (trialJobSpec
  // with the trial's arguments and output directory). The same checks as
  // AdmitJob but the package archives' content, which was checked when the
  // study was admitted and is checked again at launch (so the control loop
  // does not read archives whole at every trial).
  Result<AdmittedJob> AdmitTrial(const spec::CustomJob& trial) const;

 private:
  // The checks of one CustomJobSpec whose fields are named under `prefix`
  // ("jobSpec." or "trialJobSpec.").
  // `read_packages` false: a trial, whose study was checked; its frameworks
  // too.
  Status CheckJobSpec(const spec::CustomJobSpec& spec, const std::string& prefix,
                      bool read_packages, bool frameworks) const;
  Result<AdmittedJob> Admit(const spec::CustomJob& job, bool read_packages, bool frameworks) const;

  AdmissionDeps d_;
};

}  // namespace stoker::admission
