// Internal to spec/: what the study files share (study.cc parses the Vertex
// StudySpec, study_legacy.cc AI Platform's HyperparameterSpec, study_check.cc
// checks the model, study_json.cc prints it, study_fields.cc holds the tables
// and readers below). Not a public header; only spec/study*.cc include it.
//
// The readers follow json_fields.h: a wrong type is reported at the field's
// path and leaves `out` unchanged; a missing field is reported only by the
// Read* functions whose names say "Required".
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spec/enums.h"
#include "spec/json_fields.h"
#include "spec/study.h"

namespace stoker::spec::internal {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Advice for a missing bound of a DOUBLE or INTEGER range, in both formats.
constexpr std::string_view kMinHint = "give the smallest value to try";
constexpr std::string_view kMaxHint = "give the largest value to try";

// The Vertex value specs, indexed by ParameterKind.
extern const Names kValueSpecs;
// The conditional parameter's parent value lists, indexed by the parent's
// ParameterKind ("" for DOUBLE, which cannot be a parent).
extern const Names kParentValues;

// Enum names Stoker takes, in the order of its own enums (study.h), from the
// one table of each enum (enums.h); index them with static_cast<size_t>.
extern const Names kGoals;                  // Goal
extern const Names kAlgorithms;             // Algorithm
extern const Names kScaleTypes;             // ScaleType, Vertex names
extern const Names kLegacyScaleTypes;       // ScaleType, AI Platform names
extern const Names kMeasurementSelections;  // MeasurementSelection
extern const Names kKinds;                  // ParameterKind

inline size_t Index(ParameterKind kind) { return static_cast<size_t>(kind); }

// "'s'".
std::string Quote(std::string_view s);
// Shortest text that reads back as the same double ("0.001", "1e-05", "64").
std::string FormatDouble(double d);

// Reads an enum at obj[key], given as a name or as its number in `e` (null:
// names only); accepts `unspecified` (when not empty) as the default,
// reported as "". Returns the name, "" for the default, or nullopt when
// absent or wrong (then reported, naming `what` and the accepted `names`).
std::optional<std::string> ReadEnum(const nlohmann::json& obj, const char* key,
                                    const std::string& path, const EnumType* e, const Names& names,
                                    std::string_view unspecified, std::string_view what,
                                    Problems& p);
// The position of `s` in `names`; names.size() when absent.
size_t EnumIndex(const Names& names, const std::string& s);

// A double given as a JSON number or a decimal string (proto JSON accepts both).
std::optional<double> ReadDouble(const nlohmann::json& v, const std::string& path, Problems& p);
// obj[key] as a list, or nullptr: absent, or given but not a list (then
// reported as "must be a list of `of`").
const nlohmann::json* GetList(const nlohmann::json& obj, const char* key, const std::string& path,
                              std::string_view of, Problems& p);
// The list of numbers obj[key] into s->discrete_values and, as written, into
// s->discrete_texts. After a bad element the list's path is covered, so that
// later checks do not name indices that no longer match the input.
void ReadDiscrete(const nlohmann::json& obj, const char* key, const std::string& path, Problems& p,
                  ParameterSpec* s);
// Read obj[key] into *out when given; report a missing one as required with `hint`.
void ReadRequiredDouble(const nlohmann::json& obj, const char* key, const std::string& path,
                        std::string_view hint, Problems& p, double* out);
void ReadRequiredInt64(const nlohmann::json& obj, const char* key, const std::string& path,
                       std::string_view hint, Problems& p, int64_t* out);
// A trial count into *out when given. Any int32 is read: the range rules
// (at least 1, ...) belong to the checks, which name them.
void ReadCount(const nlohmann::json& obj, const char* key, const std::string& path, Problems& p,
               int32_t* out);

// Every rule on a Vertex job's own fields (displayName, labels, studySpec,
// trial counts), with Vertex paths; not the trialJobSpec's, which
// ParseCustomJobSpec applies.
void CheckJob(const HyperparameterTuningJob& job, Problems& p);
// Every rule on a study read from AI Platform's HyperparameterSpec at
// `path`, with the legacy field names (params[0].minValue, maxTrials, ...).
void CheckLegacyStudy(const StudyFromLegacy& study, const std::string& path, Problems& p);

}  // namespace stoker::spec::internal
