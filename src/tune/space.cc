#include "tune/space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace stoker::tune {
namespace {

bool IsNumeric(const Parameter& p) { return p.kind != ParameterKind::kCategorical; }

bool SameNumber(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

// Bounds of the scaled interval of a numeric parameter.
void Bounds(const Parameter& p, double* lo, double* hi) {
  switch (p.kind) {
    case ParameterKind::kInteger:
      *lo = p.min - 0.5;
      *hi = p.max + 0.5;
      if (p.scale != ScaleType::kLinear && *lo <= 0) *lo = p.min / 2;  // keep log defined
      return;
    case ParameterKind::kDiscrete:
      *lo = p.values.front();
      *hi = p.values.back();
      return;
    default:
      *lo = p.min;
      *hi = p.max;
  }
}

Status ValidateOne(const Parameter& p, const std::string& where) {
  const std::string at = where + p.name;
  if (p.name.empty()) return InvalidArgument(where + "name: must not be empty");
  switch (p.kind) {
    case ParameterKind::kDouble:
    case ParameterKind::kInteger:
      if (!std::isfinite(p.min) || !std::isfinite(p.max) || p.min > p.max) {
        return InvalidArgument(at + ": minValue must be finite and <= maxValue");
      }
      if (p.kind == ParameterKind::kInteger &&
          (p.min != std::floor(p.min) || p.max != std::floor(p.max))) {
        return InvalidArgument(at + ": integer bounds must be whole numbers");
      }
      if (p.scale != ScaleType::kLinear && p.min <= 0) {
        return InvalidArgument(at + ": LOG and REVERSE_LOG scales need minValue > 0");
      }
      break;
    case ParameterKind::kDiscrete:
      if (p.values.empty()) return InvalidArgument(at + ": discrete values must not be empty");
      for (size_t i = 0; i < p.values.size(); ++i) {
        if (!std::isfinite(p.values[i])) return InvalidArgument(at + ": values must be finite");
        if (i > 0 && !(p.values[i] > p.values[i - 1])) {
          return InvalidArgument(at + ": discrete values must be strictly increasing");
        }
      }
      if (p.scale != ScaleType::kLinear && p.values.front() <= 0) {
        return InvalidArgument(at + ": LOG and REVERSE_LOG scales need all values > 0");
      }
      break;
    case ParameterKind::kCategorical: {
      if (p.categories.empty()) return InvalidArgument(at + ": categories must not be empty");
      std::set<std::string> seen(p.categories.begin(), p.categories.end());
      if (seen.size() != p.categories.size()) {
        return InvalidArgument(at + ": categories must be unique");
      }
      break;
    }
  }
  for (size_t c = 0; c < p.children.size(); ++c) {
    const Conditional& cond = p.children[c];
    const std::string cat = at + ".conditionalParameterSpecs[" + std::to_string(c) + "]";
    if (p.kind == ParameterKind::kDouble) {
      return InvalidArgument(cat + ": a DOUBLE parameter cannot have conditional children");
    }
    if (IsNumeric(p)) {
      if (cond.parent_values.empty() || !cond.parent_categories.empty()) {
        return InvalidArgument(cat + ": needs numeric parent values for parent " + p.name);
      }
      for (double v : cond.parent_values) {
        bool ok = p.kind == ParameterKind::kInteger
                      ? v == std::floor(v) && v >= p.min && v <= p.max
                      : std::any_of(p.values.begin(), p.values.end(),
                                    [&](double x) { return SameNumber(x, v); });
        if (!ok) return InvalidArgument(cat + ": parent value is not a value of " + p.name);
      }
    } else {
      if (cond.parent_categories.empty() || !cond.parent_values.empty()) {
        return InvalidArgument(cat + ": needs parent categories for parent " + p.name);
      }
      for (const auto& v : cond.parent_categories) {
        if (std::find(p.categories.begin(), p.categories.end(), v) == p.categories.end()) {
          return InvalidArgument(cat + ": '" + v + "' is not a category of " + p.name);
        }
      }
    }
    STOKER_RETURN_IF_ERROR(ValidateOne(cond.child, cat + ".parameterSpec."));
  }
  // Children with the same name must have disjoint conditions.
  for (size_t a = 0; a < p.children.size(); ++a) {
    for (size_t b = a + 1; b < p.children.size(); ++b) {
      const Conditional& x = p.children[a];
      const Conditional& y = p.children[b];
      if (x.child.name != y.child.name) continue;
      bool overlap = false;
      for (double v : x.parent_values) {
        for (double w : y.parent_values) overlap |= SameNumber(v, w);
      }
      for (const auto& v : x.parent_categories) {
        for (const auto& w : y.parent_categories) overlap |= v == w;
      }
      if (overlap) {
        return InvalidArgument(at + ": conditional children named " + x.child.name +
                               " must have disjoint parent values");
      }
    }
  }
  return OkStatus();
}

// Names of a subtree; a name may repeat only among same-parent children.
void CollectNames(const Parameter& p, std::multiset<std::string>* out) {
  out->insert(p.name);
  std::set<std::string> child_names;
  for (const auto& c : p.children) {
    std::multiset<std::string> sub;
    CollectNames(c.child, &sub);
    for (const auto& n : sub) {
      if (n == c.child.name && child_names.count(n)) continue;  // same-named sibling
      out->insert(n);
    }
    child_names.insert(c.child.name);
  }
}

}  // namespace

Status ValidateSpace(const Space& space) {
  if (space.parameters.empty()) return InvalidArgument("parameters: must not be empty");
  std::multiset<std::string> names;
  for (size_t i = 0; i < space.parameters.size(); ++i) {
    STOKER_RETURN_IF_ERROR(
        ValidateOne(space.parameters[i], "parameters[" + std::to_string(i) + "]."));
    CollectNames(space.parameters[i], &names);
  }
  for (const auto& n : names) {
    if (names.count(n) > 1) {
      return InvalidArgument("parameters: parameterId " + n +
                             " is used twice outside same-parent conditional children");
    }
  }
  return OkStatus();
}

Encoding::Encoding(const Space& space) {
  for (const auto& p : space.parameters) Add(p, -1, nullptr);
}

void Encoding::Add(const Parameter& p, int parent, const Conditional* cond) {
  int me = size();
  slots_.push_back({&p, parent, cond});
  for (const auto& c : p.children) Add(c.child, me, &c);
}

int Encoding::Levels(int i) const {
  const Parameter& p = *slots_[i].param;
  switch (p.kind) {
    case ParameterKind::kInteger:
      return static_cast<int>(std::min(p.max - p.min + 1, 2e9));
    case ParameterKind::kDiscrete:
      return static_cast<int>(p.values.size());
    case ParameterKind::kCategorical:
      return static_cast<int>(p.categories.size());
    default:
      return 0;
  }
}

double Encoding::ToUnit(int i, double x) const {
  const Parameter& p = *slots_[i].param;
  double lo, hi;
  Bounds(p, &lo, &hi);
  if (!(hi > lo)) return 0.5;
  x = std::clamp(x, lo, hi);
  switch (p.scale) {
    case ScaleType::kLinear:
      return (x - lo) / (hi - lo);
    case ScaleType::kLog:
      return (std::log(x) - std::log(lo)) / (std::log(hi) - std::log(lo));
    case ScaleType::kReverseLog:
      return 1.0 - (std::log(hi + lo - x) - std::log(lo)) / (std::log(hi) - std::log(lo));
  }
  return 0.5;
}

double Encoding::FromUnit(int i, double u) const {
  const Parameter& p = *slots_[i].param;
  double lo, hi;
  Bounds(p, &lo, &hi);
  if (!(hi > lo)) return lo;
  u = std::clamp(u, 0.0, 1.0);
  double x = lo;
  switch (p.scale) {
    case ScaleType::kLinear:
      x = lo + u * (hi - lo);
      break;
    case ScaleType::kLog:
      x = std::exp(std::log(lo) + u * (std::log(hi) - std::log(lo)));
      break;
    case ScaleType::kReverseLog:
      x = hi + lo - std::exp(std::log(lo) + (1.0 - u) * (std::log(hi) - std::log(lo)));
      break;
  }
  return std::clamp(x, lo, hi);
}

int Encoding::LevelOf(int i, double v) const {
  const Parameter& p = *slots_[i].param;
  switch (p.kind) {
    case ParameterKind::kInteger: {
      double x = std::clamp(std::round(FromUnit(i, v)), p.min, p.max);
      return static_cast<int>(x - p.min);
    }
    case ParameterKind::kDiscrete: {
      // Nearest value in the unit (scaled) space.
      int best = 0;
      double bd = 1e300;
      // Values are increasing, so unit positions are too: binary search.
      int lo = 0, hi = static_cast<int>(p.values.size()) - 1;
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ToUnit(i, p.values[mid]) < v)
          lo = mid + 1;
        else
          hi = mid;
      }
      for (int k = std::max(0, lo - 1); k <= std::min<int>(lo + 1, p.values.size() - 1); ++k) {
        double d = std::fabs(ToUnit(i, p.values[k]) - v);
        if (d < bd) bd = d, best = k;
      }
      return best;
    }
    case ParameterKind::kCategorical:
      return static_cast<int>(
          std::clamp(std::round(v), 0.0, static_cast<double>(p.categories.size() - 1)));
    default:
      return 0;
  }
}

