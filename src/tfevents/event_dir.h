// The scalars of every TensorBoard event file under a log directory (a
// job's AIP_TENSORBOARD_LOG_DIR), read incrementally: each file's parse
// state is cached by identity (device, inode) and size, so a file that grew
// is read from where the last read stopped.
//
// The directory belongs to a trainer, so it is hostile: links are never
// followed (the directory itself included), only regular files are opened
// (non-blocking, so a FIFO cannot stall a reader), and the walk, the bytes
// read and the memory kept are bounded (DirLimits, Limits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tfevents/event_file.h"

namespace stoker::tfevents {

struct DirLimits {
  int max_depth = 4;                       // directories below the log directory
  size_t max_entries = 10000;              // directory entries looked at per read
  size_t max_files = 64;                   // event files read (the first by path)
  size_t max_series = 256;                 // series returned
  uint64_t max_read_bytes = 128ull << 20;  // new bytes read per Read, all files together
  uint64_t max_cached_points = 2'000'000;  // points kept between reads, all files together
};

// A series: a tag, prefixed by its run directory ("train/loss" for
// logs/train/events...; "loss" at the top). When the directory holds the
// files of more than one writer (the replicas of a job, each its own
// process, writing one log directory), each writer's points of a tag are a
// series of their own, named by `writer`; otherwise `writer` is empty and
// the files' points are one series, as TensorBoard shows a run.
struct NamedSeries {
  std::string name;
  std::string writer;         // EventFileWriter of its files; "" with one writer
  std::vector<Point> points;  // by step, then wall time; at most Limits::max_points
};

// A file, or part of one, that was not read, and why.
struct Skipped {
  std::string file;  // relative to the log directory ("" for the whole directory)
  std::string reason;
  // True for a note that changes as the file grows (how far a large file
  // has been read): worth showing, not worth a job event.
  bool transient = false;
};

struct DirScalars {
  std::vector<NamedSeries> series;  // by name
  std::vector<Skipped> skipped;
};

// Thread-safe: one Read at a time (the cache is shared).
class EventDirReader {
 public:
  EventDirReader(Limits limits = {}, DirLimits dir_limits = {});

  // The scalars under `dir`. A directory that does not exist gives nothing
  // (no error): the job has not written any yet. Never throws.
  DirScalars Read(const std::filesystem::path& dir);

 private:
  struct Cached {
    uint64_t dev = 0, ino = 0, size = 0;
    FileState state;
    uint64_t points = 0;  // kept points in `state`
    uint64_t used = 0;    // for least-recently-used eviction
  };

  const Limits limits_;
  const DirLimits dir_limits_;
  std::mutex mu_;
  std::map<std::string, Cached> cache_;  // by path
  uint64_t cached_points_ = 0;
  uint64_t clock_ = 0;
};

// Who wrote an event file, from its name: TensorFlow, PyTorch and
// tensorboardX name them events.out.tfevents.<seconds>.<host>[.<pid>.<n>]
// [.v2], so "<host> pid <pid>", or "<host>" without a pid, or "" for a
// name of another form. Files of one process share it.
std::string EventFileWriter(const std::string& file_name);

// A process whose event files' series are better named by what it is than
// by "<host> pid <pid>": a replica of a job ("workerpool0-0"), known by the
// trainer process its supervisor started (trainer.json's pid) or by a
// process its telemetry saw below the trainer (telemetry's newPids).
struct KnownWriter {
  std::string name;
  std::string host;  // where it ran; "" when not known (it matches any host)
  int64_t pid = 0;
};

// The name of the one known writer that `writer` (EventFileWriter's
// "<host> pid <pid>") is: the same pid on the same host ("gpu1" and
// "gpu1.example.com" are one host) or on a host not known. "" when none is,
// when several are (one pid on several hosts), or when `writer` names no
// pid: such series keep EventFileWriter's name. Pure.
std::string KnownWriterName(const std::string& writer, const std::vector<KnownWriter>& known);

// Evenly spread `max` of `points` (the first and the last among them), or
// all when there are no more than `max`.
std::vector<Point> Downsample(const std::vector<Point>& points, size_t max);

}  // namespace stoker::tfevents
