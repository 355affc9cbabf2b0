// tune-bench: Stoker's samplers on the benchmark suite (suite.h), the latency
// of one GP suggestion, and the suite's definitions for the Optuna side.
// Driven by bench/tune/run.sh.
//
//   tune-bench regret  [--seeds N] [--first-seed S] [--budget B] [--functions a,b]
//                      [--methods m,n] [--shard K/N] [--out F]
//   tune-bench latency [--reps R] [--out F]
//   tune-bench spec                 # the suite's spaces as JSON (optuna_bench.py reads it)
//   tune-bench eval                 # JSON lines in: {"function","seed","trial","params"};
//                                   # out: {"observed": v, "true": t}
//
// regret writes one JSON object per run (JSON lines):
//   {"method","mode","function","seed","regret":{"20":r,"30":r,"50":r,"100":r},"seconds":s}
// Regret is the noise-free value of the incumbent (the trial with the best
// observed value so far) minus the optimum. The samplers are never told the
// budget, so the smaller budgets are read off the 100-trial run. Entries with
// parallel = p ask p trials per round, all asked before any is evaluated.
// Seeds S … S + N − 1 (S = 0 by default): a later run with --first-seed adds
// seeds to an earlier one without repeating its studies.
// Methods: stoker-gp, stoker-random, stoker-quasi (and ablations, see MakeMethod).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "suite.h"
#include "tune/gp_bo.h"
#include "tune/sampler.h"

namespace {

using stoker::bench::Entry;
using stoker::tune::Assignment;
using stoker::tune::Observation;
using stoker::tune::Rng;
using stoker::tune::Space;

std::unique_ptr<stoker::tune::Sampler> MakeMethod(const std::string& method, uint64_t seed) {
  if (method == "stoker-random") return std::make_unique<stoker::tune::RandomSampler>();
  if (method == "stoker-quasi") return std::make_unique<stoker::tune::QuasiRandomSampler>(seed);
  stoker::tune::GpBoOptions options;
  options.seed = seed;
  // Ablations of the output warping (not part of the default report).
  if (method == "stoker-gp-nowarp") options.warping = stoker::tune::OutputWarping::kNone;
  if (method == "stoker-gp-rank") options.warping = stoker::tune::OutputWarping::kRank;
  if (method == "stoker-gp-log") options.warping = stoker::tune::OutputWarping::kLog;
  // Candidate fixes (#33), measured against stoker-gp on the whole suite.
  // stoker-gp-notr: GpBoSampler before the trust region became the default.
  if (method == "stoker-gp-tr") options.trust_region = true;
  if (method == "stoker-gp-notr") options.trust_region = false;
  // stoker-gp-notrend: GpBoSampler before the quadratic trend became the default.
  if (method == "stoker-gp-notrend") options.quadratic_trend = false;
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

// The noise-free value of the incumbent after each trial.
std::vector<double> RunStudy(const Entry& e, const std::string& method, int seed, int budget) {
  auto sampler = MakeMethod(method, seed);
  Rng rng(1000003ULL * seed + 17);
  std::vector<Observation> done;
  std::vector<double> incumbent;
  double best_observed = INFINITY, best_true = INFINITY;
  while (static_cast<int>(done.size()) < budget) {
    int n = std::min(e.parallel, budget - static_cast<int>(done.size()));
    auto next = sampler->Suggest(e.space, done, {}, n, rng);
    if (next.empty()) {
      std::fprintf(stderr, "%s returned no suggestion on %s\n", method.c_str(), e.name.c_str());
      std::exit(1);
    }
    for (auto& a : next) {
      double truth = e.f(a);
      double seen = stoker::bench::Observed(e, truth, seed, static_cast<int>(done.size()));
      if (seen < best_observed) best_observed = seen, best_true = truth;
      incumbent.push_back(best_true);
      done.push_back({std::move(a), seen, true});
    }
  }
  return incumbent;
}

struct RegretArgs {
  int seeds = 20, first_seed = 0, budget = 100, shard = 0, shards = 1;
  std::string functions, methods = "stoker-gp,stoker-random";
};

int Regret(const RegretArgs& args, FILE* out) {
  const int kBudgets[] = {20, 30, 50, 100};
  auto wanted = Split(args.functions);
  const auto& suite = stoker::bench::Suite();
  for (size_t i = 0; i < suite.size(); ++i) {
    const Entry& e = suite[i];
    if (static_cast<int>(i % args.shards) != args.shard) continue;
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), e.name) == wanted.end()) {
      continue;
    }
    for (const auto& method : Split(args.methods)) {
      auto start_all = std::chrono::steady_clock::now();
      for (int seed = args.first_seed; seed < args.first_seed + args.seeds; ++seed) {
        auto start = std::chrono::steady_clock::now();
        auto incumbent = RunStudy(e, method, seed, args.budget);
        std::fprintf(out,
                     "{\"method\": \"%s\", \"mode\": \"%s\", \"function\": \"%s\", \"seed\": %d, "
                     "\"regret\": {",
                     method.c_str(), e.parallel > 1 ? "parallel" : "sequential", e.name.c_str(),
                     seed);
        bool first = true;
        for (int b : kBudgets) {
          if (b > args.budget) continue;
          std::fprintf(out, "%s\"%d\": %.17g", first ? "" : ", ", b, incumbent[b - 1] - e.optimum);
          first = false;
        }
        std::fprintf(out, "}, \"seconds\": %.3f}\n", Seconds(start));
        std::fflush(out);
      }
      std::fprintf(stderr, "%s %s %.1fs\n", e.name.c_str(), method.c_str(), Seconds(start_all));
    }
  }
  return 0;
}

