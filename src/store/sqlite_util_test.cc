// The statement cache: a statement run again is the one kept, reset and
// unbound; two of one text at once each work; the cache keeps one per text.
#include "store/sqlite_util.h"

#include <gtest/gtest.h>

namespace stoker::store::sqlite_util {
namespace {

int LiveStatements(sqlite3* db) {
  int n = 0;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db, nullptr); s; s = sqlite3_next_stmt(db, s)) ++n;
  return n;
}

class StatementCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK); }
  void TearDown() override { sqlite3_close(db_); }
  sqlite3* db_ = nullptr;
};

TEST_F(StatementCacheTest, AStatementRunAgainIsTheKeptOneResetAndUnbound) {
  StatementCache cache(db_);
  EXPECT_EQ(StatementCache::Of(db_), &cache);
  {
    Stmt s(db_, "SELECT ?");
    s.Bind(1, int64_t{5});
    ASSERT_EQ(s.Step(), SQLITE_ROW);
    EXPECT_EQ(s.Int(0), 5);
  }  // mid-result: given back reset
  EXPECT_EQ(LiveStatements(db_), 1);
  {
    Stmt s(db_, "SELECT ?");
    EXPECT_EQ(LiveStatements(db_), 1);  // not prepared again
    ASSERT_EQ(s.Step(), SQLITE_ROW);
    EXPECT_TRUE(s.IsNull(0));  // the last use's binding is gone
  }
}

TEST_F(StatementCacheTest, TwoOfOneTextAtOnceEachWorkAndOneIsKept) {
  StatementCache cache(db_);
  {
    Stmt a(db_, "SELECT ?");
    Stmt b(db_, "SELECT ?");
    a.Bind(1, int64_t{1});
    b.Bind(1, int64_t{2});
    ASSERT_EQ(a.Step(), SQLITE_ROW);
    ASSERT_EQ(b.Step(), SQLITE_ROW);
    EXPECT_EQ(a.Int(0), 1);
    EXPECT_EQ(b.Int(0), 2);
  }
  EXPECT_EQ(LiveStatements(db_), 1);
}

TEST_F(StatementCacheTest, WithoutACacheAStatementIsFinalizedAndTheCacheFinalizesAtItsEnd) {
  {
    Stmt s(db_, "SELECT 1");
    ASSERT_TRUE(s.prepared());
  }
  EXPECT_EQ(LiveStatements(db_), 0);
  {
    StatementCache cache(db_);
    Stmt s(db_, "SELECT 1");
  }
  EXPECT_EQ(StatementCache::Of(db_), nullptr);
  EXPECT_EQ(LiveStatements(db_), 0);  // sqlite3_close in TearDown succeeds
}

}  // namespace
}  // namespace stoker::store::sqlite_util
