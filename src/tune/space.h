// Search spaces for hyperparameter tuning, and their encoding to the unit cube.
//
// These types are the tuner's own; the spec layer converts a Vertex AI
// StudySpec (parameters[], scaleType, conditionalParameterSpecs[]) into a
// Space and validates it with ValidateSpace before any sampler sees it.
//
// Encoding ("unit representation"). A Space is flattened depth-first into
// one slot per parameter, conditional children included (a child that
// appears under two parents, or twice under one parent with disjoint parent
// values, gets two slots). A point is a vector with one entry per slot:
//   DOUBLE / INTEGER / DISCRETE: a number in [0, 1] given by the scale type:
//     LINEAR       u = (x - min) / (max - min)
//     LOG          u = (log x - log min) / (log max - log min)
//     REVERSE_LOG  u = 1 - (log(max + min - x) - log min) / (log max - log min)
//                  (Vizier's definition: dense near max, the mirror of LOG).
//     INTEGER widens [min, max] to [min - 0.5, max + 0.5] before scaling so
//     that every integer owns an equal share of the cube; DISCRETE values are
//     placed at their scaled positions and decoding snaps to the nearest one.
//   CATEGORICAL: the category index 0..K-1 (the GP kernel compares these
//     entries for equality only: a Hamming distance, see gp.h).
//   Inactive slots (a child whose parent value does not match) hold
//   kInactive; the kernel treats "both inactive" as distance 0 and "one
//   inactive" as the largest distance, 1.
// Pure value types; no I/O. All functions are thread-safe on const inputs.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace stoker::tune {

enum class ParameterKind { kDouble, kInteger, kDiscrete, kCategorical };
enum class ScaleType { kLinear, kLog, kReverseLog };

struct Conditional;

struct Parameter {
  std::string name;
  ParameterKind kind = ParameterKind::kDouble;
  double min = 0.0;  // DOUBLE and INTEGER (integers held as doubles)
  double max = 1.0;
  std::vector<double> values;            // DISCRETE: strictly increasing
  std::vector<std::string> categories;   // CATEGORICAL
  ScaleType scale = ScaleType::kLinear;  // ignored for CATEGORICAL
  std::vector<Conditional> children;     // active only when this one matches
};

// A child parameter and the parent values that activate it: parent_values
// for INTEGER/DISCRETE parents, parent_categories for CATEGORICAL ones
// (Vertex allows no conditions on DOUBLE parents).
struct Conditional {
  Parameter child;
  std::vector<double> parent_values;
  std::vector<std::string> parent_categories;
};

struct Space {
  std::vector<Parameter> parameters;
};

// A parameter value: a number for DOUBLE/INTEGER/DISCRETE, a string for
// CATEGORICAL.
using Value = std::variant<double, std::string>;
// Values of the active parameters only, by name.
using Assignment = std::map<std::string, Value>;

// The value of an inactive slot in the unit representation.
inline constexpr double kInactive = -1.0;

// InvalidArgument naming the offending parameter ("parameters.lr: LOG scale
// needs min > 0, got 0"). Checks bounds, scales, duplicate names, discrete
// values increasing, categories non-empty and unique, conditions on
// non-DOUBLE parents whose values exist in the parent.
Status ValidateSpace(const Space& space);

// One slot of the flattened space.
struct Slot {
  const Parameter* param;                  // points into the Space given to Encoding
  int parent = -1;                         // slot index of the parent; -1 for top level
  const Conditional* condition = nullptr;  // how the parent activates it
};

// The flattened space and the conversions between Assignments and unit
// points. Holds pointers into `space`, which must outlive it.
class Encoding {
 public:
  // Precondition: ValidateSpace(space).ok().
  explicit Encoding(const Space& space);

  int size() const { return static_cast<int>(slots_.size()); }
  const Slot& slot(int i) const { return slots_[i]; }
  bool IsCategorical(int i) const { return slots_[i].param->kind == ParameterKind::kCategorical; }
  // Number of levels of an INTEGER/DISCRETE/CATEGORICAL slot; 0 for DOUBLE.
  int Levels(int i) const;

  // Unit point of an assignment. Parameters absent from `a` (or with a value
  // of the wrong type) encode as the middle of their range; extra names are
  // ignored. Inactive slots are kInactive.
  std::vector<double> Encode(const Assignment& a) const;
  // Assignment of a unit point; snaps INTEGER/DISCRETE/CATEGORICAL values to
  // valid members and clamps to the bounds. Only active slots appear.
  Assignment Decode(const std::vector<double>& u) const;
  // Makes `u` a canonical point: clamps, snaps every numeric slot to the
  // position of its decoded value, and sets slots inactive/active according
  // to their parents; a slot that becomes active and was kInactive takes
  // `fill(i)` (a unit value or category index), then is snapped.
  template <typename Fill>
  void Repair(std::vector<double>& u, Fill fill) const {
    for (int i = 0; i < size(); ++i) {
      if (!IsActive(u, i)) {
        u[i] = kInactive;
        continue;
      }
      if (u[i] == kInactive) u[i] = fill(i);
      u[i] = Snap(i, u[i]);
    }
  }
  // Whether slot i is active given the (already repaired) parent slots.
  bool IsActive(const std::vector<double>& u, int i) const;
  // The canonical unit value of slot i nearest to `v`.
  double Snap(int i, double v) const;
  // Unit value of level k (0-based) of an INTEGER/DISCRETE slot; the index
  // itself for CATEGORICAL.
  double LevelValue(int i, int k) const;
  // Level index of a (snapped) unit value.
  int LevelOf(int i, double v) const;

  // Parameter value <-> unit value for one numeric slot (no snapping).
  double ToUnit(int i, double x) const;
  double FromUnit(int i, double u) const;

 private:
  void Add(const Parameter& p, int parent, const Conditional* cond);
  std::vector<Slot> slots_;
};

// A canonical text form of an assignment, equal for equal assignments
// (numbers printed with 17 significant digits); used to detect duplicates.
std::string Key(const Assignment& a);

}  // namespace stoker::tune
