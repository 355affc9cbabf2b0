// What the node's live warm interpreters hold, booked to the users they
// serve (docs/warm-starts.md "Memory", issue #28): each zygote's resident
// memory is a scheduler::Held of its user on the local node for as long as
// it lives, so that the scheduler never places a job in memory a warm
// interpreter already has.
//
// Read from the warm dir's records (replica/warm_start_registry.h) without
// its lock and without changing anything (stoker-run prunes), at most once
// per `refresh_us`: a few small files and /proc reads, never on the path of
// a submission.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "scheduler/policy.h"

namespace stoker::server {

class WarmHoldings {
 public:
  explicit WarmHoldings(std::filesystem::path warm_dir, int64_t refresh_us = 1'000'000)
      : dir_(std::move(warm_dir)), refresh_us_(refresh_us) {}

  // The holdings as of at most refresh_us before `now_us`.
  const std::vector<scheduler::Held>& At(int64_t now_us);

 private:
  std::filesystem::path dir_;
  int64_t refresh_us_;
  int64_t read_us_ = INT64_MIN;
  std::vector<scheduler::Held> held_;
};

}  // namespace stoker::server
