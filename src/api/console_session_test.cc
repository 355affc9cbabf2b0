// The console's cookie and CSRF rules: the pure decisions, then the real
// handler (store, auth store, admission on a temp dir) answering cookie
// requests beside bearer ones.
#include "api/console_session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "api/api.h"
#include "api/control_plane.h"

namespace stoker::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kId(64, 'a');

http::Request Req(const std::string& method, std::map<std::string, std::string> headers) {
  http::Request r;
  r.method = method;
  r.path = "/v1/projects/p/locations/l/customJobs/1:cancel";
  r.headers = std::move(headers);
  return r;
}

TEST(ConsoleSessionTest, ReadsItsCookieAmongOthers) {
  auto s = console::SessionFromCookieHeader("a=1; stoker_session=" + kId + "; b=2");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->id, kId);
  EXPECT_FALSE(console::SessionFromCookieHeader("a=1; b=2"));
  EXPECT_FALSE(console::SessionFromCookieHeader("stoker_session=" + kId.substr(1)));
  EXPECT_FALSE(console::SessionFromCookieHeader("stoker_session=" + kId + "0"));
  EXPECT_FALSE(console::SessionFromCookieHeader("stoker_session=" + std::string(64, 'A')));
  // The old form (token.nonce) is no session.
  EXPECT_FALSE(
      console::SessionFromCookieHeader("stoker_session=stk_" + kId + "." + std::string(32, 'b')));
}

TEST(ConsoleSessionTest, CookieIsHttpOnlyStrictLastsTheSessionAndSecureOnlyOverTls) {
  console::Session s{kId};
  std::string plain = console::SetCookieValue(s, false, 43200);
  EXPECT_EQ(plain.rfind("stoker_session=" + kId + ";", 0), 0u);
  EXPECT_NE(plain.find("Max-Age=43200"), std::string::npos);
  EXPECT_NE(plain.find("HttpOnly"), std::string::npos);
  EXPECT_NE(plain.find("SameSite=Strict"), std::string::npos);
  EXPECT_EQ(plain.find("Secure"), std::string::npos);
  EXPECT_NE(console::SetCookieValue(s, true, 1).find("; Secure"), std::string::npos);
  EXPECT_NE(console::ClearCookieValue(false).find("Max-Age=0"), std::string::npos);
  EXPECT_TRUE(console::SecureRequest(Req("GET", {{"x-forwarded-proto", "https"}}), false));
  EXPECT_FALSE(console::SecureRequest(Req("GET", {}), false));
}

TEST(ConsoleSessionTest, CsrfValueDependsOnSecretAndSessionId) {
  console::Session s{kId};
  std::string v = console::CsrfValue("secret", s);
  EXPECT_EQ(v.size(), 64u);
  EXPECT_EQ(v, console::CsrfValue("secret", s));
  EXPECT_NE(v, console::CsrfValue("other", s));
  EXPECT_NE(v, console::CsrfValue("secret", {std::string(64, 'c')}));
}

