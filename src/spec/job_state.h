// Vertex JobState names (reference §1.6), shared by custom and tuning jobs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace stoker::spec {

enum class JobState {
  kUnspecified = 0,
  kQueued = 1,
  kPending = 2,
  kRunning = 3,
  kSucceeded = 4,
  kFailed = 5,
  kCancelling = 6,
  kCancelled = 7,
};

// google.rpc.Code values a job's or study's `error.code` carries (the one
// place they are defined).
inline constexpr int kRpcCancelled = 1;
inline constexpr int kRpcUnknown = 2;
inline constexpr int kRpcDeadlineExceeded = 4;
inline constexpr int kRpcFailedPrecondition = 9;
inline constexpr int kRpcResourceExhausted = 8;
inline constexpr int kRpcInternal = 13;

inline std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kUnspecified:
      return "JOB_STATE_UNSPECIFIED";
    case JobState::kQueued:
      return "JOB_STATE_QUEUED";
    case JobState::kPending:
      return "JOB_STATE_PENDING";
    case JobState::kRunning:
      return "JOB_STATE_RUNNING";
    case JobState::kSucceeded:
      return "JOB_STATE_SUCCEEDED";
    case JobState::kFailed:
      return "JOB_STATE_FAILED";
    case JobState::kCancelling:
      return "JOB_STATE_CANCELLING";
    case JobState::kCancelled:
      return "JOB_STATE_CANCELLED";
  }
  return "JOB_STATE_UNSPECIFIED";
}

inline std::optional<JobState> ParseJobState(std::string_view name) {
  for (int i = 0; i <= 7; ++i) {
    auto s = static_cast<JobState>(i);
    if (JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

// SUCCEEDED, FAILED and CANCELLED end a job; nothing leaves them.
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

}  // namespace stoker::spec
