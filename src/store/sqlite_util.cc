#include "store/sqlite_util.h"

#include <mutex>

namespace stoker::store::sqlite_util {
namespace {

// Statements a connection keeps at most: the store's SQL texts are fixed
// or built from a few options, so a full cache means texts made from data.
constexpr size_t kMaxKept = 256;

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}

std::map<sqlite3*, StatementCache*>& Registry() {
  static std::map<sqlite3*, StatementCache*> caches;
  return caches;
}

}  // namespace

StatementCache::StatementCache(sqlite3* db) : db_(db) {
  std::lock_guard lock(RegistryMutex());
  Registry()[db_] = this;
}

StatementCache::~StatementCache() {
  {
    std::lock_guard lock(RegistryMutex());
    Registry().erase(db_);
  }
  for (auto& [sql, stmt] : kept_) sqlite3_finalize(stmt);
}

StatementCache* StatementCache::Of(sqlite3* db) {
  std::lock_guard lock(RegistryMutex());
  auto it = Registry().find(db);
  return it == Registry().end() ? nullptr : it->second;
}

sqlite3_stmt* StatementCache::Take(const std::string& sql) {
  auto it = kept_.find(sql);
  if (it == kept_.end()) return nullptr;
  sqlite3_stmt* stmt = it->second;
  kept_.erase(it);
  return stmt;
}

void StatementCache::Give(std::string sql, sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (kept_.size() >= kMaxKept || kept_.count(sql)) {
    sqlite3_finalize(stmt);
    return;
  }
  kept_.emplace(std::move(sql), stmt);
}

}  // namespace stoker::store::sqlite_util