double Encoding::LevelValue(int i, int k) const {
  const Parameter& p = *slots_[i].param;
  switch (p.kind) {
    case ParameterKind::kInteger:
      return ToUnit(i, p.min + k);
    case ParameterKind::kDiscrete:
      return ToUnit(i, p.values[k]);
    default:
      return k;
  }
}

double Encoding::Snap(int i, double v) const {
  if (slots_[i].param->kind == ParameterKind::kDouble) return std::clamp(v, 0.0, 1.0);
  return LevelValue(i, LevelOf(i, v));
}

bool Encoding::IsActive(const std::vector<double>& u, int i) const {
  const Slot& s = slots_[i];
  if (s.parent < 0) return true;
  double pv = u[s.parent];
  if (pv == kInactive) return false;
  const Parameter& parent = *slots_[s.parent].param;
  int level = LevelOf(s.parent, pv);
  switch (parent.kind) {
    case ParameterKind::kCategorical: {
      const auto& cats = s.condition->parent_categories;
      return std::find(cats.begin(), cats.end(), parent.categories[level]) != cats.end();
    }
    case ParameterKind::kInteger:
    case ParameterKind::kDiscrete: {
      double x = parent.kind == ParameterKind::kInteger ? parent.min + level : parent.values[level];
      for (double v : s.condition->parent_values) {
        if (SameNumber(v, x)) return true;
      }
      return false;
    }
    default:
      return false;
  }
}

