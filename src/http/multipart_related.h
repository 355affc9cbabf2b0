// A streaming reader of the multipart/related body (RFC 2387) of Cloud
// Storage's multipart upload (`uploadType=multipart`): exactly two parts,
// the object's JSON metadata, then the object's bytes. The metadata part is
// kept (at most kMaxMetadataBytes); the media part is handed on as it
// arrives and never held whole: the reader keeps at most a delimiter's
// length of it back (bytes that might begin the closing delimiter).
//
//   --BOUNDARY\r\n
//   Content-Type: application/json\r\n\r\n
//   {"name": "obj", "contentType": "text/plain"}\r\n
//   --BOUNDARY\r\n
//   Content-Type: text/plain\r\n\r\n
//   ...the object's bytes...\r\n
//   --BOUNDARY--
//
// Not thread-safe; one reader per body.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stoker::http {

class MultipartRelatedReader {
 public:
  static constexpr size_t kMaxMetadataBytes = 1 << 20;

  // `on_start` is called once, before any media bytes, with the metadata
  // part's body and the media part's Content-Type ("" when it has none);
  // `on_media` with the media bytes in order. A non-ok status from either
  // stops the reader, and Feed returns it.
  using StartFn = std::function<Status(std::string metadata, std::string media_type)>;
  using MediaFn = std::function<Status(std::string_view bytes)>;

  // The boundary of a Content-Type value `multipart/related;
  // boundary=...` (quoted or not). InvalidArgument naming Content-Type
  // otherwise.
  static Result<std::string> BoundaryOf(std::string_view content_type);

  MultipartRelatedReader(std::string boundary, StartFn on_start, MediaFn on_media);

  // The next bytes of the body. InvalidArgument (naming what is wrong) for
  // a body that is not two parts in this shape; the first error sticks.
  Status Feed(std::string_view bytes);
  // The body ended: ok only after the closing delimiter.
  Status End();

 private:
  enum class State { kPreamble, kAfterDelimiter, kHeaders, kMetadata, kMedia, kEpilogue };
  Status Step(bool* progressed);

  std::string dash_boundary_;  // "--" + boundary
  std::string delimiter_;      // "\r\n--" + boundary
  StartFn on_start_;
  MediaFn on_media_;
  State state_ = State::kPreamble;
  int parts_ = 0;
  std::string part_type_;  // the current part's Content-Type
  std::string metadata_;
  std::string buf_;        // bytes not yet consumed
  Status failed_;
};

}  // namespace stoker::http
