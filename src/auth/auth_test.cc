#include "auth/auth.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "auth/auth_store.h"
#include "common/files.h"
#include "common/time.h"

namespace stoker::auth {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/auth_test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(TokenTest, HasThePrefixAnd64HexDigitsAndDiffersEachTime) {
  auto a = NewToken();
  auto b = NewToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->substr(0, 4), "stk_");
  EXPECT_EQ(a->size(), 4u + 64u);
  EXPECT_TRUE(LooksLikeToken(*a));
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(LooksLikeToken("stk_" + std::string(64, 'G')));
  EXPECT_FALSE(LooksLikeToken("stk_abc"));
  EXPECT_FALSE(LooksLikeToken(""));
}

TEST(TokenTest, Sha256MatchesTheKnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(TokenId("abc"), "ba7816bf8f01");
}

TEST(TokenTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abcdef", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcdef", "abcdeg"));
  EXPECT_FALSE(ConstantTimeEquals("abcdef", "abcde"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(TokenTest, BearerTokenReadsTheAuthorizationHeader) {
  EXPECT_EQ(BearerToken("Bearer stk_1"), "stk_1");
  EXPECT_EQ(BearerToken("bearer   stk_1 "), "stk_1");
  EXPECT_EQ(BearerToken("Basic dXNlcjpwdw=="), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer "), std::nullopt);
  EXPECT_EQ(BearerToken(""), std::nullopt);
}

TEST(PushKeyTest, IsAnHmacPerStudyAndTrialAndSecret) {
  std::string key = TrialPushKey("s3cret", "4", "2");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, TrialPushKey("s3cret", "4", "2"));  // stable across restarts
  EXPECT_NE(key, TrialPushKey("s3cret", "4", "3"));
  EXPECT_NE(key, TrialPushKey("s3cret", "42", ""));  // "4/2" vs "42/": the separator counts
  EXPECT_NE(key, TrialPushKey("other", "4", "2"));
  // HMAC-SHA256 of "<study>/<trial>", as Python's hmac module computes it.
  EXPECT_EQ(TrialPushKey("Jefe", "what do ya want for nothing?", "x"),
            "230d51c92a3070a49171b051e8e50784d00d8a95b1fb772cc4b4734b7af93d11");
}

TEST(RoleTest, ParsesNamesAndNamesTheFieldOnError) {
  EXPECT_EQ(*ParseRole("admin", "role"), Role::kAdmin);
  EXPECT_EQ(*ParseRole("viewer", "role"), Role::kViewer);
  auto bad = ParseRole("root", "--role");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--role"), std::string::npos);
  EXPECT_NE(bad.status().message().find("admin, user or viewer"), std::string::npos);
}

TEST(RoleTest, ViewersReadOnlyUsersWriteOnlyAdminsManage) {
  EXPECT_TRUE(RoleAllows(Role::kViewer, Action::kRead));
  EXPECT_FALSE(RoleAllows(Role::kViewer, Action::kWrite));
  EXPECT_FALSE(RoleAllows(Role::kViewer, Action::kManage));
  EXPECT_TRUE(RoleAllows(Role::kUser, Action::kWrite));
  EXPECT_FALSE(RoleAllows(Role::kUser, Action::kManage));
  EXPECT_TRUE(RoleAllows(Role::kAdmin, Action::kManage));
}

TEST(RoleTest, UsersSeeAndChangeOnlyTheirOwnJobs) {
  Principal alice{"alice", Role::kUser, "", ""};
  Principal viewer{"vic", Role::kViewer, "", ""};
  Principal admin{"root", Role::kAdmin, "", ""};
  EXPECT_TRUE(CanSee(alice, "alice"));
  EXPECT_TRUE(CanChange(alice, "alice"));
  EXPECT_FALSE(CanSee(alice, "bob"));
  EXPECT_FALSE(CanChange(alice, "bob"));
  EXPECT_FALSE(CanSee(alice, ""));  // jobs from before users existed
  EXPECT_TRUE(CanSee(viewer, "bob"));
  EXPECT_FALSE(CanChange(viewer, "vic"));
  EXPECT_TRUE(CanChange(admin, "bob"));
  EXPECT_TRUE(CanChange(admin, ""));
}

TEST(UserNameTest, AcceptsUnixStyleNamesOnly) {
  EXPECT_TRUE(ValidateUserName("alice", "name").ok());
  EXPECT_TRUE(ValidateUserName("_svc-1.x", "name").ok());
  EXPECT_FALSE(ValidateUserName("", "name").ok());
  EXPECT_FALSE(ValidateUserName("Alice", "name").ok());
  EXPECT_FALSE(ValidateUserName("1abc", "name").ok());
  EXPECT_FALSE(ValidateUserName("a b", "name").ok());
  EXPECT_FALSE(ValidateUserName(std::string(65, 'a'), "name").ok());
}

TEST(TrainerAccountTest, NonRootDaemonRunsTrainersAsItself) {
  auto a = TrainerAccount({.daemon_is_root = false}, "alice");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, std::nullopt);
}

TEST(TrainerAccountTest, RootDaemonUsesTheMappedAccountElseTheDefault) {
  TrainerPolicy p{.daemon_is_root = true};
  EXPECT_EQ(**TrainerAccount(p, "alice"), "alice");
  EXPECT_EQ(**TrainerAccount(p, ""), "nobody");
  p.default_unix_user = "stoker-jobs";
  EXPECT_EQ(**TrainerAccount(p, ""), "stoker-jobs");
}

TEST(TrainerAccountTest, RefusesRootUnlessAllowed) {
  TrainerPolicy p{.daemon_is_root = true};
  auto denied = TrainerAccount(p, "root");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Code::kPermissionDenied);
  EXPECT_NE(denied.status().message().find("allow_root_trainers"), std::string::npos);
  p.allow_root_trainers = true;
  EXPECT_EQ(**TrainerAccount(p, "root"), "root");
}

class AuthStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = AuthStore::Open(dir_.path() / "stoker.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  TempDir dir_;
  std::unique_ptr<AuthStore> store_;
};

TEST_F(AuthStoreTest, IssuedTokensAuthenticateAsTheirUser) {
  ASSERT_TRUE(store_->AddUser({"alice", Role::kUser, "alice_unix"}).ok());
  auto t = store_->IssueToken("alice");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->id, TokenId(t->token));
  auto p = store_->Authenticate(t->token);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->user, "alice");
  EXPECT_EQ(p->role, Role::kUser);
  EXPECT_EQ(p->unix_user, "alice_unix");
  EXPECT_EQ(p->token_id, t->id);
}

TEST_F(AuthStoreTest, StoresOnlyTheHashOfTheToken) {
  ASSERT_TRUE(store_->AddUser({"alice", Role::kUser, ""}).ok());
  auto t = store_->IssueToken("alice");
  ASSERT_TRUE(t.ok());
  auto bytes = ReadFile(dir_.path() / "stoker.db");
  std::string all = bytes.ok() ? *bytes : "";
  for (const char* suffix : {"-wal"}) {
    auto more = ReadFile(dir_.path() / (std::string("stoker.db") + suffix));
    if (more.ok()) all += *more;
  }
  EXPECT_EQ(all.find(t->token.substr(4)), std::string::npos);
  EXPECT_NE(all.find(Sha256Hex(t->token)), std::string::npos);
}

TEST_F(AuthStoreTest, RejectsUnknownMalformedAndRevokedTokens) {
  ASSERT_TRUE(store_->AddUser({"alice", Role::kUser, ""}).ok());
  auto t = store_->IssueToken("alice");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(store_->Authenticate("nope").status().code(), Code::kNotFound);
  auto other = NewToken();
  EXPECT_EQ(store_->Authenticate(*other).status().code(), Code::kNotFound);
  ASSERT_TRUE(store_->RevokeToken(t->id).ok());
  auto r = store_->Authenticate(t->token);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message().find(t->token), std::string::npos);
  EXPECT_TRUE(store_->RevokeToken(t->id).ok());  // idempotent
  EXPECT_EQ(store_->RevokeToken("000000000000").code(), Code::kNotFound);
}

TEST_F(AuthStoreTest, RemovingAUserRevokesItsTokens) {
  ASSERT_TRUE(store_->AddUser({"bob", Role::kViewer, ""}).ok());
  auto t = store_->IssueToken("bob");
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(store_->RemoveUser("bob").ok());
  EXPECT_FALSE(store_->Authenticate(t->token).ok());
  // A new user of the same name does not inherit the old tokens.
  ASSERT_TRUE(store_->AddUser({"bob", Role::kAdmin, ""}).ok());
  EXPECT_FALSE(store_->Authenticate(t->token).ok());
  auto tokens = store_->ListTokens("bob");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_NE((*tokens)[0].revoke_time_us, 0);
  EXPECT_EQ(store_->RemoveUser("carol").code(), Code::kNotFound);
}

