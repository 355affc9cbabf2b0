// Store: the webhook outbox (docs/webhooks.md). Messages are written in the
// transaction of what they report (Transition) or on their own (Enqueue);
// the deliverer reads each hook's oldest message, then removes it once
// delivered or given up, or reschedules it after a failed try.
#include <sqlite3.h>

#include <string>
#include <vector>

#include "store/sqlite_util.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace stoker::store {
namespace {

using internal::SelectRows;
using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

}  // namespace

Status Store::InsertMessages(const std::vector<OutboxMessage>& messages, int64_t now_us) {
  if (messages.empty()) return OkStatus();
  Stmt s(db_,
         "INSERT INTO outbox(url, event, body, attempts, next_time, create_time) "
         "VALUES(?,?,?,0,?,?)");
  for (const OutboxMessage& m : messages) {
    s.Reset();
    s.Bind(1, m.url);
    s.Bind(2, m.event);
    s.Bind(3, m.body);
    s.Bind(4, m.next_time_us);
    s.Bind(5, now_us);
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "enqueue webhook");
  }
  return OkStatus();
}

Status Store::Enqueue(const std::vector<OutboxMessage>& messages) {
  if (messages.empty()) return OkStatus();
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  STOKER_RETURN_IF_ERROR(InsertMessages(messages, clock_.NowMicros()));
  return txn.Commit();
}

Result<std::vector<OutboxMessage>> Store::OutboxHeads() {
  std::lock_guard lock(mu_);
  return SelectRows(
      db_,
      "SELECT id, url, event, body, attempts, next_time, create_time, last_error FROM outbox "
      "WHERE id IN (SELECT MIN(id) FROM outbox GROUP BY url) ORDER BY id",
      [](Stmt&) {},
      [](Stmt& s) {
        OutboxMessage m;
        m.id = s.Int(0);
        m.url = s.Text(1);
        m.event = s.Text(2);
        m.body = s.Text(3);
        m.attempts = static_cast<int>(s.Int(4));
        m.next_time_us = s.Int(5);
        m.create_time_us = s.Int(6);
        m.last_error = s.Text(7);
        return m;
      },
      "read the outbox");
}

Status Store::RemoveMessage(int64_t id) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "DELETE FROM outbox WHERE id = ?");
  s.Bind(1, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "remove webhook message");
  return OkStatus();
}

Status Store::RescheduleMessage(int64_t id, int attempts, int64_t next_time_us,
                                const std::string& last_error) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE outbox SET attempts = ?, next_time = ?, last_error = ? WHERE id = ?");
  s.Bind(1, static_cast<int64_t>(attempts));
  s.Bind(2, next_time_us);
  s.Bind(3, last_error);
  s.Bind(4, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "reschedule webhook message");
  return OkStatus();
}

}  // namespace stoker::store
