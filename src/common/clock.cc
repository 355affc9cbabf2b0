#include "common/clock.h"

#include "common/time.h"

namespace stoker {
namespace {

class RealClock final : public Clock {
 public:
  int64_t NowMicros() const override { return stoker::NowMicros(); }
};

}  // namespace

const Clock& SystemClock() {
  static const RealClock clock;
  return clock;
}

}  // namespace stoker
