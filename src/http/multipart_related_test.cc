#include "http/multipart_related.h"

#include <gtest/gtest.h>

#include <string>

namespace stoker::http {
namespace {

struct Seen {
  std::string metadata, type, media;
  int starts = 0, media_calls = 0;
};

MultipartRelatedReader Reader(Seen* seen, const std::string& boundary = "b0und") {
  return MultipartRelatedReader(
      boundary,
      [seen](std::string m, std::string t) {
        ++seen->starts;
        seen->metadata = std::move(m);
        seen->type = std::move(t);
        return OkStatus();
      },
      [seen](std::string_view b) {
        EXPECT_EQ(seen->starts, 1) << "media before the metadata";
        ++seen->media_calls;
        seen->media.append(b);
        return OkStatus();
      });
}

std::string Body(const std::string& media, const std::string& boundary = "b0und") {
  return "--" + boundary + "\r\nContent-Type: application/json\r\n\r\n{\"name\":\"a/b.txt\"}\r\n--" +
         boundary + "\r\nContent-Type: text/plain\r\n\r\n" + media + "\r\n--" + boundary + "--";
}

TEST(MultipartRelated, BoundaryOfAContentType) {
  EXPECT_EQ(*MultipartRelatedReader::BoundaryOf("multipart/related; boundary=abc"), "abc");
  EXPECT_EQ(*MultipartRelatedReader::BoundaryOf("Multipart/Related;charset=x; BOUNDARY=\"a b\""),
            "a b");
  for (const char* bad : {"application/json", "multipart/related", "multipart/related; boundary=",
                          "multipart/form-data; boundary=x"}) {
    auto r = MultipartRelatedReader::BoundaryOf(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("Content-Type"), std::string::npos);
  }
}

TEST(MultipartRelated, ReadsMetadataAndMediaFedAtOnce) {
  Seen seen;
  auto r = Reader(&seen);
  ASSERT_TRUE(r.Feed(Body("hello\r\n--b0un not the end")).ok());
  ASSERT_TRUE(r.End().ok());
  EXPECT_EQ(seen.metadata, "{\"name\":\"a/b.txt\"}");
  EXPECT_EQ(seen.type, "text/plain");
  EXPECT_EQ(seen.media, "hello\r\n--b0un not the end");
}

TEST(MultipartRelated, EverySplitOfTheBodyGivesTheSameBytes) {
  std::string media;
  for (int i = 0; i < 300; ++i) media += static_cast<char>(i % 256);
  media += "\r\n--b0un";  // almost a delimiter, at the very end of the media
  const std::string body = Body(media) + "\r\nan epilogue, ignored";
  for (size_t step = 1; step <= 64; step += 7) {
    Seen seen;
    auto r = Reader(&seen);
    for (size_t at = 0; at < body.size(); at += step) {
      ASSERT_TRUE(r.Feed(body.substr(at, step)).ok()) << "step " << step << " at " << at;
    }
    ASSERT_TRUE(r.End().ok()) << step;
    EXPECT_EQ(seen.media, media) << step;
    EXPECT_EQ(seen.starts, 1);
  }
}

TEST(MultipartRelated, NeverHoldsTheMediaWhole) {
  Seen seen;
  auto r = Reader(&seen);
  ASSERT_TRUE(r.Feed("--b0und\r\n\r\n{}\r\n--b0und\r\n\r\n").ok());
  const std::string chunk(64 << 10, 'x');
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(r.Feed(chunk).ok());
    // All but a delimiter's length is handed on at once.
    EXPECT_GE(seen.media.size(), (i + 1) * chunk.size() - 9);
  }
  ASSERT_TRUE(r.Feed("\r\n--b0und--\r\n").ok());
  ASSERT_TRUE(r.End().ok());
  EXPECT_EQ(seen.media.size(), 16 * chunk.size());
  EXPECT_EQ(seen.type, "");  // a part without headers
}

TEST(MultipartRelated, RefusesBodiesOfAnotherShape) {
  struct Case {
    std::string body, says;
  } cases[] = {
      {"--b0und\r\n\r\n{}\r\n--b0und--", "after 1 part"},
      {Body("x").substr(0, 60), "before its closing boundary"},
      {"--b0und\r\n\r\n{}\r\n--b0und\r\n\r\nx\r\n--b0und\r\n\r\ny\r\n--b0und--", "third part"},
      {"--b0und junk\r\n\r\n{}", "text after a boundary"},
      {std::string(70 << 10, 'z'), "no boundary"},
  };
  for (const Case& c : cases) {
    Seen seen;
    auto r = Reader(&seen);
    Status s = r.Feed(c.body);
    if (s.ok()) s = r.End();
    ASSERT_FALSE(s.ok()) << c.says;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
  }
}

TEST(MultipartRelated, AnErrorOfACallbackStopsTheReader) {
  MultipartRelatedReader r(
      "b0und", [](std::string, std::string) { return InvalidArgument("name: required"); },
      [](std::string_view) { return OkStatus(); });
  Status s = r.Feed(Body("x"));
  EXPECT_EQ(s.message(), "name: required");
  EXPECT_EQ(r.Feed("more").message(), "name: required");
}

TEST(MultipartRelated, MetadataOverTheLimitIsRefused) {
  Seen seen;
  auto r = Reader(&seen);
  Status s = r.Feed("--b0und\r\n\r\n" + std::string(MultipartRelatedReader::kMaxMetadataBytes + 64,
                                                   ' '));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metadata part is over"), std::string::npos);
}

}  // namespace
}  // namespace stoker::http
