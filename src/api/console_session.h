// The web console's sign-in session (docs/console.md, docs/decisions/0021
// and 0036): what a browser keeps in its cookie, and when a request that
// carries that cookie may act. Pure functions: no I/O, no store.
//
// The cookie holds only a session id: 32 random bytes (getrandom) as 64 hex
// digits, drawn at sign-in. stokerd keeps the session (its user, the token
// it was opened with, its expiry) in the store under the id's SHA-256
// (auth::AuthStore::OpenConsoleSession); the API token never reaches the
// cookie. Sign-out ends the session; revoking a token of its user, removing
// the user or the session's expiry end it too. The cookie is HttpOnly
// (page scripts never see the id), SameSite=Strict (browsers do not send it
// on requests started by other sites), Secure when the browser reached
// stokerd over HTTPS, and lasts no longer than the session.
//
// Against cross-site requests, on top of SameSite: a cookie request whose
// Origin header names another host, or whose Sec-Fetch-Site says another
// site sent it, is refused; a cookie request that changes anything (any
// method but GET and HEAD) must carry the header X-Stoker-CSRF with the
// session's CSRF value, HMAC-SHA256(secret, session id), which the page
// receives from the sign-in answer. A page of another origin can neither
// read that value (stokerd sends no CORS headers) nor send a custom header
// cross-origin without a preflight that stokerd never grants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "http/http.h"

namespace stoker::api::console {

inline constexpr std::string_view kCookieName = "stoker_session";
inline constexpr std::string_view kCsrfHeader = "x-stoker-csrf";  // lower-cased, as http::Request

struct Session {
  std::string id;  // 64 lower-case hex digits
};

// The session in a Cookie header value ("a=1; stoker_session=...; b=2");
// nullopt when there is none or it is malformed.
std::optional<Session> SessionFromCookieHeader(std::string_view cookie_header);

// The session's CSRF value: lower-case hex HMAC-SHA256(secret,
// "stoker-console-csrf\n<session id>").
std::string CsrfValue(std::string_view secret, const Session& session);

// The Set-Cookie value that stores `session` for `max_age_seconds` (the
// session's lifetime; Path=/, HttpOnly, SameSite=Strict, Secure when
// `secure`), and the one that deletes it.
std::string SetCookieValue(const Session& session, bool secure, int64_t max_age_seconds);
std::string ClearCookieValue(bool secure);

// Whether the browser reached stokerd over HTTPS: stokerd serves TLS itself
// (`tls`), or a proxy in front says so with X-Forwarded-Proto: https.
bool SecureRequest(const http::Request& req, bool tls);

// Whether `req` comes from a page of stokerd's own origin as far as its
// headers tell: OK when it has no Origin header or one whose host[:port] is
// the Host header, and no Sec-Fetch-Site or one of "same-origin", "none".
// PermissionDenied saying which header disagreed otherwise.
Status CheckSameOrigin(const http::Request& req);

// Whether a request that carries the session cookie (and no Authorization
// header) may use it: CheckSameOrigin, and for every method but GET and
// HEAD the X-Stoker-CSRF header equal to `expected_csrf` (compared in
// constant time). PermissionDenied naming what is missing otherwise.
Status CheckCookieRequest(const http::Request& req, std::string_view expected_csrf);

}  // namespace stoker::api::console
