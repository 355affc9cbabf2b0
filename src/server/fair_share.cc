#include "server/fair_share.h"

#include <algorithm>
#include <cmath>

namespace stoker::server {

std::map<std::string, double> UsageFromHistory(const std::vector<GpuInterval>& intervals,
                                               int64_t now_us, double half_life_s) {
  std::map<std::string, double> usage;
  // The integral of g * 2^(-(now - t) / h) dt from s to e is
  // g * h / ln 2 * (2^(-(now - e) / h) - 2^(-(now - s) / h)).
  const double scale = half_life_s / std::log(2.0);
  for (const GpuInterval& i : intervals) {
    int64_t end = std::min(i.end_us, now_us);
    if (i.gpus <= 0 || end <= i.start_us) continue;
    double age_end = (now_us - end) / 1e6, age_start = (now_us - i.start_us) / 1e6;
    usage[i.user] +=
        i.gpus * scale * (std::exp2(-age_end / half_life_s) - std::exp2(-age_start / half_life_s));
  }
  return usage;
}

double HeldGpus(const std::vector<scheduler::PlacedReplica>& placed) {
  double gpus = 0;
  for (const scheduler::PlacedReplica& p : placed) {
    for (const scheduler::GpuShare& g : p.gpus) gpus += g.fraction;
  }
  return gpus;
}

}  // namespace stoker::server
