// Internal to spec/: the AI Platform Training tables and rules that both
// readers of a legacy job share: FromTrainingInput (ai_platform.cc) and
// TrainingInputFromFlags (ai_platform_flags.cc). The tables live in
// ai_platform_tables.cc. Not a public header; only spec/ai_platform*.cc
// include it.
//
// All functions are pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "spec/json_fields.h"

namespace stoker::spec::internal {

// Reference §6 scaleTier names, and their gcloud flag spellings in the same order.
extern const Names kScaleTiers;
extern const Names kScaleTierFlags;
// A scale tier as gcloud or a person may write it, in the enum's spelling:
// "standard-1" and "Standard_1" give "STANDARD_1". Any text comes back
// upper-cased; the caller checks it against kScaleTiers.
std::string ScaleTierName(std::string_view given);
// GPU types a legacy acceleratorConfig may name: the legacy enum's NVIDIA types (§6) and,
// as a Stoker extension, the newer Vertex ones (§1.8). TPUs are refused.
extern const Names kGpuTypes;

// Whether an accelerator type or machine type names a TPU.
bool IsTpu(std::string_view s);
// The advice for any TPU given: Stoker runs none.
extern const char* const kNoTpu;

// One pool of a predefined scale tier; count 0 = no such pool.
struct TierPool {
  std::string_view machine_type;
  int64_t count = 0;
  std::string_view accelerator;  // "" = none
};
struct Tier {
  std::string_view name;
  std::array<TierPool, 3> pools;  // master, workers, parameter servers
};
// The predefined tier named `name` (BASIC, BASIC_GPU, STANDARD_1,
// PREMIUM_1); nullptr for CUSTOM, BASIC_TPU or anything else.
const Tier* FindTier(std::string_view name);

// A legacy machine name with GPUs that the resources catalog does not know:
// the Compute Engine machine it was built on, and its GPUs.
struct LegacyGpuMachine {
  std::string_view name;
  std::string_view machine_type;
  std::string_view accelerator;
  int count;
};
// The row of `name` (standard_p100, complex_model_l_v100, ...); nullptr for
// any other machine type, which passes through as given.
const LegacyGpuMachine* FindLegacyGpuMachine(std::string_view name);

// Machine types that carry GPUs without an acceleratorConfig (for the image choice).
bool HasBuiltInGpu(const std::string& machine_type);

// The four replica roles of a trainingInput, in their Vertex pool positions (§1.5).
struct Role {
  const char* name;        // for messages
  const char* type_key;    // masterType
  const char* config_key;  // masterConfig
  const char* count_key;   // nullptr: the master is always one replica
  const char* type_flag;   // the gcloud flag that sets type_key ("" = none)
};
extern const std::array<Role, 4> kRoles;

// "2.11" -> {2, 11}; nullopt when not MAJOR.MINOR.
std::optional<std::pair<int, int>> ParseRuntimeVersion(const std::string& v);

// The prebuilt Vertex TensorFlow image that stands in for an AI Platform
// runtime version: tf-cpu or tf-gpu by whether the pool has GPUs; runtime 1.x
// -> 1-15 (the last 1.x image), 2.N -> 2-N, none -> 2-11. Images from 2.11 on
// carry a Python suffix. Stoker's default image rules match
// `*-docker.pkg.dev/vertex-ai/training/tf-*`.
std::string ExecutorImage(const std::optional<std::pair<int, int>>& runtime, bool gpu);

}  // namespace stoker::spec::internal