TEST(ConsoleSessionTest, WritesNeedTheCsrfHeader) {
  const std::string csrf = "c0ffee";
  EXPECT_EQ(console::CheckCookieRequest(Req("POST", {}), csrf).code(), Code::kPermissionDenied);
  EXPECT_EQ(console::CheckCookieRequest(Req("POST", {{"x-stoker-csrf", "c0ffef"}}), csrf).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(console::CheckCookieRequest(Req("DELETE", {{"x-stoker-csrf", ""}}), csrf).code(),
            Code::kPermissionDenied);
  EXPECT_TRUE(console::CheckCookieRequest(Req("POST", {{"x-stoker-csrf", csrf}}), csrf).ok());
  // An empty expected value never matches.
  EXPECT_FALSE(console::CheckCookieRequest(Req("POST", {{"x-stoker-csrf", ""}}), "").ok());
  EXPECT_TRUE(console::CheckCookieRequest(Req("GET", {}), csrf).ok());
}

TEST(ConsoleSessionTest, RefusesOtherOrigins) {
  const std::string csrf = "c0ffee";
  auto with = [&](std::map<std::string, std::string> h) {
    h["x-stoker-csrf"] = csrf;
    h["host"] = "stoker.example:8080";
    return console::CheckCookieRequest(Req("POST", h), csrf);
  };
  EXPECT_TRUE(with({{"origin", "https://stoker.example:8080"}}).ok());
  EXPECT_TRUE(with({{"origin", "http://STOKER.example:8080"}}).ok());
  EXPECT_FALSE(with({{"origin", "https://evil.example"}}).ok());
  EXPECT_FALSE(with({{"origin", "https://stoker.example:8081"}}).ok());
  EXPECT_FALSE(with({{"origin", "null"}}).ok());
  EXPECT_FALSE(with({{"sec-fetch-site", "cross-site"}}).ok());
  EXPECT_FALSE(with({{"sec-fetch-site", "same-site"}}).ok());
  EXPECT_TRUE(with({{"sec-fetch-site", "same-origin"}}).ok());
  // Reads too: a page of another origin gets nothing with the cookie.
  EXPECT_FALSE(console::CheckCookieRequest(
                   Req("GET", {{"origin", "https://evil.example"}, {"host", "a:1"}}), csrf)
                   .ok());
}

class FakeControlPlane final : public ControlPlane {
 public:
  void Submitted(const store::JobRecord&) override {}
  void SubmitFailed(int64_t) override {}
  void CancelRequested(int64_t job_id) override { cancelled.push_back(job_id); }
  void StudySubmitted(int64_t) override {}
  void StudyCancelRequested(int64_t) override {}
  std::vector<QueueEntry> Queue() const override { return {}; }
  json Nodes() const override { return {{"nodes", json::array()}}; }
  std::vector<int64_t> cancelled;
};

class ConsoleHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_ = std::move(store::Store::Open(dir_)).value();
    auth_ = std::move(auth::AuthStore::Open(dir_ / "stoker.db")).value();
    handler_ = MakeHandler(
        {store_.get(), &buckets_, nullptr, nullptr, &control_, auth_.get(), "push-secret"});
    ASSERT_TRUE(auth_->AddUser({"ada", auth::Role::kUser, "", 0}).ok());
    ASSERT_TRUE(auth_->AddUser({"val", auth::Role::kViewer, "", 0}).ok());
    ada_ = auth_->IssueToken("ada")->token;
    val_ = auth_->IssueToken("val")->token;
    store::NewJob job;
    job.project = "p";
    job.location = "l";
    job.user = "ada";
    job.display_name = "j";
    job.spec = json::object();
    job_ = store_->CreateJob(job)->id;
  }
  void TearDown() override { fs::remove_all(dir_); }

  http::Response Call(const std::string& method, const std::string& path,
                      std::map<std::string, std::string> headers, const std::string& body = "") {
    http::Request r;
    r.method = method;
    r.path = path;
    r.target = path;
    r.body = body;
    r.headers = std::move(headers);
    r.headers["host"] = "127.0.0.1:8080";
    return handler_(r);
  }
  // Signs in with `token`: {cookie header value, csrf}.
  std::pair<std::string, std::string> SignIn(const std::string& token) {
    http::Response r = Call("POST", "/console/session", {{"content-type", "application/json"}},
                            json({{"token", token}}).dump());
    EXPECT_EQ(r.status, 200) << r.body;
    std::string set = r.headers["Set-Cookie"];
    return {set.substr(0, set.find(';')), json::parse(r.body)["csrf"]};
  }
  std::string Cancel() {
    return "/v1/projects/p/locations/l/customJobs/" + std::to_string(job_) + ":cancel";
  }

  fs::path dir_ = fs::temp_directory_path() / ("stoker_console_test_" + std::to_string(getpid()));
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<auth::AuthStore> auth_;
  storage::Buckets buckets_{dir_, {}};
  FakeControlPlane control_;
  http::Handler handler_;
  std::string ada_, val_;
  int64_t job_ = 0;
};

