// tune-bench: Stoker's samplers on test functions with known optima, and the
// latency of one GP suggestion. Driven by bench/tune/run.sh; the Optuna side
// is optuna_bench.py, which defines the same functions and parameters.
//
//   tune-bench regret  [--seeds N] [--budget B] [--functions a,b] [--methods m,n] [--out F]
//   tune-bench latency [--reps R] [--out F]
//
// regret writes one JSON object per run (JSON lines):
//   {"method","mode","function","seed","regret":{"25":r,"50":r,"100":r},"seconds":s}
// The samplers are never told the budget, so budgets 25 and 50 are read off
// the 100-trial run (best value after the first 25 / 50 trials).
// Methods: stoker-gp (1 suggestion per round), stoker-gp-batch8 (8 per round,
// all asked before any is evaluated), stoker-random, stoker-quasi.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tune/gp_bo.h"
#include "tune/sampler.h"

namespace {

using stoker::tune::Assignment;
using stoker::tune::Observation;
using stoker::tune::Parameter;
using stoker::tune::ParameterKind;
using stoker::tune::Rng;
using stoker::tune::ScaleType;
using stoker::tune::Space;

struct Function {
  std::string name;
  Space space;
  double optimum;
  std::function<double(const Assignment&)> f;
};

double Get(const Assignment& a, const std::string& n) { return std::get<double>(a.at(n)); }

// "x0" .. "x9" (built once: GCC 12 warns falsely on "x" + std::to_string(j)).
const std::string& X(int j) {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (char c = '0'; c <= '9'; ++c) v.push_back(std::string("x") + c);
    return v;
  }();
  return kNames[j];
}

Parameter Dbl(const std::string& name, double lo, double hi, ScaleType scale = ScaleType::kLinear) {
  Parameter p;
  p.name = name;
  p.kind = ParameterKind::kDouble;
  p.min = lo;
  p.max = hi;
  p.scale = scale;
  return p;
}

Space Box(int d, double lo, double hi) {
  Space s;
  for (int j = 0; j < d; ++j) s.parameters.push_back(Dbl(X(j), lo, hi));
  return s;
}

