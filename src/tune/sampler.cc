#include "tune/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "tune/gp_bo.h"

namespace stoker::tune {
namespace {

bool Matches(const Conditional& c, const Value& v) {
  if (std::holds_alternative<std::string>(v)) {
    const auto& s = std::get<std::string>(v);
    return std::find(c.parent_categories.begin(), c.parent_categories.end(), s) !=
           c.parent_categories.end();
  }
  double x = std::get<double>(v);
  for (double p : c.parent_values) {
    if (std::fabs(p - x) <= 1e-9 * std::max(1.0, std::fabs(x))) return true;
  }
  return false;
}

std::vector<Value> GridValues(const Parameter& p) {
  std::vector<Value> out;
  switch (p.kind) {
    case ParameterKind::kInteger:
      for (double x = p.min; x <= p.max; x += 1) out.emplace_back(x);
      break;
    case ParameterKind::kDiscrete:
      for (double x : p.values) out.emplace_back(x);
      break;
    case ParameterKind::kCategorical:
      for (const auto& c : p.categories) out.emplace_back(c);
      break;
    case ParameterKind::kDouble:
      break;
  }
  return out;
}

void Expand(const std::vector<const Parameter*>& todo, Assignment& cur,
            std::vector<Assignment>* out) {
  if (todo.empty()) {
    out->push_back(cur);
    return;
  }
  const Parameter& p = *todo.front();
  for (const Value& v : GridValues(p)) {
    cur[p.name] = v;
    std::vector<const Parameter*> next;
    for (const auto& c : p.children) {
      if (Matches(c, v)) next.push_back(&c.child);
    }
    next.insert(next.end(), todo.begin() + 1, todo.end());
    Expand(next, cur, out);
  }
  cur.erase(p.name);
}

double GridCount(const Parameter& p) {
  double total = 0;
  for (const Value& v : GridValues(p)) {
    double prod = 1;
    for (const auto& c : p.children) {
      if (Matches(c, v)) prod *= GridCount(c.child);
    }
    total += prod;
  }
  return total;
}

const Parameter* FindDouble(const Parameter& p) {
  if (p.kind == ParameterKind::kDouble) return &p;
  for (const auto& c : p.children) {
    if (const Parameter* d = FindDouble(c.child)) return d;
  }
  return nullptr;
}

std::set<std::string> TakenKeys(const std::vector<Observation>& done,
                                const std::vector<Assignment>& pending) {
  std::set<std::string> keys;
  for (const auto& o : done) keys.insert(Key(o.params));
  for (const auto& a : pending) keys.insert(Key(a));
  return keys;
}

constexpr int kPrimes[] = {2,   3,   5,   7,   11,  13,  17,  19,  23,  29,  31,  37,  41,  43,
                           47,  53,  59,  61,  67,  71,  73,  79,  83,  89,  97,  101, 103, 107,
                           109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181,
                           191, 193, 197, 199, 211, 223, 227, 229, 233, 239, 241, 251, 257, 263};

int NthPrime(int i) {
  constexpr int kCount = sizeof(kPrimes) / sizeof(kPrimes[0]);
  if (i < kCount) return kPrimes[i];
  int p = kPrimes[kCount - 1];
  for (int found = kCount - 1; found < i;) {
    ++p;
    bool prime = true;
    for (int q = 2; q * q <= p && prime; ++q) prime = p % q != 0;
    if (prime) ++found;
  }
  return p;
}

}  // namespace

Status ValidateGridSpace(const Space& space, int64_t max_points) {
  STOKER_RETURN_IF_ERROR(ValidateSpace(space));
  double total = 1;
  for (const auto& p : space.parameters) {
    if (const Parameter* d = FindDouble(p)) {
      return InvalidArgument(
          "parameters: GRID_SEARCH needs INTEGER, DISCRETE or CATEGORICAL "
          "parameters, but " +
          d->name + " is DOUBLE");
    }
    total *= GridCount(p);
  }
  if (total > static_cast<double>(max_points)) {
    return InvalidArgument("parameters: the grid has " + std::to_string(total) +
                           " points, more than the " + std::to_string(max_points) +
                           " allowed; use the default algorithm or fewer values");
  }
  return OkStatus();
}

std::vector<Assignment> EnumerateGrid(const Space& space) {
  std::vector<Assignment> out;
  std::vector<const Parameter*> todo;
  for (const auto& p : space.parameters) todo.push_back(&p);
  Assignment cur;
  Expand(todo, cur, &out);
  return out;
}

std::vector<Assignment> GridSampler::Suggest(const Space& space,
                                             const std::vector<Observation>& done,
                                             const std::vector<Assignment>& pending, int count,
                                             Rng&) {
  std::vector<Assignment> out;
  if (count <= 0 || !ValidateGridSpace(space).ok()) return out;
  std::set<std::string> taken = TakenKeys(done, pending);
  for (auto& a : EnumerateGrid(space)) {
    if (static_cast<int>(out.size()) >= count) break;
    if (taken.count(Key(a))) continue;
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<double> FromCube(const Encoding& enc, const std::vector<double>& cube) {
  std::vector<double> u(enc.size(), kInactive);
  for (int i = 0; i < enc.size(); ++i) {
    if (!enc.IsActive(u, i)) continue;
    double c = std::clamp(cube[i], 0.0, 1.0);
    if (enc.IsCategorical(i)) {
      int k = enc.Levels(i);
      u[i] = std::min(k - 1, static_cast<int>(c * k));
    } else {
      u[i] = enc.Snap(i, c);
    }
  }
  return u;
}

std::vector<Assignment> RandomSampler::Suggest(const Space& space,
                                               const std::vector<Observation>& done,
                                               const std::vector<Assignment>& pending, int count,
                                               Rng& rng) {
  std::vector<Assignment> out;
  if (count <= 0 || !ValidateSpace(space).ok()) return out;
  Encoding enc(space);
  std::set<std::string> taken = TakenKeys(done, pending);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  for (int n = 0; n < count; ++n) {
    Assignment a;
    for (int attempt = 0; attempt < 32; ++attempt) {
      std::vector<double> cube(enc.size());
      for (double& c : cube) c = unif(rng);
      a = enc.Decode(FromCube(enc, cube));
      if (!taken.count(Key(a))) break;
    }
    taken.insert(Key(a));
    out.push_back(std::move(a));
  }
  return out;
}

ScrambledHalton::ScrambledHalton(int dims, uint64_t seed) {
  Rng rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  for (int j = 0; j < dims; ++j) {
    int b = NthPrime(j);
    bases_.push_back(b);
    std::vector<int> perm(b);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin() + 1, perm.end(), rng);
    perms_.push_back(std::move(perm));
    shift_.push_back(unif(rng));
  }
}

std::vector<double> ScrambledHalton::Point(uint64_t index) const {
  std::vector<double> x(bases_.size());
  for (size_t j = 0; j < bases_.size(); ++j) {
    const int b = bases_[j];
    double f = 1.0 / b, v = 0;
    for (uint64_t i = index; i > 0; i /= b, f /= b) v += f * perms_[j][i % b];
    v += shift_[j];
    x[j] = v - std::floor(v);
  }
  return x;
}

std::vector<Assignment> QuasiRandomSampler::Suggest(const Space& space,
                                                    const std::vector<Observation>& done,
                                                    const std::vector<Assignment>& pending,
                                                    int count, Rng&) {
  std::vector<Assignment> out;
  if (count <= 0 || !ValidateSpace(space).ok()) return out;
  Encoding enc(space);
  ScrambledHalton halton(enc.size(), seed_);
  uint64_t first = done.size() + pending.size() + 1;
  for (int n = 0; n < count; ++n) out.push_back(enc.Decode(FromCube(enc, halton.Point(first + n))));
  return out;
}

std::unique_ptr<Sampler> MakeSampler(Algorithm algorithm, uint64_t seed) {
  switch (algorithm) {
    case Algorithm::kGrid:
      return std::make_unique<GridSampler>();
    case Algorithm::kRandom:
      return std::make_unique<RandomSampler>();
    case Algorithm::kQuasiRandom:
      return std::make_unique<QuasiRandomSampler>(seed);
    case Algorithm::kDefault:
      break;
  }
  GpBoOptions options;
  options.seed = seed;
  return std::make_unique<GpBoSampler>(options);
}

}  // namespace stoker::tune
