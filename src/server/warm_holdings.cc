#include "server/warm_holdings.h"

#include "replica/warm_start_registry.h"

namespace stoker::server {

const std::vector<scheduler::Held>& WarmHoldings::At(int64_t now_us) {
  if (read_us_ != INT64_MIN && now_us - read_us_ < refresh_us_) return held_;
  read_us_ = now_us;
  held_.clear();
  for (const runner::ZygoteRecord& z : runner::ListLiveZygotes(dir_, runner::DeadRecords::kKeep)) {
    if (z.rss_bytes == 0) continue;  // still being started: nothing to book yet
    held_.push_back({z.user, "warm interpreter", 0, z.rss_bytes});
  }
  return held_;
}

}  // namespace stoker::server
