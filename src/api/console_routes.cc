// The web console (docs/console.md): its static files and its sign-in.
//   GET  /, /index.html, /console/{file}  the page, scripts and styles (no token:
//                                        they hold no data; the data comes from
//                                        the API with the session cookie)
//   POST /console/session   body {"token"} or {"link"} (a one-time sign-in link's
//                           code, console_links.h): opens a session kept by
//                           stokerd, sets its id in the cookie, answers
//                           {"user","role","csrf"}
//   GET  /console/session   with the cookie: {"user","role","csrf"} (a reload)
//   POST /console/signout   ends the session and deletes the cookie
//   POST /v1/stoker/console:signInLink  (with a token, through the API's
//                           authentication) a one-time link for the caller:
//                           {"code","path","expireTime","user"}
// Every answer carries a Content-Security-Policy that allows only this
// origin's own script and style files, and forbids framing.
#include <cctype>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "api/console_assets.h"
#include "api/console_links.h"
#include "api/console_session.h"
#include "api/routes.h"
#include "auth/auth.h"
#include "common/time.h"

namespace stoker::api {
namespace {

using nlohmann::json;

constexpr char kCsp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

void AddSecurityHeaders(http::Response& r) {
  r.headers["Content-Security-Policy"] = kCsp;
  r.headers["X-Frame-Options"] = "DENY";
  r.headers["X-Content-Type-Options"] = "nosniff";
  r.headers["Referrer-Policy"] = "no-referrer";
}

std::string ContentType(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

struct Asset {
  std::string_view data;
  std::string content_type;
  std::string etag;
};

// The embedded files by name, with their ETags (a hash of the bytes), built once.
const std::unordered_map<std::string_view, Asset>& Assets() {
  static const auto* assets = [] {
    auto* m = new std::unordered_map<std::string_view, Asset>;
    for (const EmbeddedFile& f : ConsoleFiles()) {
      (*m)[f.name] = {f.data, ContentType(f.name),
                      "\"" + auth::Sha256Hex(f.data).substr(0, 20) + "\""};
    }
    return m;
  }();
  return *assets;
}

// A file: revalidated on every use (no-cache) and answered 304 when the
// browser's copy is current, so a new stokerd never serves a stale script.
http::Response ServeFile(const http::Request& req, std::string_view name) {
  auto it = Assets().find(name);
  if (it == Assets().end()) {
    return Error(NotFound("the console has no file '" + std::string(name) + "'"));
  }
  http::Response r;
  r.content_type = it->second.content_type;
  r.headers["ETag"] = it->second.etag;
  r.headers["Cache-Control"] = "no-cache";
  auto inm = req.headers.find("if-none-match");
  if (inm != req.headers.end() && inm->second == it->second.etag) {
    r.status = 304;
    r.content_type.clear();
  } else {
    r.body = std::string(it->second.data);
  }
  return r;
}

// 401 UNAUTHENTICATED with `message` (no WWW-Authenticate: a browser must not
// offer its own sign-in dialog).
http::Response ConsoleUnauthenticated(const std::string& message) {
  return Json({{"error", {{"code", 401}, {"message", message}, {"status", "UNAUTHENTICATED"}}}},
              401);
}

http::Response SessionAnswer(const ApiDeps& d, const auth::Principal& p,
                             const console::Session& s) {
  return Json({{"user", p.user},
               {"role", std::string(auth::RoleName(p.role))},
               {"csrf", console::CsrfValue(d.push_secret, s)}});
}

// Opens a console session for `caller` and answers it with its cookie. The
// session is read back as every later request reads it (its token not
// revoked, its user's current role): a sign-in link redeemed after its
// token was revoked opens nothing.
http::Response OpenSession(const ApiDeps& d, const auth::Principal& caller, bool secure) {
  const int64_t lifetime = d.auth_policy.console_session_seconds;
  auto id = d.auth->OpenConsoleSession(caller, NowMicros() + lifetime * 1'000'000);
  if (!id.ok()) return Error(id.status());
  auto who = d.auth->AuthenticateConsoleSession(*id);
  if (!who.ok()) {
    (void)d.auth->CloseConsoleSession(*id);
    if (who.status().code() == Code::kNotFound)
      return ConsoleUnauthenticated(who.status().message());
    return Error(who.status());
  }
  console::Session session{*id};
  http::Response r = SessionAnswer(d, *who, session);
  r.headers["Set-Cookie"] = console::SetCookieValue(session, secure, lifetime);
  return r;
}

// A one-time link's code (console_links.h): a session for the user it was
// issued to, once.
http::Response SignInWithLink(const ApiDeps& d, const std::string& code, bool secure) {
  std::optional<auth::Principal> who = d.signin_links ? d.signin_links->Redeem(code) : std::nullopt;
  if (!who) {
    return ConsoleUnauthenticated(
        "this sign-in link was used already or is older than two minutes; run 'stoker console' "
        "for a new one, or sign in with a token");
  }
  return OpenSession(d, *who, secure);
}

http::Response SignIn(const ApiDeps& d, const http::Request& req, bool secure) {
  if (Status s = console::CheckSameOrigin(req); !s.ok()) return Error(s);
  // A form of another site cannot send JSON without a preflight stokerd never grants.
  auto type = req.headers.find("content-type");
  if (type == req.headers.end() || type->second.rfind("application/json", 0) != 0) {
    return Error(InvalidArgument("sign-in: send Content-Type: application/json"));
  }
  if (d.push_secret.empty()) {
    return Error(FailedPrecondition("this stokerd has no session secret; the console is off"));
  }
  json body = json::parse(req.body, nullptr, false);
  if (body.is_object() && body.contains("link")) {
    if (!body["link"].is_string()) return Error(InvalidArgument("link: a sign-in link's code"));
    return SignInWithLink(d, body["link"].get<std::string>(), secure);
  }
  if (!body.is_object() || !body["token"].is_string() || body["token"].get<std::string>().empty()) {
    return Error(InvalidArgument("token: paste a Stoker API token (stk_...)"));
  }
  std::string token = body["token"].get<std::string>();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token[0]))) token.erase(0, 1);
  if (!auth::LooksLikeToken(token)) {
    return Error(InvalidArgument(
        "token: not a Stoker token (stk_ and 64 hex digits); an admin issues one with "
        "'stoker admin users token NAME', and the local admin's is in stokerd's data dir"));
  }
  auto caller = d.auth->Authenticate(token);
  if (!caller.ok()) {
    if (caller.status().code() == Code::kNotFound)
      return ConsoleUnauthenticated(caller.status().message());
    return Error(caller.status());
  }
  return OpenSession(d, *caller, secure);
}

