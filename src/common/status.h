// Status and Result<T>: the one error type of the whole codebase.
//
// A Status is a small closed set of generic codes plus a message that says
// what was wrong, where, and what to do. Domain outcomes ("exit code 3",
// "does not fit") are values, never Status errors. Library exceptions are
// caught at the adapter that calls the library and converted here.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace stoker {

enum class Code {
  kOk = 0,
  kInvalidArgument,     // bad input from a user: a field, a file, a flag
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // creating something that exists
  kFailedPrecondition,  // valid request, wrong state (cancel a finished job)
  kPermissionDenied,    // caller may not do this
  kResourceExhausted,   // disk full, quota, request too large
  kUnavailable,         // transient: daemon down, database busy; retry
  kDeadlineExceeded,    // a wait ran out of time
  kCancelled,           // the operation was cancelled
  kInternal,            // a broken invariant or an unexpected library error
};

// Stable lower_snake name of a code ("invalid_argument"), used in JSON errors.
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: message", or "ok".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

// Result<T> holds either a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace stoker

// Return early from the enclosing function when `expr` (a Status) is not ok.
#define STOKER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::stoker::Status stoker_status_ = (expr);        \
    if (!stoker_status_.ok()) return stoker_status_; \
  } while (0)

#define STOKER_CONCAT_INNER(a, b) a##b
#define STOKER_CONCAT(a, b) STOKER_CONCAT_INNER(a, b)
// STOKER_ASSIGN_OR_RETURN(auto x, ExprReturningResult()); returns the error.
#define STOKER_ASSIGN_OR_RETURN(lhs, expr) \
  STOKER_ASSIGN_OR_RETURN_IMPL(STOKER_CONCAT(stoker_result_, __LINE__), lhs, expr)
#define STOKER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
