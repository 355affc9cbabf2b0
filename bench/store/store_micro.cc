// store-micro: what the store's two commits on a job's start path cost,
// without a daemon: the submission (CreateJob, synced) and the PENDING
// transition of a local launch (unsynced, with an allocation like the
// scheduling pass writes), one job at a time, on a fresh store.
//
//   store-micro DIR [--jobs 500]
//
// DIR: an empty or missing directory for the store (left behind, so that
// removing it does not slow the next run's file creations). Prints p50,
// p90 and p99 in microseconds of each step as a Markdown table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/micro.h"
#include "store/store.h"

namespace {

using nlohmann::json;
using stoker::spec::JobState;

double NowUs() { return stoker::bench::NowMs() * 1000; }

void Print(const char* what, const std::vector<double>& v) {
  stoker::bench::Percentiles p = stoker::bench::PercentilesOf(v);
  std::printf("| %s | %.0f | %.0f | %.0f |\n", what, p.p50, p.p90, p.p99);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: store-micro DIR [--jobs N]\n");
    return 2;
  }
  int jobs = 500;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--jobs") == 0) jobs = std::atoi(argv[i + 1]);
  }
  auto store = stoker::store::Store::Open(argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "store-micro: %s\n", store.status().ToString().c_str());
    return 1;
  }
  // The spec of a one-replica container job, as admission stores it.
  json spec = {{"displayName", "bench"},
               {"jobSpec",
                {{"workerPoolSpecs",
                  {{{"machineSpec", {{"machineType", "n1-standard-4"}}},
                    {"replicaCount", "1"},
                    {"containerSpec",
                     {{"imageUri", "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310"},
                      {"command", {"/bin/sh", "-c", "date"}}}}}}}}}};
  json allocation = {{"node", "local"},
                     {"replicas",
                      {{{"name", "workerpool0-0"},
                        {"pool", 0},
                        {"index", 0},
                        {"node", "local"},
                        {"cpus", 4},
                        {"memory_bytes", 15ll << 30},
                        {"gpus", json::array()},
                        {"gpu_shares", json::array()},
                        {"gpu_type", ""},
                        {"port", 41234}}}}};
  std::vector<double> create, pending;
  for (int i = 0; i < jobs; ++i) {
    stoker::store::NewJob job{"p", "us-central1", "bench", spec, {}};
    job.user = "ada";
    double t0 = NowUs();
    auto rec = (*store)->CreateJob(job);
    double t1 = NowUs();
    if (!rec.ok()) {
      std::fprintf(stderr, "store-micro: %s\n", rec.status().ToString().c_str());
      return 1;
    }
    auto moved = (*store)->Transition(rec->id, JobState::kQueued, JobState::kPending,
                                      "resources allocated on local",
                                      {.allocation = allocation, .synced = false});
    double t2 = NowUs();
    if (!moved.ok()) {
      std::fprintf(stderr, "store-micro: %s\n", moved.ToString().c_str());
      return 1;
    }
    create.push_back(t1 - t0);
    pending.push_back(t2 - t1);
  }
  std::printf("| step (%d jobs, us) | p50 | p90 | p99 |\n|---|---:|---:|---:|\n", jobs);
  Print("CreateJob (synced)", create);
  Print("Transition QUEUED -> PENDING (unsynced)", pending);
  return 0;
}