std::optional<console::Session> CookieSession(const http::Request& req) {
  auto cookie = req.headers.find("cookie");
  if (cookie == req.headers.end()) return std::nullopt;
  return console::SessionFromCookieHeader(cookie->second);
}

// Ends the cookie's session (if any) and deletes the cookie.
http::Response SignOut(const ApiDeps& d, const http::Request& req, bool secure) {
  if (Status s = console::CheckSameOrigin(req); !s.ok()) return Error(s);
  if (auto session = CookieSession(req)) {
    if (Status s = d.auth->CloseConsoleSession(session->id); !s.ok()) return Error(s);
  }
  http::Response r = Json(json::object());
  r.headers["Set-Cookie"] = console::ClearCookieValue(secure);
  return r;
}

http::Response CurrentSession(const ApiDeps& d, const http::Request& req) {
  std::optional<console::Session> session = CookieSession(req);
  http::Response unsigned_in = ConsoleUnauthenticated("not signed in");
  if (!session) return unsigned_in;
  if (Status s = console::CheckCookieRequest(req, ""); !s.ok()) return Error(s);
  auto caller = d.auth->AuthenticateConsoleSession(session->id);
  if (!caller.ok()) return unsigned_in;
  return SessionAnswer(d, *caller, *session);
}

}  // namespace

std::optional<http::Response> HandleConsoleLinkRoutes(const ApiDeps& d, const http::Request& req,
                                                      const auth::Principal& caller) {
  if (req.path != kSignInLinkPath) return std::nullopt;
  if (req.method != "POST") {
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path +
                                 "; POST asks for a sign-in link"));
  }
  if (!d.signin_links) return Error(FailedPrecondition("this stokerd issues no sign-in links"));
  auto link = d.signin_links->Issue(caller);
  if (!link.ok()) return Error(link.status());
  return Json({{"code", link->code},
               {"path", "/console/signin.html#code=" + link->code},
               {"expireTime", FormatRfc3339(link->expire_time_us)},
               {"user", caller.user}});
}

std::optional<http::Response> HandleConsoleRoutes(const ApiDeps& d, const http::Request& req) {
  const std::string& path = req.path;
  if (path != "/" && path != "/index.html" && path.rfind("/console/", 0) != 0) return std::nullopt;
  const bool secure = console::SecureRequest(req, d.tls);
  http::Response r;
  if (path == "/console/session" && req.method == "POST") {
    r = SignIn(d, req, secure);
  } else if (path == "/console/session" && req.method == "GET") {
    r = CurrentSession(d, req);
  } else if (path == "/console/signout" && req.method == "POST") {
    r = SignOut(d, req, secure);
  } else if (req.method != "GET" && req.method != "HEAD") {
    r = Error(InvalidArgument("method " + req.method + " is not supported on " + path));
  } else if (path == "/" || path == "/index.html") {
    r = ServeFile(req, "index.html");
  } else {
    r = ServeFile(req, std::string_view(path).substr(std::string_view("/console/").size()));
  }
  r.headers["Cache-Control"] = r.headers.count("ETag") ? "no-cache" : "no-store";
  AddSecurityHeaders(r);
  return r;
}

}  // namespace stoker::api