TEST_F(ConsoleHandlerTest, ServesThePageWithoutATokenAndWithItsPolicy) {
  http::Response r = Call("GET", "/", {});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.headers["Content-Security-Policy"].find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_EQ(r.headers["X-Frame-Options"], "DENY");
  EXPECT_EQ(r.headers.count("Access-Control-Allow-Origin"), 0u);
  http::Response js = Call("GET", "/console/app.js", {});
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(Call("GET", "/console/app.js", {{"if-none-match", js.headers["ETag"]}}).status, 304);
  EXPECT_EQ(Call("GET", "/console/nope.js", {}).status, 404);
}

TEST_F(ConsoleHandlerTest, ABadTokenAtSignInIsRefusedWithAMessage) {
  http::Response r = Call("POST", "/console/session", {{"content-type", "application/json"}},
                          json({{"token", "stk_" + std::string(64, '0')}}).dump());
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers.count("Set-Cookie"), 0u);
  r = Call("POST", "/console/session", {{"content-type", "application/json"}},
           json({{"token", "hello"}}).dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("stk_"), std::string::npos);
  // A form post of another site (no JSON content type) never signs anyone in.
  r = Call("POST", "/console/session", {{"content-type", "application/x-www-form-urlencoded"}},
           "token=" + ada_);
  EXPECT_EQ(r.status, 400);
}

