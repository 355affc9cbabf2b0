// TensorBoard event files ("events.out.tfevents.*"), read without a protobuf
// library: the TFRecord framing and the few fields of tensorboard's Event
// proto that hold scalars (docs/training-metrics.md).
//
// A file is a sequence of records:
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   data[length] | uint32 masked CRC-32C of data
// and each record's data is one serialized Event:
//   wall_time (1, double), step (2, int64), file_version (3, string),
//   summary (5, Summary: repeated Value value = 1), where a Value has
//   tag (1), simple_value (2, float; PyTorch's SummaryWriter, tensorboardX,
//   TF1), metadata (9: plugin_data (1): plugin_name (1)) and tensor (8,
//   TensorProto: dtype (1), tensor_shape (2), tensor_content (4),
//   float_val (5), double_val (6), int_val (7), int64_val (10); TF2's
//   tf.summary.scalar writes a rank-0 DT_FLOAT tensor with plugin "scalars").
//
// Everything here treats the bytes as hostile (a trainer writes them): every
// length is checked against what is left before anything is allocated or
// read, and every loop advances by at least one byte of a bounded input.
// Pure and thread-compatible: no I/O but through a ByteSource.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::tfevents {

// Bounds on what one file may cost (docs/training-metrics.md, "Limits").
struct Limits {
  // Records up to this size are read and decoded. Larger ones (a graph, an
  // image) are stepped over unread, up to kMaxSkippableRecord.
  uint64_t max_record_bytes = 4 << 20;
  // Bytes of a file read by one ReadRecords call; the rest waits for the next
  // call (the caller keeps the FileState).
  uint64_t max_read_bytes = 32ull << 20;
  // Tags kept per file; values of further new tags are left out.
  size_t max_tags = 256;
  // A tag longer than this (in bytes, before sanitizing) is left out.
  size_t max_tag_bytes = 256;
  // Points kept per tag: when a series reaches twice this, every other point
  // goes and only every 2^k-th new one is kept, so the kept points stay
  // evenly spread over the whole run; the last point is always kept.
  size_t max_points = 1000;
  // Summary values decoded per event; the rest of a larger event is ignored.
  size_t max_values_per_event = 1024;
};

// A record length beyond this is not believed even with a valid length CRC.
inline constexpr uint64_t kMaxSkippableRecord = 1ull << 30;

struct Point {
  int64_t step = 0;
  double wall_time = 0;  // seconds since the epoch
  double value = 0;      // always finite
};

// One tag's points in arrival order, bounded as Limits::max_points says.
class Series {
 public:
  void Add(const Point& p, size_t max_points);
  // The kept points and the last one, in arrival order.
  std::vector<Point> Points() const;
  // Every point ever added (kept or not).
  uint64_t seen() const { return seen_; }

 private:
  std::vector<Point> kept_;
  std::optional<Point> last_;
  uint64_t seen_ = 0;
  uint64_t stride_ = 1;  // keep every stride_-th arrival
};

// One Summary.Value as decoded.
struct SummaryValue {
  std::string tag;  // raw bytes (only when at most Limits::max_tag_bytes)
  bool tag_too_long = false;
  std::string plugin;  // metadata.plugin_data.plugin_name ("" = none given)
  // simple_value, or the one element of a numeric tensor (float, double,
  // int32, int64) whose every dimension is 1 (rank 0 included).
  std::optional<double> scalar;
  bool tensor = false;  // the scalar came from a tensor
};

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<SummaryValue> values;
};

// Decodes one record's data. nullopt with `why` set when it is not a valid
// Event encoding (a truncated field, a length past the end, a wire type
// that does not fit a known field). Unknown fields are skipped.
std::optional<Event> DecodeEvent(std::string_view data, const Limits& limits, std::string* why);

// A tag as it may be shown: control characters (C0, DEL, C1) dropped,
// invalid UTF-8 bytes replaced by '?'. "" when nothing printable is left.
std::string SanitizeTag(std::string_view tag);

// Where a file's bytes come from.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The file's size now.
  virtual uint64_t Size() const = 0;
  // Reads exactly `n` bytes at `offset` into `out`; false when it cannot
  // (an I/O error, or the file shrank).
  virtual bool ReadAt(uint64_t offset, size_t n, std::string* out) const = 0;
};

// A ByteSource over bytes in memory (tests, the fuzz target).
class StringSource final : public ByteSource {
 public:
  explicit StringSource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t Size() const override { return bytes_.size(); }
  bool ReadAt(uint64_t offset, size_t n, std::string* out) const override;

 private:
  std::string_view bytes_;
};

// What has been read of one file so far; ReadRecords continues from it.
struct FileState {
  uint64_t offset = 0;   // where the next record starts
  uint64_t records = 0;  // records read so far
  // Set when the file cannot be read past `offset` (a CRC mismatch, an
  // unbelievable length, an I/O error): "record 12: data CRC mismatch".
  std::string error;
  // The scalars by sanitized tag.
  std::map<std::string, Series> series;
  // Each tag's plugin, from the first value that named it (TensorBoard's
  // writers put metadata on a tag's first value only).
  std::map<std::string, std::string> plugins;
  // Why values or records were left out, distinct texts that stay the same
  // as the file grows (so each can become one job event), at most 16.
  std::vector<std::string> problems;
  // The kinds of problems already in `problems` (one text per kind).
  std::set<std::string> problem_kinds;
};

// Reads whole records from `state.offset` on, at most limits.max_read_bytes,
// adding scalars to `state`. Stops without an error at a record that is not
// complete yet (a file still being written: the next call reads it once it
// is). A length or data CRC mismatch sets `state.error` and stops for good.
// Never reads or allocates more than limits.max_record_bytes + 16 bytes at
// once.
void ReadRecords(const ByteSource& source, const Limits& limits, FileState& state);

}  // namespace stoker::tfevents
