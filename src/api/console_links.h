// One-time sign-in links for the web console (`stoker console`,
// docs/console.md). A caller with a token asks for a link; the link's code
// stands for that caller (its user, role and token) once, for two minutes:
// the console's sign-in page trades it for a session (console_routes.cc)
// and the code is gone. Only the code's SHA-256 is kept, in memory: a daemon
// restart forgets every unused link, and nothing on disk opens a session.
//
// The code travels in the URL's fragment (`/console/signin.html#code=...`),
// which browsers do not send to servers nor put in Referer headers; the
// page posts it to /console/session, where the cross-site checks of any
// sign-in apply.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "auth/auth.h"
#include "common/status.h"

namespace stoker::api::console {

inline constexpr int64_t kSignInLinkSeconds = 120;

class SignInLinks {
 public:
  // `now_us`: the clock (microseconds since the epoch).
  explicit SignInLinks(std::function<int64_t()> now_us);

  struct Link {
    std::string code;  // 64 lower-case hex digits, from getrandom
    int64_t expire_time_us = 0;
  };
  // A new code for `who`.
  Result<Link> Issue(const auth::Principal& who);

  // The principal `code` stands for, once: nullopt when the code is
  // unknown, used or expired.
  std::optional<auth::Principal> Redeem(std::string_view code);

 private:
  struct Entry {
    auth::Principal who;
    int64_t expire_time_us;
  };
  std::function<int64_t()> now_us_;
  std::mutex mu_;
  std::map<std::string, Entry> by_hash_;  // SHA-256 of the code -> entry
};

}  // namespace stoker::api::console
