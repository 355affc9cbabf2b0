#include "common/status.h"

namespace stoker {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kAlreadyExists:
      return "already_exists";
    case Code::kFailedPrecondition:
      return "failed_precondition";
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kResourceExhausted:
      return "resource_exhausted";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kDeadlineExceeded:
      return "deadline_exceeded";
    case Code::kCancelled:
      return "cancelled";
    case Code::kInternal:
      return "internal";
  }
  return "internal";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace stoker