std::vector<double> Encoding::Encode(const Assignment& a) const {
  std::vector<double> u(size(), kInactive);
  for (int i = 0; i < size(); ++i) {
    if (!IsActive(u, i)) continue;
    const Parameter& p = *slots_[i].param;
    auto it = a.find(p.name);
    if (p.kind == ParameterKind::kCategorical) {
      u[i] = 0;
      if (it != a.end() && std::holds_alternative<std::string>(it->second)) {
        auto c =
            std::find(p.categories.begin(), p.categories.end(), std::get<std::string>(it->second));
        if (c != p.categories.end()) u[i] = c - p.categories.begin();
      }
    } else {
      double x = 0.5;
      if (it != a.end() && std::holds_alternative<double>(it->second)) {
        x = ToUnit(i, std::get<double>(it->second));
      }
      u[i] = Snap(i, x);
    }
  }
  return u;
}

Assignment Encoding::Decode(const std::vector<double>& u) const {
  Assignment a;
  for (int i = 0; i < size(); ++i) {
    if (u[i] == kInactive || !IsActive(u, i)) continue;
    const Parameter& p = *slots_[i].param;
    switch (p.kind) {
      case ParameterKind::kDouble:
        a[p.name] = std::clamp(FromUnit(i, u[i]), p.min, p.max);
        break;
      case ParameterKind::kInteger:
        a[p.name] = p.min + LevelOf(i, u[i]);
        break;
      case ParameterKind::kDiscrete:
        a[p.name] = p.values[LevelOf(i, u[i])];
        break;
      case ParameterKind::kCategorical:
        a[p.name] = p.categories[LevelOf(i, u[i])];
        break;
    }
  }
  return a;
}

std::string Key(const Assignment& a) {
  std::string key;
  char buf[64];
  for (const auto& [name, value] : a) {
    key += name;
    key += '=';
    if (std::holds_alternative<double>(value)) {
      std::snprintf(buf, sizeof buf, "%.17g", std::get<double>(value));
      key += buf;
    } else {
      key += '"' + std::get<std::string>(value) + '"';
    }
    key += ';';
  }
  return key;
}

}  // namespace stoker::tune
