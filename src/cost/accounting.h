// The Accountant: the usage ledger read from the store (finished attempts)
// plus the attempts running now, priced with the catalog, and the budgets
// that limit it (docs/cost.md).
//
// Writers: the control loop writes ledger rows (Store::RecordUsage); admins
// change budgets through PutBudget/DeleteBudget here, which keeps the cache
// in step. Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "cost/catalog.h"
#include "cost/ledger.h"
#include "store/store.h"

namespace stoker::cost {

// Where a budget stands this month.
struct BudgetState {
  store::Budget budget;
  Month month;
  std::optional<double> used_usd;  // in budget.price; absent when some usage has no price
  std::string no_price;            // why used_usd is absent
  double used_gpu_hours = 0;
  bool warn = false;      // past warn_at of a limit
  bool exceeded = false;  // a limit reached
  // "user:alice: $104.20 of $100.00 (vertex price) and 3.1 of 10 GPU-hours used in 2026-11"
  std::string Describe() const;
};
nlohmann::json ToJson(const BudgetState& state);

class Accountant {
 public:
  // `clock` and `store` must outlive the accountant.
  Accountant(store::Store& store, Catalog catalog, NodeShape node, const Clock& clock);

  const Catalog& catalog() const { return catalog_; }
  const NodeShape& node() const { return node_; }

  // A job's rows: its ledger, and its attempt running now (ending now).
  Result<std::vector<store::UsageRecord>> JobRows(const store::JobRecord& job);
  // The rows of a study's trials, running attempts included.
  Result<std::vector<store::UsageRecord>> StudyRows(int64_t study_id);
  // Every row that overlaps [from_us, to_us), running attempts included, clipped to it.
  Result<std::vector<store::UsageRecord>> RowsBetween(int64_t from_us, int64_t to_us);

  // `rows` priced in `region`; when empty, each row in its job's region
  // (Total, ledger.h).
  Totals Price(const std::vector<store::UsageRecord>& rows, const std::string& region = "") const {
    return Total(rows, catalog_, node_, region);
  }

  // Budgets and how much of each this month has used. While the refresher
  // runs (StartRefresher: stokerd), these are the states it computed last, at
  // most kRefreshSeconds old, and no caller waits for a ledger scan; without
  // it (tests), they are recomputed here when older than that. A budget
  // change recomputes them at its next read.
  Result<std::vector<BudgetState>> BudgetStates();
  static constexpr int kRefreshSeconds = 5;
  // For the control loop, which must never wait for a scan: while the
  // refresher runs, its last states, or none yet (nullopt) before its first
  // pass ends; without it, BudgetStates().
  std::optional<std::vector<BudgetState>> LastBudgetStates();
  // A thread that recomputes the states every kRefreshSeconds, outside any
  // lock a reader takes. Stopped by StopRefresher or the destructor.
  void StartRefresher();
  void StopRefresher();
  ~Accountant();
  // May `user` submit a job of `project` with `labels`? ResourceExhausted
  // naming the budget, its numbers and the fix when a hard limit is reached;
  // budgets past their warning threshold add a line to `warnings`.
  Status CheckSubmission(const std::string& user, const std::string& project,
                         const nlohmann::json& labels, std::vector<std::string>* warnings);

  // Validates and stores a budget (InvalidArgument naming the field).
  Status PutBudget(const store::Budget& budget);
  Status DeleteBudget(const std::string& scope);

 private:
  // Rows of the attempts running now (state RUNNING or CANCELLING) of `jobs`,
  // skipping attempts the ledger already holds.
  std::vector<store::UsageRecord> RunningRows(const std::vector<store::JobRecord>& jobs,
                                              const std::vector<store::UsageRecord>& ledger,
                                              int64_t now_us) const;

  // Computes the states from the store and the ledger; takes mu_ only to
  // copy the budgets, and installs the result only if no budget changed
  // meanwhile (`generation`).
  Result<std::vector<BudgetState>> ComputeStates(int64_t now_us);

  store::Store& store_;
  const Catalog catalog_;
  const NodeShape node_;
  const Clock& clock_;

  std::mutex mu_;
  std::optional<std::vector<store::Budget>> budgets_;  // cache; nullopt = read again
  std::optional<std::vector<BudgetState>> states_;
  int64_t states_us_ = 0;
  uint64_t generation_ = 0;  // bumped by every budget change
  bool refresher_running_ = false;
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread refresher_;
};

}  // namespace stoker::cost