TEST_F(ConsoleHandlerTest, CookieWritesNeedTheCsrfHeaderAndBearerIsUnaffected) {
  auto [cookie, csrf] = SignIn(ada_);
  // Reads with the cookie alone.
  EXPECT_EQ(Call("GET", "/v1/projects/p/locations/l/customJobs", {{"cookie", cookie}}).status, 200);
  EXPECT_EQ(Call("GET", "/console/session", {{"cookie", cookie}}).status, 200);
  // A write without the header, with a wrong one, or from another origin: 403.
  EXPECT_EQ(Call("POST", Cancel(), {{"cookie", cookie}}).status, 403);
  EXPECT_EQ(Call("POST", Cancel(), {{"cookie", cookie}, {"x-stoker-csrf", "x"}}).status, 403);
  EXPECT_EQ(Call("POST", Cancel(),
                 {{"cookie", cookie}, {"x-stoker-csrf", csrf}, {"origin", "https://evil.example"}})
                .status,
            403);
  EXPECT_TRUE(control_.cancelled.empty());
  http::Response ok =
      Call("POST", Cancel(),
           {{"cookie", cookie}, {"x-stoker-csrf", csrf}, {"origin", "http://127.0.0.1:8080"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(control_.cancelled.size(), 1u);
  // A bearer request needs no CSRF header, cookie or not.
  EXPECT_EQ(
      Call("GET", "/v1/projects/p/locations/l/customJobs", {{"authorization", "Bearer " + ada_}})
          .status,
      200);
}

TEST_F(ConsoleHandlerTest, AViewersCookieCannotCancel) {
  auto [cookie, csrf] = SignIn(val_);
  http::Response r = Call("POST", Cancel(), {{"cookie", cookie}, {"x-stoker-csrf", csrf}});
  EXPECT_EQ(r.status, 403);
  EXPECT_TRUE(control_.cancelled.empty());
}

TEST_F(ConsoleHandlerTest, ARevokedTokenEndsItsSessions) {
  auto [cookie, csrf] = SignIn(ada_);
  ASSERT_TRUE(auth_->RevokeToken(auth::TokenId(ada_)).ok());
  EXPECT_EQ(Call("GET", "/console/session", {{"cookie", cookie}}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/projects/p/locations/l/customJobs", {{"cookie", cookie}}).status, 401);
}

TEST_F(ConsoleHandlerTest, TheCookieHoldsASessionIdNeverTheToken) {
  auto [cookie, csrf] = SignIn(ada_);
  EXPECT_EQ(cookie.find(ada_.substr(4, 16)), std::string::npos);
  EXPECT_EQ(cookie.size(), std::string("stoker_session=").size() + 64);
  // Each sign-in is a session of its own.
  EXPECT_NE(SignIn(ada_).first, cookie);
}

TEST_F(ConsoleHandlerTest, SignOutEndsTheSessionAndDeletesTheCookie) {
  auto [cookie, csrf] = SignIn(ada_);
  auto [other, other_csrf] = SignIn(ada_);
  http::Response r =
      Call("POST", "/console/signout", {{"cookie", cookie}, {"x-stoker-csrf", csrf}});
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.headers["Set-Cookie"].find("Max-Age=0"), std::string::npos);
  // A copy of the old cookie opens nothing; the other session goes on.
  EXPECT_EQ(Call("GET", "/console/session", {{"cookie", cookie}}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/projects/p/locations/l/customJobs", {{"cookie", cookie}}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/projects/p/locations/l/customJobs", {{"cookie", other}}).status, 200);
  // The bearer token is not revoked by a sign-out.
  EXPECT_EQ(
      Call("GET", "/v1/projects/p/locations/l/customJobs", {{"authorization", "Bearer " + ada_}})
          .status,
      200);
  // Without a cookie, signing out only deletes it.
  EXPECT_EQ(Call("POST", "/console/signout", {}).status, 200);
}

// The console's jobs list: newest first, paged, filtered by owner.
TEST_F(ConsoleHandlerTest, ListsNewestFirstByOwnerWithOrderBy) {
  for (const char* user : {"val", "ada", "val", "ada"}) {
    store::NewJob job{.project = "p", .location = "l", .display_name = "x", .spec = json::object()};
    job.user = user;
    ASSERT_TRUE(store_->CreateJob(job).ok());
  }
  auto list = [&](const std::string& query) {
    http::Request r;
    r.method = "GET";
    r.path = "/v1/projects/p/locations/l/customJobs";
    r.headers["authorization"] = "Bearer " + val_;
    for (size_t at = 0; at < query.size();) {
      size_t amp = query.find('&', at), eq = query.find('=', at);
      if (amp == std::string::npos) amp = query.size();
      r.query[query.substr(at, eq - at)] = query.substr(eq + 1, amp - eq - 1);
      at = amp + 1;
    }
    http::Response resp = handler_(r);
    EXPECT_EQ(resp.status, 200) << resp.body;
    std::vector<std::string> ids;
    const json body = json::parse(resp.body);
    for (const json& j : body["customJobs"]) {
      std::string name = j["name"];
      ids.push_back(name.substr(name.rfind('/') + 1));
    }
    return std::make_pair(ids, body.value("nextPageToken", ""));
  };
  // Jobs 1 (ada, from SetUp) to 5.
  auto [first, token] = list("orderBy=create_time desc&pageSize=2");
  EXPECT_EQ(first, (std::vector<std::string>{"5", "4"}));
  ASSERT_EQ(token, "4");
  EXPECT_EQ(list("orderBy=create_time desc&pageSize=2&pageToken=4").first,
            (std::vector<std::string>{"3", "2"}));
  EXPECT_EQ(list("orderBy=create_time").first, (std::vector<std::string>{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(list("orderBy=create_time desc&filter=user=ada").first,
            (std::vector<std::string>{"5", "3", "1"}));
  http::Request bad;
  bad.method = "GET";
  bad.path = "/v1/projects/p/locations/l/customJobs";
  bad.query["orderBy"] = "display_name";
  bad.headers["authorization"] = "Bearer " + val_;
  http::Response r = handler_(bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("orderBy"), std::string::npos);
}

}  // namespace
}  // namespace stoker::api
