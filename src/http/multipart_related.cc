#include "http/multipart_related.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace stoker::http {
namespace {

constexpr size_t kMaxPreambleBytes = 64 << 10;
constexpr size_t kMaxHeaderBytes = 16 << 10;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Status Bad(const std::string& what) {
  return InvalidArgument("multipart upload body: " + what +
                         " (expected two parts: the object's JSON metadata, then its bytes)");
}

}  // namespace

Result<std::string> MultipartRelatedReader::BoundaryOf(std::string_view content_type) {
  const Status bad = InvalidArgument("Content-Type: '" + std::string(content_type) +
                                     "' is not 'multipart/related; boundary=...', which "
                                     "uploadType=multipart needs");
  size_t semi = content_type.find(';');
  if (Lower(Trim(content_type.substr(0, semi))) != "multipart/related") return bad;
  while (semi != std::string_view::npos) {
    std::string_view rest = content_type.substr(semi + 1);
    semi = rest.find(';');
    std::string_view param = Trim(rest.substr(0, semi));
    size_t eq = param.find('=');
    if (eq == std::string_view::npos || Lower(Trim(param.substr(0, eq))) != "boundary") {
      content_type = rest;
      continue;
    }
    std::string_view value = Trim(param.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (value.empty() || value.size() > 70) return bad;  // RFC 2046: 1 to 70 characters
    return std::string(value);
  }
  return bad;
}

MultipartRelatedReader::MultipartRelatedReader(std::string boundary, StartFn on_start,
                                               MediaFn on_media)
    : dash_boundary_("--" + boundary),
      delimiter_("\r\n--" + boundary),
      on_start_(std::move(on_start)),
      on_media_(std::move(on_media)) {}

Status MultipartRelatedReader::Feed(std::string_view bytes) {
  if (!failed_.ok()) return failed_;
  buf_.append(bytes);
  bool progressed = true;
  while (progressed && failed_.ok()) failed_ = Step(&progressed);
  return failed_;
}

Status MultipartRelatedReader::End() {
  if (!failed_.ok()) return failed_;
  if (state_ != State::kEpilogue) {
    failed_ = Bad("it ended before its closing boundary '" + dash_boundary_ + "--'");
  }
  return failed_;
}

Status MultipartRelatedReader::Step(bool* progressed) {
  *progressed = false;
  switch (state_) {
    case State::kPreamble: {
      size_t at = buf_.find(dash_boundary_);
      if (at == std::string::npos) {
        if (buf_.size() > kMaxPreambleBytes) return Bad("no boundary '" + dash_boundary_ + "'");
        return Status();
      }
      buf_.erase(0, at + dash_boundary_.size());
      state_ = State::kAfterDelimiter;
      break;
    }
    case State::kAfterDelimiter: {
      if (buf_.size() < 2) return Status();
      if (buf_.compare(0, 2, "--") == 0) {
        if (parts_ < 2) {
          return Bad("the closing boundary came after " + std::to_string(parts_) + " part(s)");
        }
        buf_.clear();
        state_ = State::kEpilogue;
        break;
      }
      size_t eol = buf_.find("\r\n");
      if (eol == std::string::npos) {
        if (buf_.size() > kMaxHeaderBytes) return Bad("a boundary line does not end");
        return Status();
      }
      if (!Trim(std::string_view(buf_).substr(0, eol)).empty()) {
        return Bad("text after a boundary on its line");
      }
      buf_.erase(0, eol + 2);
      part_type_.clear();
      state_ = State::kHeaders;
      break;
    }
    case State::kHeaders: {
      size_t end = buf_.compare(0, 2, "\r\n") == 0 ? 0 : buf_.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (buf_.size() > kMaxHeaderBytes) return Bad("a part's headers do not end");
        return Status();
      }
      std::string_view headers = std::string_view(buf_).substr(0, end);
      while (!headers.empty()) {
        size_t eol = headers.find("\r\n");
        std::string_view line = headers.substr(0, eol);
        headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
        size_t colon = line.find(':');
        if (colon != std::string_view::npos && Lower(Trim(line.substr(0, colon))) == "content-type") {
          part_type_ = std::string(Trim(line.substr(colon + 1)));
        }
      }
      buf_.erase(0, end == 0 ? 2 : end + 4);
      ++parts_;
      if (parts_ == 1) {
        state_ = State::kMetadata;
      } else if (parts_ == 2) {
        state_ = State::kMedia;
        if (Status s = on_start_(std::move(metadata_), part_type_); !s.ok()) return s;
      } else {
        return Bad("a third part");
      }
      break;
    }
    case State::kMetadata: {
      size_t at = buf_.find(delimiter_);
      if (at == std::string::npos) {
        if (buf_.size() > kMaxMetadataBytes + delimiter_.size()) {
          return Bad("the metadata part is over " + std::to_string(kMaxMetadataBytes) + " bytes");
        }
        return Status();
      }
      metadata_ = buf_.substr(0, at);
      buf_.erase(0, at + delimiter_.size());
      state_ = State::kAfterDelimiter;
      break;
    }
    case State::kMedia: {
      size_t at = buf_.find(delimiter_);
      if (at == std::string::npos) {
        // Keep back what could be the start of the delimiter.
        const size_t keep = delimiter_.size() - 1;
        if (buf_.size() > keep) {
          const size_t n = buf_.size() - keep;
          if (Status s = on_media_(std::string_view(buf_).substr(0, n)); !s.ok()) return s;
          buf_.erase(0, n);
        }
        return Status();
      }
      if (at > 0) {
        if (Status s = on_media_(std::string_view(buf_).substr(0, at)); !s.ok()) return s;
      }
      buf_.erase(0, at + delimiter_.size());
      state_ = State::kAfterDelimiter;
      break;
    }
    case State::kEpilogue:
      buf_.clear();
      return Status();
  }
  *progressed = true;
  return Status();
}

}  // namespace stoker::http