std::vector<Function> Functions() {
  std::vector<Function> fs;
  {
    Space s{{Dbl("x1", -5, 10), Dbl("x2", 0, 15)}};
    fs.push_back({"branin", s, 0.397887357729738, [](const Assignment& a) {
                    double x1 = Get(a, "x1"), x2 = Get(a, "x2");
                    double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
                    return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) +
                           10 * (1 - t) * std::cos(x1) + 10;
                  }});
  }
  fs.push_back({"hartmann6", Box(6, 0, 1), -3.32236801141551, [](const Assignment& a) {
                  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
                  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                                 {0.05, 10, 17, 0.1, 8, 14},
                                                 {3, 3.5, 1.7, 10, 17, 8},
                                                 {17, 8, 0.05, 10, 0.1, 14}};
                  static const double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                                 {2329, 4135, 8307, 3736, 1004, 9991},
                                                 {2348, 1451, 3522, 2883, 3047, 6650},
                                                 {4047, 8828, 8732, 5743, 1091, 381}};
                  double total = 0;
                  for (int i = 0; i < 4; ++i) {
                    double inner = 0;
                    for (int j = 0; j < 6; ++j) {
                      inner += A[i][j] * std::pow(Get(a, X(j)) - 1e-4 * P[i][j], 2);
                    }
                    total += alpha[i] * std::exp(-inner);
                  }
                  return -total;
                }});
  fs.push_back({"rosenbrock4", Box(4, -5, 10), 0.0, [](const Assignment& a) {
                  double total = 0;
                  for (int i = 0; i < 3; ++i) {
                    double x = Get(a, X(i));
                    double y = Get(a, X(i + 1));
                    total += 100 * std::pow(y - x * x, 2) + std::pow(1 - x, 2);
                  }
                  return total;
                }});
  fs.push_back({"ackley5", Box(5, -32.768, 32.768), 0.0, [](const Assignment& a) {
                  double s1 = 0, s2 = 0;
                  for (int j = 0; j < 5; ++j) {
                    double x = Get(a, X(j));
                    s1 += x * x;
                    s2 += std::cos(2 * M_PI * x);
                  }
                  return -20 * std::exp(-0.2 * std::sqrt(s1 / 5)) - std::exp(s2 / 5) + 20 + M_E;
                }});
  {
    // Like a training run's loss: the best learning rate depends on the
    // optimizer. Optimum 0 at adam, lr = 10^-3.5, dropout 0.3, layers 4.
    Parameter layers;
    layers.name = "layers";
    layers.kind = ParameterKind::kInteger;
    layers.min = 1;
    layers.max = 8;
    Parameter opt;
    opt.name = "optimizer";
    opt.kind = ParameterKind::kCategorical;
    opt.categories = {"sgd", "adam", "rmsprop"};
    Space s{{Dbl("lr", 1e-5, 1e-1, ScaleType::kLog), Dbl("dropout", 0, 0.9), layers, opt}};
    fs.push_back({"mixed", s, 0.0, [](const Assignment& a) {
                    static const std::map<std::string, std::pair<double, double>> kOpt = {
                        {"sgd", {-1.5, 0.3}}, {"adam", {-3.5, 0.0}}, {"rmsprop", {-3.0, 0.1}}};
                    auto [center, offset] = kOpt.at(std::get<std::string>(a.at("optimizer")));
                    return std::pow(std::log10(Get(a, "lr")) - center, 2) +
                           4 * std::pow(Get(a, "dropout") - 0.3, 2) +
                           0.1 * std::pow(Get(a, "layers") - 4, 2) + offset;
                  }});
  }
  return fs;
}

std::unique_ptr<stoker::tune::Sampler> MakeMethod(const std::string& method, uint64_t seed) {
  if (method == "stoker-random") return std::make_unique<stoker::tune::RandomSampler>();
  if (method == "stoker-quasi") return std::make_unique<stoker::tune::QuasiRandomSampler>(seed);
  stoker::tune::GpBoOptions options;
  options.seed = seed;
  // Ablations of the output warping (not part of the default report).
  if (method == "stoker-gp-nowarp") options.warping = stoker::tune::OutputWarping::kNone;
  if (method == "stoker-gp-rank") options.warping = stoker::tune::OutputWarping::kRank;
  if (method == "stoker-gp-log") options.warping = stoker::tune::OutputWarping::kLog;
  return std::make_unique<stoker::tune::GpBoSampler>(options);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Regret(int seeds, int budget, const std::string& functions, const std::string& methods,
           FILE* out) {
  const int kBudgets[] = {25, 50, 100};
  for (const auto& fn : Functions()) {
    auto wanted = Split(functions);
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), fn.name) == wanted.end()) {
      continue;
    }
    for (const auto& method : Split(methods)) {
      const int batch = method.find("batch8") != std::string::npos ? 8 : 1;
      auto start_all = std::chrono::steady_clock::now();
      for (int seed = 0; seed < seeds; ++seed) {
        auto start = std::chrono::steady_clock::now();
        auto sampler = MakeMethod(method, seed);
        Rng rng(1000003ULL * seed + 17);
        std::vector<Observation> done;
        std::vector<double> best;
        while (static_cast<int>(done.size()) < budget) {
          int n = std::min(batch, budget - static_cast<int>(done.size()));
          auto next = sampler->Suggest(fn.space, done, {}, n, rng);
          if (next.empty()) {
            std::fprintf(stderr, "%s returned no suggestion\n", method.c_str());
            return 1;
          }
          for (auto& a : next) {
            double v = fn.f(a);
            best.push_back(best.empty() ? v : std::min(best.back(), v));
            done.push_back({std::move(a), v, true});
          }
        }
        std::fprintf(out,
                     "{\"method\": \"%s\", \"mode\": \"%s\", \"function\": \"%s\", \"seed\": %d, "
                     "\"regret\": {",
                     method.c_str(), batch > 1 ? "parallel" : "sequential", fn.name.c_str(), seed);
        bool first = true;
        for (int b : kBudgets) {
          if (b > budget) continue;
          std::fprintf(out, "%s\"%d\": %.17g", first ? "" : ", ", b, best[b - 1] - fn.optimum);
          first = false;
        }
        std::fprintf(out, "}, \"seconds\": %.3f}\n", Seconds(start));
        std::fflush(out);
      }
      std::fprintf(stderr, "%s %s %.1fs\n", fn.name.c_str(), method.c_str(), Seconds(start_all));
    }
  }
  return 0;
}

