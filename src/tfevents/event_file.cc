#include "tfevents/event_file.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "tfevents/crc32c.h"

namespace stoker::tfevents {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// TensorFlow DataType values (types.proto).
constexpr uint64_t kDtFloat = 1;
constexpr uint64_t kDtDouble = 2;
constexpr uint64_t kDtInt32 = 3;
constexpr uint64_t kDtInt64 = 9;

constexpr size_t kMaxPluginName = 128;
constexpr size_t kMaxPlugins = 1024;
constexpr size_t kMaxProblems = 16;
constexpr size_t kMaxFileVersion = 256;

uint64_t Le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint32_t Le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A bounds-checked reader of protobuf wire format over one message's bytes.
// Every method returns false, consuming nothing useful, when the input ends
// early or breaks the format; callers then give up on the whole message.
class Wire {
 public:
  explicit Wire(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      auto b = static_cast<unsigned char>(data_[pos_++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;  // more than 10 bytes
  }
  bool Fixed64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    *v = Le64(data_.data() + pos_);
    pos_ += 8;
    return true;
  }
  bool Fixed32(uint32_t* v) {
    if (data_.size() - pos_ < 4) return false;
    *v = Le32(data_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool Bytes(std::string_view* out) {
    uint64_t n = 0;
    if (!Varint(&n) || n > data_.size() - pos_) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  // The next field's number and wire type; false at a malformed key.
  bool Key(uint64_t* field, int* wire) {
    uint64_t key = 0;
    if (!Varint(&key)) return false;
    *field = key >> 3;
    *wire = static_cast<int>(key & 7);
    return *field != 0;
  }
  bool Skip(int wire) {
    uint64_t v = 0;
    uint32_t w = 0;
    std::string_view s;
    switch (wire) {
      case kVarint:
        return Varint(&v);
      case kFixed64:
        return Fixed64(&v);
      case kLengthDelimited:
        return Bytes(&s);
      case kFixed32:
        return Fixed32(&w);
      default:
        return false;  // groups (3, 4) are not used by these messages; 6, 7 do not exist
    }
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

std::string WireError(const char* message, uint64_t field, int wire) {
  return std::string(message) + " field " + std::to_string(field) + " has wire type " +
         std::to_string(wire);
}

// A repeated numeric field of a TensorProto: how many elements and the first.
struct Repeated {
  uint64_t count = 0;
  double first = 0;
  void Add(double v) {
    if (count++ == 0) first = v;
  }
};

// Packed fixed-size elements (float: 4, double: 8).
bool AddPackedFixed(std::string_view bytes, size_t width, Repeated* r) {
  if (bytes.size() % width != 0) return false;
  for (size_t i = 0; i < bytes.size(); i += width) {
    if (r->count > 0) {
      r->count += (bytes.size() - i) / width;  // only the first value is used
      break;
    }
    r->Add(width == 4 ? static_cast<double>(std::bit_cast<float>(Le32(bytes.data() + i)))
                      : std::bit_cast<double>(Le64(bytes.data() + i)));
  }
  return true;
}

bool AddPackedVarints(std::string_view bytes, bool int32, Repeated* r) {
  Wire w(bytes);
  while (!w.done()) {
    uint64_t v = 0;
    if (!w.Varint(&v)) return false;
    r->Add(int32 ? static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(v)))
                 : static_cast<double>(static_cast<int64_t>(v)));
  }
  return true;
}

// TensorShapeProto: true when every dimension is 1 (rank 0 included).
bool ParseShapeIsOneElement(std::string_view data, bool* one, std::string* why) {
  Wire w(data);
  *one = true;
  while (!w.done()) {
    uint64_t field = 0;
    int wire = 0;
    if (!w.Key(&field, &wire)) return *why = "tensor_shape: malformed", false;
    if (field == 2 && wire == kLengthDelimited) {  // Dim dim
      std::string_view dim;
      if (!w.Bytes(&dim)) return *why = "tensor_shape.dim: past the end", false;
      Wire d(dim);
      int64_t size = 0;  // proto3 default: a dim without size has size 0
      while (!d.done()) {
        uint64_t f = 0, v = 0;
        int dw = 0;
        if (!d.Key(&f, &dw)) return *why = "tensor_shape.dim: malformed", false;
        if (f == 1 && dw == kVarint) {
          if (!d.Varint(&v)) return *why = "tensor_shape.dim.size: malformed", false;
          size = static_cast<int64_t>(v);
        } else if (!d.Skip(dw)) {
          return *why = "tensor_shape.dim: malformed", false;
        }
      }
      if (size != 1) *one = false;
    } else if (field == 3 && wire == kVarint) {  // unknown_rank
      uint64_t v = 0;
      if (!w.Varint(&v)) return *why = "tensor_shape.unknown_rank: malformed", false;
      if (v) *one = false;
    } else if (!w.Skip(wire)) {
      return *why = "tensor_shape: malformed", false;
    }
  }
  return true;
}

// TensorProto: the value of a one-element numeric tensor, if it is one.
bool ParseTensor(std::string_view data, std::optional<double>* out, std::string* why) {
  Wire w(data);
  uint64_t dtype = 0;
  bool one = true;
  std::string_view content;
  Repeated floats, doubles, ints, int64s;
  while (!w.done()) {
    uint64_t field = 0;
    int wire = 0;
    if (!w.Key(&field, &wire)) return *why = "tensor: malformed key", false;
    std::string_view bytes;
    uint64_t v = 0;
    uint32_t v32 = 0;
    bool ok = true;
    switch (field) {
      case 1:
        ok = wire == kVarint && w.Varint(&dtype);
        break;
      case 2:
        ok =
            wire == kLengthDelimited && w.Bytes(&bytes) && ParseShapeIsOneElement(bytes, &one, why);
        break;
      case 4:
        ok = wire == kLengthDelimited && w.Bytes(&content);
        break;
      case 5:  // float_val: packed or not
        if (wire == kLengthDelimited) {
          ok = w.Bytes(&bytes) && AddPackedFixed(bytes, 4, &floats);
        } else {
          ok = wire == kFixed32 && w.Fixed32(&v32);
          if (ok) floats.Add(std::bit_cast<float>(v32));
        }
        break;
      case 6:  // double_val
        if (wire == kLengthDelimited) {
          ok = w.Bytes(&bytes) && AddPackedFixed(bytes, 8, &doubles);
        } else {
          ok = wire == kFixed64 && w.Fixed64(&v);
          if (ok) doubles.Add(std::bit_cast<double>(v));
        }
        break;
      case 7:   // int_val
      case 10:  // int64_val
        if (wire == kLengthDelimited) {
          ok = w.Bytes(&bytes) && AddPackedVarints(bytes, field == 7, field == 7 ? &ints : &int64s);
        } else {
          ok = wire == kVarint && w.Varint(&v);
          if (ok && field == 7) ints.Add(static_cast<int32_t>(static_cast<uint32_t>(v)));
          if (ok && field == 10) int64s.Add(static_cast<double>(static_cast<int64_t>(v)));
        }
        break;
      default:
        ok = w.Skip(wire);
    }
    if (!ok) {
      if (why->empty()) *why = WireError("tensor:", field, wire) + " or runs past the end";
      return false;
    }
  }
  out->reset();
  if (!one) return true;
  // tensor_content holds the raw little-endian element; else the typed list
  // (version 0: one element fills the shape).
  switch (dtype) {
    case kDtFloat:
      if (content.size() == 4) *out = std::bit_cast<float>(Le32(content.data()));
      if (content.empty() && floats.count) *out = floats.first;
      break;
    case kDtDouble:
      if (content.size() == 8) *out = std::bit_cast<double>(Le64(content.data()));
      if (content.empty() && doubles.count) *out = doubles.first;
      break;
    case kDtInt32:
      if (content.size() == 4) *out = static_cast<int32_t>(Le32(content.data()));
      if (content.empty() && ints.count) *out = ints.first;
      break;
    case kDtInt64:
      if (content.size() == 8)
        *out = static_cast<double>(static_cast<int64_t>(Le64(content.data())));
      if (content.empty() && int64s.count) *out = int64s.first;
      break;
    default:
      break;  // strings, histograms' dtypes, complex, half: not a scalar here
  }
  return true;
}

bool ParseValue(std::string_view data, const Limits& limits, SummaryValue* v, std::string* why) {
  Wire w(data);
  while (!w.done()) {
    uint64_t field = 0;
    int wire = 0;
    if (!w.Key(&field, &wire)) return *why = "summary.value: malformed key", false;
    std::string_view bytes;
    uint32_t v32 = 0;
    bool ok = true;
    switch (field) {
      case 1:  // tag
        ok = wire == kLengthDelimited && w.Bytes(&bytes);
        if (ok) {
          v->tag_too_long = bytes.size() > limits.max_tag_bytes;
          v->tag =
              std::string(bytes.substr(0, std::min<size_t>(bytes.size(), limits.max_tag_bytes)));
        }
        break;
      case 2:  // simple_value
        ok = wire == kFixed32 && w.Fixed32(&v32);
        if (ok) {
          v->scalar = std::bit_cast<float>(v32);
          v->tensor = false;
        }
        break;
      case 8:  // tensor
        ok = wire == kLengthDelimited && w.Bytes(&bytes);
        if (ok) {
          std::optional<double> scalar;
          if (!ParseTensor(bytes, &scalar, why)) return false;
          v->scalar = scalar;
          v->tensor = true;
        }
        break;
      case 9: {  // metadata: plugin_data (1): plugin_name (1)
        ok = wire == kLengthDelimited && w.Bytes(&bytes);
        Wire m(bytes);
        while (ok && !m.done()) {
          uint64_t f = 0;
          int mw = 0;
          std::string_view plugin_data;
          ok = m.Key(&f, &mw);
          if (ok && f == 1 && mw == kLengthDelimited) {
            ok = m.Bytes(&plugin_data);
            Wire p(plugin_data);
            while (ok && !p.done()) {
              uint64_t pf = 0;
              int pw = 0;
              std::string_view name;
              ok = p.Key(&pf, &pw);
              if (ok && pf == 1 && pw == kLengthDelimited) {
                ok = p.Bytes(&name);
                if (ok) v->plugin = std::string(name.substr(0, kMaxPluginName));
              } else if (ok) {
                ok = p.Skip(pw);
              }
            }
          } else if (ok) {
            ok = m.Skip(mw);
          }
        }
        break;
      }
      default:
        ok = w.Skip(wire);
    }
    if (!ok) {
      *why = WireError("summary.value:", field, wire) + " or runs past the end";
      return false;
    }
  }
  return true;
}

bool ParseSummary(std::string_view data, const Limits& limits, Event* e, std::string* why) {
  Wire w(data);
  while (!w.done()) {
    uint64_t field = 0;
    int wire = 0;
    if (!w.Key(&field, &wire)) return *why = "summary: malformed key", false;
    if (field == 1) {
      std::string_view value;
      if (wire != kLengthDelimited || !w.Bytes(&value)) {
        *why = WireError("summary:", field, wire) + " or runs past the end";
        return false;
      }
      if (e->values.size() >= limits.max_values_per_event) continue;  // the rest is ignored
      SummaryValue v;
      if (!ParseValue(value, limits, &v, why)) return false;
      e->values.push_back(std::move(v));
    } else if (!w.Skip(wire)) {
      *why = WireError("summary:", field, wire) + " or runs past the end";
      return false;
    }
  }
  return true;
}

// A tag for a message: sanitized, at most 64 bytes, quoted.
std::string Quote(std::string_view tag) {
  std::string s = SanitizeTag(tag.substr(0, 64));
  return "'" + s + (tag.size() > 64 ? "...'" : "'");
}

// Adds `text` unless a problem of this `kind` is already there.
void AddProblem(FileState& state, const std::string& kind, const std::string& text) {
  if (state.problems.size() >= kMaxProblems || !state.problem_kinds.insert(kind).second) return;
  state.problems.push_back(text);
}

// Adds an event's scalars to `state`.
void TakeScalars(const Event& e, const Limits& limits, FileState& state) {
  for (const SummaryValue& v : e.values) {
    if (v.tag_too_long) {
      if (v.scalar) {
        AddProblem(state, "long tag",
                   "values of tags longer than " + std::to_string(limits.max_tag_bytes) +
                       " bytes were left out");
      }
      continue;
    }
    if (!v.plugin.empty() && !state.plugins.count(v.tag) && state.plugins.size() < kMaxPlugins) {
      state.plugins[v.tag] = v.plugin;
    }
    if (!v.scalar) continue;
    if (v.tensor) {
      // A one-element tensor is a scalar unless its tag belongs to another
      // plugin (hparams, custom ones); a tag with no known plugin counts.
      std::string plugin = v.plugin;
      if (plugin.empty()) {
        auto it = state.plugins.find(v.tag);
        if (it != state.plugins.end()) plugin = it->second;
      }
      if (!plugin.empty() && plugin != "scalars") continue;
    }
    std::string name = SanitizeTag(v.tag);
    if (name.empty()) {
      AddProblem(state, "empty tag", "values with an empty or unprintable tag were left out");
      continue;
    }
    auto series = state.series.find(name);
    if (series == state.series.end()) {
      if (state.series.size() >= limits.max_tags) {
        AddProblem(state, "tags",
                   "more than " + std::to_string(limits.max_tags) +
                       " tags: values of later new tags were left out");
        continue;
      }
    }
    if (!std::isfinite(*v.scalar)) {
      {
        AddProblem(state, "nonfinite " + name,
                   "tag " + Quote(name) +
                       ": non-finite values (NaN or infinity) were left out, the first at "
                       "step " +
                       std::to_string(e.step));
      }
      continue;
    }
    if (series == state.series.end()) series = state.series.emplace(name, Series()).first;
    series->second.Add({e.step, e.wall_time, *v.scalar}, limits.max_points);
  }
}

}  // namespace

void Series::Add(const Point& p, size_t max_points) {
  max_points = std::max<size_t>(max_points, 1);
  last_ = p;
  if (seen_++ % stride_ == 0) kept_.push_back(p);
  if (kept_.size() >= 2 * max_points) {
    // Arrivals 0, s, 2s, ... are kept; keep 0, 2s, 4s, ... from now on.
    size_t j = 0;
    for (size_t i = 0; i < kept_.size(); i += 2) kept_[j++] = kept_[i];
    kept_.resize(j);
    stride_ *= 2;
  }
}

std::vector<Point> Series::Points() const {
  std::vector<Point> out = kept_;
  if (last_ && (seen_ - 1) % stride_ != 0) out.push_back(*last_);
  return out;
}

std::optional<Event> DecodeEvent(std::string_view data, const Limits& limits, std::string* why) {
  Event e;
  Wire w(data);
  while (!w.done()) {
    uint64_t field = 0;
    int wire = 0;
    if (!w.Key(&field, &wire)) {
      *why = "malformed field key";
      return std::nullopt;
    }
    uint64_t v = 0;
    std::string_view bytes;
    bool ok = true;
    switch (field) {
      case 1:
        ok = wire == kFixed64 && w.Fixed64(&v);
        e.wall_time = std::bit_cast<double>(v);
        break;
      case 2:
        ok = wire == kVarint && w.Varint(&v);
        e.step = static_cast<int64_t>(v);
        break;
      case 3:
        ok = wire == kLengthDelimited && w.Bytes(&bytes);
        e.file_version = std::string(bytes.substr(0, kMaxFileVersion));
        break;
      case 5:
        ok = wire == kLengthDelimited && w.Bytes(&bytes);
        if (ok && !ParseSummary(bytes, limits, &e, why)) return std::nullopt;
        break;
      default:
        ok = w.Skip(wire);
    }
    if (!ok) {
      *why = WireError("event:", field, wire) + " or runs past the end";
      return std::nullopt;
    }
  }
  if (!std::isfinite(e.wall_time)) e.wall_time = 0;
  return e;
}

std::string SanitizeTag(std::string_view tag) {
  std::string out;
  size_t i = 0;
  while (i < tag.size()) {
    auto b = static_cast<unsigned char>(tag[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool valid = n > 0 && i + n <= tag.size();
    uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1f : n == 3 ? b & 0x0f : b & 0x07;
    for (size_t k = 1; valid && k < n; ++k) {
      auto c = static_cast<unsigned char>(tag[i + k]);
      valid = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid.
    if (valid && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                  (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)) {
      valid = false;
    }
    if (!valid) {
      out += '?';
      ++i;
      continue;
    }
    bool control = cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0);
    if (!control) out.append(tag.substr(i, n));
    i += n;
  }
  return out;
}

bool StringSource::ReadAt(uint64_t offset, size_t n, std::string* out) const {
  if (offset > bytes_.size() || n > bytes_.size() - offset) return false;
  out->assign(bytes_.data() + offset, n);
  return true;
}

void ReadRecords(const ByteSource& source, const Limits& limits, FileState& state) {
  uint64_t budget = limits.max_read_bytes;
  std::string header, body;
  while (state.error.empty()) {
    const uint64_t size = source.Size();
    // Where a problem is, built only when there is one.
    auto at = [&state] {
      return "record " + std::to_string(state.records + 1) + " (byte " +
             std::to_string(state.offset) + ")";
    };
    if (size < state.offset) {
      state.error = at() + ": the file shrank below what was already read";
      return;
    }
    if (size - state.offset < 12) return;  // the next header is not written yet
    if (!source.ReadAt(state.offset, 12, &header)) {
      state.error = at() + ": cannot read the record header";
      return;
    }
    if (MaskCrc(Crc32c(std::string_view(header).substr(0, 8))) != Le32(header.data() + 8)) {
      state.error = at() + ": length CRC mismatch";
      return;
    }
    const uint64_t length = Le64(header.data());
    if (length > kMaxSkippableRecord) {
      state.error = at() + ": length " + std::to_string(length) + " is over the " +
                    std::to_string(kMaxSkippableRecord) + "-byte bound";
      return;
    }
    const uint64_t total = 12 + length + 4;
    if (size - state.offset < total) return;  // still being written
    if (length > limits.max_record_bytes) {
      // A graph or an image, most likely: stepped over, never held in memory.
      AddProblem(state, "large",
                 "records larger than " + std::to_string(limits.max_record_bytes) +
                     " bytes were not read (any scalars in them are missing)");
      state.offset += total;
      ++state.records;
      continue;
    }
    if (total > budget) return;  // the next call goes on from here
    budget -= total;
    if (!source.ReadAt(state.offset + 12, length + 4, &body)) {
      state.error = at() + ": cannot read the record";
      return;
    }
    std::string_view data = std::string_view(body).substr(0, length);
    if (MaskCrc(Crc32c(data)) != Le32(body.data() + length)) {
      state.error = at() + ": data CRC mismatch";
      return;
    }
    std::string why;
    std::optional<Event> e = DecodeEvent(data, limits, &why);
    if (!e) {
      AddProblem(state, "garbage",
                 "records that are not TensorBoard events were left out (the first: " + at() +
                     ": " + why + ")");
    } else {
      TakeScalars(*e, limits, state);
    }
    state.offset += total;
    ++state.records;
  }
}

}  // namespace stoker::tfevents
