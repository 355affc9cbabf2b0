#include "exec/replica_dir_executor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/files.h"
#include "common/strings.h"
#include "exec/replica_files.h"
#include "replica/log_stream.h"
#include "replica/replica_contract.h"
#include "telemetry/telemetry.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

// The trainer's metrics file (CLOUD_ML_HP_METRIC_FILE), in the directory
// stoker-run hands to it, and the daemon's own file of pushed measurements.
using replica::kPushedMetrics;
using replica::kTrainerMetrics;

}  // namespace

Result<LogChunk> ReplicaDirExecutor::ReadLog(int64_t job_id, int attempt,
                                             const std::string& replica, uint64_t offset,
                                             size_t max_bytes) const {
  fs::path dir = ReplicaDir(job_id, attempt, replica);
  STOKER_ASSIGN_OR_RETURN(replica::LogRead r, replica::ReadLogStream(dir, offset, max_bytes));
  LogChunk chunk{std::move(r.data), r.offset, r.skipped, r.next_offset, r.size, {}};
  if (!chunk.data.empty()) {
    for (const replica::LogMark& m : replica::ReadLogMarks(dir, chunk.offset, chunk.next_offset)) {
      chunk.marks.push_back({m.offset, m.time_us});
    }
  }
  return chunk;
}

std::string ReplicaDirExecutor::ReadLogTail(int64_t job_id, int attempt, const std::string& replica,
                                            size_t max_bytes) const {
  return replica::ReadLogTail(ReplicaDir(job_id, attempt, replica), max_bytes);
}

int64_t ReplicaDirExecutor::LastActivityUs(int64_t job_id, int attempt,
                                           const std::string& replica) const {
  fs::path dir = ReplicaDir(job_id, attempt, replica);
  int64_t last = 0;
  for (const char* f : {replica::kLogFile, kTrainerMetrics}) {
    struct stat st {};
    if (::lstat((dir / f).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    last = std::max<int64_t>(last, st.st_mtim.tv_sec * 1'000'000LL + st.st_mtim.tv_nsec / 1000);
  }
  return last;
}

TrialMetrics ReplicaDirExecutor::ReadTrialMetrics(int64_t job_id, int attempt,
                                                  const std::string& replica, size_t max_bytes,
                                                  int64_t unchanged_stamp) const {
  fs::path dir = ReplicaDir(job_id, attempt, replica);
  TrialMetrics out;
  for (const char* name : {kTrainerMetrics, kPushedMetrics}) {
    struct stat sb {};
    if (::lstat((dir / name).c_str(), &sb) == 0) {
      out.stamp += sb.st_mtim.tv_sec * 1'000'000'000LL + sb.st_mtim.tv_nsec + sb.st_size;
    }
  }
  if (out.stamp == 0 || out.stamp == unchanged_stamp) return out;
  for (const char* name : {kTrainerMetrics, kPushedMetrics}) {
    // The trainer owns hypertune/: no link or FIFO of its may redirect or
    // block us, and no file of its may fill our memory.
    auto part = ReadFileNoFollow(dir, name, max_bytes);
    if (part.ok()) {
      out.text += *part + "\n";
    } else if (part.status().code() == Code::kResourceExhausted) {
      out.too_large.push_back(name);
    }
  }
  return out;
}

std::string ReplicaDirExecutor::ReadTelemetry(int64_t job_id, int attempt,
                                              const std::string& replica, size_t max_bytes) const {
  Result<int> fd =
      OpenReadNoFollow(ReplicaDir(job_id, attempt, replica), telemetry::kTelemetryFile);
  if (!fd.ok()) return "";
  struct stat st {};
  std::string text;
  if (::fstat(*fd, &st) == 0 && st.st_size > 0) {
    const auto size = static_cast<uint64_t>(st.st_size);
    // The tail with the byte before it, so that TailWholeLines can tell
    // whether its first line is whole.
    const uint64_t from = size > max_bytes ? size - max_bytes - 1 : 0;
    text.resize(size - from);
    ssize_t n = ::pread(*fd, text.data(), text.size(), static_cast<off_t>(from));
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(*fd);
  return std::string(TailWholeLines(text, max_bytes));
}

Status ReplicaDirExecutor::AppendPushedMetrics(int64_t job_id, int attempt,
                                               const std::string& replica,
                                               const std::string& line) const {
  // Beside hypertune/ in the replica directory, which is the daemon's (the
  // trainer writes only below work/ and hypertune/); still never through a
  // link, should an older layout have left one.
  return AppendLineNoFollow(ReplicaDir(job_id, attempt, replica), kPushedMetrics, line);
}

fs::path ReplicaDirExecutor::MetricFilePath(int64_t job_id, int attempt,
                                            const std::string& replica) const {
  return ReplicaDir(job_id, attempt, replica) / kTrainerMetrics;
}

fs::path ReplicaDirExecutor::SupervisorLog(int64_t job_id, int attempt,
                                           const std::string& replica) const {
  return ReplicaDir(job_id, attempt, replica) / replica::kRunnerLog;
}

namespace {

// True when a supervisor still holds a lock anywhere under the job's
// directory (<job>/<replica>/ or <job>/attempt-N/<replica>/).
bool AnySupervisorAlive(const fs::path& job_dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(job_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 2) it.disable_recursion_pending();
    if (it->path().filename() == "runner.lock" && SupervisorAlive(it->path().parent_path())) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool ReplicaDirExecutor::HasJobFiles(int64_t job_id) const {
  std::error_code ec;
  return fs::exists(ReplicaDir(job_id, 0, "x").parent_path(), ec);
}

Result<bool> ReplicaDirExecutor::RemoveJobFiles(int64_t job_id) {
  fs::path dir = ReplicaDir(job_id, 0, "x").parent_path();
  if (AnySupervisorAlive(dir)) return false;
  // Trainers owned directories in there: never follow a link of theirs.
  STOKER_RETURN_IF_ERROR(RemoveTreeNoFollow(dir));
  return true;
}

}  // namespace stoker::exec
