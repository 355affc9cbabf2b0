#include "api/console_session.h"

#include <cctype>
#include <cstdlib>

#include "auth/auth.h"

namespace stoker::api::console {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Header(const http::Request& req, const char* name) {
  auto it = req.headers.find(name);
  return it == req.headers.end() ? std::string() : it->second;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string CookieAttributes(bool secure) {
  return std::string("; Path=/; HttpOnly; SameSite=Strict") + (secure ? "; Secure" : "");
}

}  // namespace

std::optional<Session> SessionFromCookieHeader(std::string_view header) {
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = Trim(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || Trim(pair.substr(0, eq)) != kCookieName) continue;
    std::string_view value = Trim(pair.substr(eq + 1));
    if (value.size() != 64 || !IsLowerHex(value)) return std::nullopt;
    return Session{std::string(value)};
  }
  return std::nullopt;
}

std::string CsrfValue(std::string_view secret, const Session& session) {
  return auth::HmacSha256Hex(secret, "stoker-console-csrf\n" + session.id);
}

std::string SetCookieValue(const Session& session, bool secure, int64_t max_age_seconds) {
  return std::string(kCookieName) + "=" + session.id +
         "; Max-Age=" + std::to_string(max_age_seconds) + CookieAttributes(secure);
}

std::string ClearCookieValue(bool secure) {
  return std::string(kCookieName) + "=; Max-Age=0" + CookieAttributes(secure);
}

bool SecureRequest(const http::Request& req, bool tls) {
  return tls || Lower(Header(req, "x-forwarded-proto")) == "https";
}

Status CheckSameOrigin(const http::Request& req) {
  if (auto it = req.headers.find("origin"); it != req.headers.end()) {
    std::string_view origin = it->second;
    size_t scheme = origin.find("://");
    std::string host = Lower(Header(req, "host"));
    if (scheme == std::string_view::npos || host.empty() ||
        Lower(std::string(origin.substr(scheme + 3))) != host) {
      return PermissionDenied("Origin '" + it->second + "' is not this server ('" + host +
                              "'): the console acts only for its own pages");
    }
  }
  std::string site = Header(req, "sec-fetch-site");
  if (!site.empty() && site != "same-origin" && site != "none") {
    return PermissionDenied("Sec-Fetch-Site '" + site +
                            "': the console acts only for its own pages");
  }
  return OkStatus();
}

Status CheckCookieRequest(const http::Request& req, std::string_view expected_csrf) {
  STOKER_RETURN_IF_ERROR(CheckSameOrigin(req));
  if (req.method == "GET" || req.method == "HEAD") return OkStatus();
  auto it = req.headers.find(std::string(kCsrfHeader));
  if (it == req.headers.end()) {
    return PermissionDenied(
        "a request signed in with the console's cookie that changes anything needs the "
        "X-Stoker-CSRF header the console got at sign-in (scripts and the CLI send "
        "'Authorization: Bearer <token>' instead)");
  }
  if (expected_csrf.empty() || !auth::ConstantTimeEquals(it->second, expected_csrf)) {
    return PermissionDenied(
        "X-Stoker-CSRF does not match this console session; reload the console (or sign in "
        "again)");
  }
  return OkStatus();
}

}  // namespace stoker::api::console
