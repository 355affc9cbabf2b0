#include "api/console_links.h"

namespace stoker::api::console {

SignInLinks::SignInLinks(std::function<int64_t()> now_us) : now_us_(std::move(now_us)) {}

Result<SignInLinks::Link> SignInLinks::Issue(const auth::Principal& who) {
  STOKER_ASSIGN_OR_RETURN(std::string random, auth::NewToken());  // 32 bytes, as hex
  Link link{random.substr(auth::kTokenPrefix.size()), now_us_() + kSignInLinkSeconds * 1'000'000};
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = now_us_();
  std::erase_if(by_hash_, [now](const auto& e) { return e.second.expire_time_us <= now; });
  by_hash_[auth::Sha256Hex(link.code)] = Entry{who, link.expire_time_us};
  return link;
}

std::optional<auth::Principal> SignInLinks::Redeem(std::string_view code) {
  const std::string hash = auth::Sha256Hex(code);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  Entry entry = std::move(it->second);
  by_hash_.erase(it);
  if (entry.expire_time_us <= now_us_()) return std::nullopt;
  return entry.who;
}

}  // namespace stoker::api::console