// Serves evaluations to optuna_bench.py: one JSON request per line, one
// JSON answer per line, until end of input.
int Eval() {
  std::string line;
  while (std::getline(std::cin, line)) {
    auto req = nlohmann::json::parse(line);
    const Entry* e = stoker::bench::FindEntry(req.at("function").get<std::string>());
    if (e == nullptr) {
      std::fprintf(stderr, "eval: no suite entry %s\n", req.at("function").dump().c_str());
      return 1;
    }
    double truth = e->f(stoker::bench::FromJson(req.at("params")));
    double seen = stoker::bench::Observed(*e, truth, req.at("seed"), req.at("trial"));
    std::printf("{\"observed\": %.17g, \"true\": %.17g}\n", seen, truth);
    std::fflush(stdout);
  }
  return 0;
}

// One Suggest call of a fresh GpBoSampler (cold: full hyperparameter
// restarts) and of one that has just suggested at n - 1 observations (warm:
// the study's steady state), with n random observations in 10 dimensions.
int Latency(int reps, FILE* out) {
  Space space;
  for (int j = 0; j < 10; ++j) {
    stoker::tune::Parameter p;
    p.name = std::string(1, 'x') + static_cast<char>('0' + j);
    space.parameters.push_back(p);
  }
  auto f = [&space](const Assignment& a) {
    double s = 0;
    for (int j = 0; j < 10; ++j) {
      double x = std::get<double>(a.at(space.parameters[j].name));
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

int Usage() {
  std::fprintf(
      stderr,
      "usage: tune-bench regret [--seeds N] [--first-seed S] [--budget B] [--functions a,b] "
      "[--methods m,n] [--shard K/N] [--out FILE]\n"
      "       tune-bench latency [--reps R] [--out FILE]\n"
      "       tune-bench spec | eval\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string mode = argv[1];
  if (mode == "spec") {
    std::printf("%s\n", stoker::bench::SpecJson().dump(1).c_str());
    return 0;
  }
  if (mode == "eval") return Eval();
  if (mode != "regret" && mode != "latency") return Usage();
  RegretArgs args;
  int reps = 3;
  std::string out_path = "-";
  if (argc % 2 != 0) {  // flags come in pairs after the mode
    std::fprintf(stderr, "flag %s has no value\n", argv[argc - 1]);
    return Usage();
  }
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--seeds") {
      args.seeds = std::stoi(value);
    } else if (flag == "--first-seed") {
      args.first_seed = std::stoi(value);
    } else if (flag == "--budget") {
      args.budget = std::stoi(value);
    } else if (flag == "--functions") {
      args.functions = value;
    } else if (flag == "--methods") {
      args.methods = value;
    } else if (flag == "--shard" && value.find('/') != std::string::npos) {
      args.shard = std::stoi(value.substr(0, value.find('/')));
      args.shards = std::stoi(value.substr(value.find('/') + 1));
    } else if (flag == "--reps") {
      reps = std::stoi(value);
    } else if (flag == "--out") {
      out_path = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return Usage();
    }
  }
  FILE* out = out_path == "-" ? stdout : std::fopen(out_path.c_str(), "w");
  if (out == nullptr) {
    std::perror(out_path.c_str());
    return 1;
  }
  int rc = mode == "regret" ? Regret(args, out) : Latency(reps, out);
  if (out != stdout) std::fclose(out);
  return rc;
}