// One Suggest call of a fresh GpBoSampler (cold: full hyperparameter
// restarts) and of one that has just suggested at n - 1 observations (warm:
// the study's steady state), with n random observations in 10 dimensions.
int Latency(int reps, FILE* out) {
  Space space = Box(10, 0, 1);
  auto f = [](const Assignment& a) {
    double s = 0;
    for (int j = 0; j < 10; ++j) {
      double x = Get(a, X(j));
      s += std::sin(3 * x * (j + 1) / 4.0) + (x - 0.3) * (x - 0.3);
    }
    return s;
  };
  for (int n : {100, 500, 1000}) {
    for (int rep = 0; rep < reps; ++rep) {
      Rng data_rng(77 + rep);
      stoker::tune::RandomSampler random;
      std::vector<Observation> done;
      for (auto& a : random.Suggest(space, {}, {}, n + 1, data_rng)) {
        double v = f(a);
        done.push_back({std::move(a), v, true});
      }
      std::vector<Observation> last = done;
      done.pop_back();
      stoker::tune::GpBoSampler sampler;
      Rng rng(5 + rep);
      auto start = std::chrono::steady_clock::now();
      auto got = sampler.Suggest(space, done, {}, 1, rng);
      double cold = Seconds(start);
      start = std::chrono::steady_clock::now();
      got = sampler.Suggest(space, last, {}, 1, rng);
      double warm = Seconds(start);
      std::fprintf(out,
                   "{\"latency\": true, \"observations\": %d, \"dims\": 10, \"rep\": %d, "
                   "\"cold_ms\": %.2f, \"warm_ms\": %.2f}\n",
                   n, rep, cold * 1e3, warm * 1e3);
      std::fflush(out);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "regret") != 0 && std::strcmp(argv[1], "latency") != 0)) {
    std::fprintf(stderr,
                 "usage: tune-bench regret [--seeds N] [--budget B] [--functions a,b] "
                 "[--methods m,n] [--out FILE]\n       tune-bench latency [--reps R] [--out "
                 "FILE]\n");
    return 2;
  }
  int seeds = 20, budget = 100, reps = 3;
  std::string functions, out_path = "-";
  std::string methods = "stoker-gp,stoker-gp-batch8,stoker-random,stoker-quasi";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--seeds")
      seeds = std::stoi(value);
    else if (flag == "--budget")
      budget = std::stoi(value);
    else if (flag == "--functions")
      functions = value;
    else if (flag == "--methods")
      methods = value;
    else if (flag == "--reps")
      reps = std::stoi(value);
    else if (flag == "--out")
      out_path = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  FILE* out = out_path == "-" ? stdout : std::fopen(out_path.c_str(), "w");
  if (out == nullptr) {
    std::perror(out_path.c_str());
    return 1;
  }
  int rc = std::strcmp(argv[1], "regret") == 0 ? Regret(seeds, budget, functions, methods, out)
                                               : Latency(reps, out);
  if (out != stdout) std::fclose(out);
  return rc;
}