TEST_F(AuthStoreTest, UserNamesAreUniqueAndValidated) {
  ASSERT_TRUE(store_->AddUser({"alice", Role::kUser, ""}).ok());
  EXPECT_EQ(store_->AddUser({"alice", Role::kAdmin, ""}).code(), Code::kAlreadyExists);
  EXPECT_EQ(store_->AddUser({"Bad Name", Role::kUser, ""}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->IssueToken("ghost").status().code(), Code::kNotFound);
  auto users = store_->ListUsers();
  ASSERT_TRUE(users.ok());
  ASSERT_EQ(users->size(), 1u);
  EXPECT_EQ((*users)[0].role, Role::kUser);
}

TEST_F(AuthStoreTest, LocalAdminGetsAPrivateTokenFileOnce) {
  fs::path file = dir_.path() / "token";
  auto wrote = EnsureLocalAdmin(*store_, "me", file);
  ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();
  EXPECT_TRUE(*wrote);
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string token = *ReadFile(file);
  token.pop_back();
  auto p = store_->Authenticate(token);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->user, "me");
  EXPECT_EQ(p->role, Role::kAdmin);
  // A restart keeps the file and the token.
  EXPECT_FALSE(*EnsureLocalAdmin(*store_, "me", file));
  EXPECT_EQ(*ReadFile(file), token + "\n");
}

TEST_F(AuthStoreTest, LocalTokenFileIsReplacedWhenMissingRevokedOrExposed) {
  fs::path file = dir_.path() / "token";
  ASSERT_TRUE(EnsureLocalAdmin(*store_, "me", file).ok());
  std::string first = *ReadFile(file);
  first.pop_back();
  fs::remove(file);
  EXPECT_TRUE(*EnsureLocalAdmin(*store_, "me", file));
  std::string second = *ReadFile(file);
  second.pop_back();
  EXPECT_NE(first, second);
  ASSERT_TRUE(store_->RevokeToken(TokenId(second)).ok());
  EXPECT_TRUE(*EnsureLocalAdmin(*store_, "me", file));
  std::string third = *ReadFile(file);
  third.pop_back();
  EXPECT_TRUE(store_->Authenticate(third).ok());
  // World-readable: the token may have leaked, so it is revoked and replaced.
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  EXPECT_TRUE(*EnsureLocalAdmin(*store_, "me", file));
  EXPECT_FALSE(store_->Authenticate(third).ok());
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(AuthStoreTest, PushSecretIsMadeOnceAndKept) {
  auto first = store_->PushSecret();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(*store_->PushSecret(), *first);
  auto reopened = AuthStore::Open(dir_.path() / "stoker.db");
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(*(*reopened)->PushSecret(), *first);
}

TEST_F(AuthStoreTest, NoLocalTokenWhenTheAdminsChoseOtherUsers) {
  ASSERT_TRUE(store_->AddUser({"alice", Role::kAdmin, ""}).ok());
  fs::path file = dir_.path() / "token";
  auto wrote = EnsureLocalAdmin(*store_, "me", file);
  ASSERT_TRUE(wrote.ok());
  EXPECT_FALSE(*wrote);
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(AuthStoreTest, AUsersPriorityCeilingIsSetAndClearedBackToItsRoles) {
  ASSERT_TRUE(store_->AddUser({"alice", Role::kUser, ""}).ok());
  EXPECT_EQ(store_->GetUser("alice")->max_priority, std::nullopt);
  ASSERT_TRUE(store_->SetMaxPriority("alice", 500).ok());
  EXPECT_EQ(store_->GetUser("alice")->max_priority, 500);
  EXPECT_EQ((*store_->ListUsers())[0].max_priority, 500);
  ASSERT_TRUE(store_->SetMaxPriority("alice", std::nullopt).ok());
  EXPECT_EQ(store_->GetUser("alice")->max_priority, std::nullopt);
  EXPECT_EQ(store_->SetMaxPriority("ghost", 1).code(), Code::kNotFound);
}

// A store written before users had a priority ceiling gains the column and
// keeps its users and tokens.
TEST(AuthStoreMigrationTest, AStoreWithoutMaxPriorityGainsTheColumn) {
  TempDir dir;
  const fs::path db_file = dir.path() / "stoker.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_file.c_str(), &db), SQLITE_OK);
    const char* old_schema = R"sql(
      CREATE TABLE users (name TEXT PRIMARY KEY, role TEXT NOT NULL,
                          unix_user TEXT NOT NULL DEFAULT '', create_time_us INTEGER NOT NULL);
      INSERT INTO users VALUES ('alice', 'user', '', 1);
    )sql";
    ASSERT_EQ(sqlite3_exec(db, old_schema, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = AuthStore::Open(db_file);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto alice = (*store)->GetUser("alice");
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  EXPECT_EQ(alice->max_priority, std::nullopt);
  ASSERT_TRUE((*store)->SetMaxPriority("alice", 7).ok());
  // Opening it again (the column is there now) changes nothing.
  store->reset();
  auto again = AuthStore::Open(db_file);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->GetUser("alice")->max_priority, 7);
}

class ConsoleSessionStoreTest : public AuthStoreTest {
 protected:
  void SetUp() override {
    AuthStoreTest::SetUp();
    ASSERT_TRUE(store_->AddUser({"alice", Role::kUser, "alice_unix"}).ok());
    token_ = store_->IssueToken("alice")->token;
    alice_ = *store_->Authenticate(token_);
  }
  std::string Open(int64_t lifetime_us = 3'600'000'000) {
    auto id = store_->OpenConsoleSession(alice_, NowMicros() + lifetime_us);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : "";
  }
  std::string token_;
  Principal alice_;
};

TEST_F(ConsoleSessionStoreTest, ASessionIdIsRandomAndStandsForItsUser) {
  std::string a = Open(), b = Open();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find(token_.substr(4)), std::string::npos);
  auto p = store_->AuthenticateConsoleSession(a);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->user, "alice");
  EXPECT_EQ(p->role, Role::kUser);
  EXPECT_EQ(p->unix_user, "alice_unix");
  EXPECT_EQ(p->token_id, TokenId(token_));
  EXPECT_EQ(store_->AuthenticateConsoleSession(std::string(64, '0')).status().code(),
            Code::kNotFound);
  EXPECT_EQ(store_->AuthenticateConsoleSession("short").status().code(), Code::kNotFound);
}

