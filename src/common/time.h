// Time formats of the Vertex wire: RFC 3339 timestamps and protobuf Durations.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace stoker {

using TimePoint = std::chrono::system_clock::time_point;

// Microseconds since the Unix epoch; how times are stored.
int64_t ToMicros(TimePoint t);
TimePoint FromMicros(int64_t us);
// The wall clock now. Code with a Clock (clock.h) asks it instead, so that
// tests can set the time.
int64_t NowMicros();

// "2024-05-18T00:00:00.123456Z" (UTC, microseconds).
std::string FormatRfc3339(int64_t micros);

// Parses an RFC 3339 timestamp ("2021-05-18T00:00:00Z",
// "2021-05-18T02:00:00.5+02:00") into microseconds since the epoch;
// nullopt when it is not one.
std::optional<int64_t> ParseRfc3339Micros(const std::string& text);

// Parses a protobuf Duration string ("3600s", "0.5s", "604800s") into
// seconds. Also accepts a bare number of seconds. InvalidArgument otherwise,
// the message naming `field`.
Result<double> ParseDuration(const std::string& text, const std::string& field);

// Formats seconds as a protobuf Duration ("3600s", "0.5s").
std::string FormatDuration(double seconds);

// Milliseconds of CLOCK_MONOTONIC (since an arbitrary point, not changed by
// setting the wall clock): for deadlines and intervals, never for
// timestamps. Thread-safe and async-signal-safe.
int64_t MonotonicMs();

}  // namespace stoker
