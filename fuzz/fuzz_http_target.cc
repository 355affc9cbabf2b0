// The request-target parser of stoker_http (src/http/url.h): percent
// decoding and query parsing, plus the encode/decode contract.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "http/http.h"
#include "http/url.h"

namespace {

[[noreturn]] void Fail(const char* what, std::string_view a, std::string_view b) {
  std::fprintf(stderr, "fuzz_http_target: %s\n[%.*s]\n[%.*s]\n", what, static_cast<int>(a.size()),
               a.data(), static_cast<int>(b.size()), b.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  using namespace stoker::http;

  // 1. Arbitrary targets: no crash; decoding never grows the text.
  std::string path;
  std::map<std::string, std::string> query;
  internal::ParseTarget(in, &path, &query);
  if (path.size() > in.size()) Fail("decoded path longer than the target", in, path);
  for (bool plus : {false, true}) {
    std::string d = internal::PercentDecode(in, plus);
    if (d.size() > in.size()) Fail("decoded text longer than the input", in, d);
  }

  // 2. Encode then decode is the identity, for paths and query values.
  std::string raw(in);
  std::string enc = UrlEncode(raw);
  if (internal::PercentDecode(enc, false) != raw)
    Fail("PercentDecode(UrlEncode(s)) != s", raw, enc);
  if (internal::PercentDecode(enc, true) != raw) Fail("query decode(UrlEncode(s)) != s", raw, enc);

  // 3. A target built from encoded parts parses back into those parts.
  size_t cut1 = size / 3, cut2 = 2 * size / 3;
  std::string p(in.substr(0, cut1)), k(in.substr(cut1, cut2 - cut1)), v(in.substr(cut2));
  std::string target = "/" + UrlEncode(p) + "?" + UrlEncode(k) + "=" + UrlEncode(v);
  internal::ParseTarget(target, &path, &query);
  if (path != "/" + p) Fail("path did not survive encoding", target, path);
  // "?=v" is a parameter with an empty name, so every k (even "") comes back.
  if (query.size() != 1 || query.count(k) != 1 || query[k] != v) {
    Fail("query did not survive encoding", target, query.empty() ? "" : query.begin()->first);
  }
  return 0;
}