TEST_F(ConsoleSessionStoreTest, OnlyTheHashOfASessionIdIsStored) {
  std::string id = Open();
  std::string all;
  for (const char* name : {"stoker.db", "stoker.db-wal"}) {
    auto bytes = ReadFile(dir_.path() / name);
    if (bytes.ok()) all += *bytes;
  }
  EXPECT_EQ(all.find(id), std::string::npos);
  EXPECT_NE(all.find(Sha256Hex(id)), std::string::npos);
}

TEST_F(ConsoleSessionStoreTest, SignOutAndExpiryEndASession) {
  std::string id = Open(), other = Open();
  ASSERT_TRUE(store_->CloseConsoleSession(id).ok());
  EXPECT_EQ(store_->AuthenticateConsoleSession(id).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->AuthenticateConsoleSession(other).ok());  // only that one
  EXPECT_TRUE(store_->CloseConsoleSession(id).ok());            // again: fine
  std::string expired = Open(/*lifetime_us=*/-1);
  EXPECT_EQ(store_->AuthenticateConsoleSession(expired).status().code(), Code::kNotFound);
}

TEST_F(ConsoleSessionStoreTest, RevokingAnyTokenOfTheUserEndsAllItsSessions) {
  std::string id = Open();
  // A second token of alice's, and bob's session beside hers.
  auto second = store_->IssueToken("alice");
  ASSERT_TRUE(store_->AddUser({"bob", Role::kUser, ""}).ok());
  std::string bob_token = store_->IssueToken("bob")->token;
  auto bob =
      store_->OpenConsoleSession(*store_->Authenticate(bob_token), NowMicros() + 1'000'000'000);
  ASSERT_TRUE(bob.ok());
  ASSERT_TRUE(store_->RevokeToken(second->id).ok());
  EXPECT_EQ(store_->AuthenticateConsoleSession(id).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->AuthenticateConsoleSession(*bob).ok());
  // Removing a user ends its sessions too.
  ASSERT_TRUE(store_->RemoveUser("bob").ok());
  EXPECT_FALSE(store_->AuthenticateConsoleSession(*bob).ok());
  ASSERT_TRUE(store_->AddUser({"bob", Role::kUser, ""}).ok());
  EXPECT_FALSE(store_->AuthenticateConsoleSession(*bob).ok());
}

}  // namespace
}  // namespace stoker::auth
