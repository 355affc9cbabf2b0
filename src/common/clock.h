// The wall clock as a dependency (in the manner of LevelDB's Env): the
// control loop and the store ask an injected Clock for the time, so a test
// can run a job's whole life (timeouts, hang checks, retention, aging) on a
// FakeClock without sleeping.
#pragma once

#include <atomic>
#include <cstdint>

namespace stoker {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch (how the store keeps times). Thread-safe.
  virtual int64_t NowMicros() const = 0;
};

// The real wall clock (CLOCK_REALTIME). One process-wide instance; thread-safe.
const Clock& SystemClock();

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_us) : now_us_(start_us) {}
  int64_t NowMicros() const override { return now_us_.load(); }
  void Set(int64_t us) { now_us_.store(us); }
  void Advance(int64_t us) { now_us_.fetch_add(us); }

 private:
  std::atomic<int64_t> now_us_;
};

}  // namespace stoker
