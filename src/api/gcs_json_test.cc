#include "api/gcs_json.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace stoker::api {
namespace {

using nlohmann::json;

std::vector<storage::ObjectInfo> Objects(std::initializer_list<const char*> names) {
  std::vector<storage::ObjectInfo> out;
  int64_t t = 1000;
  for (const char* n : names) {
    storage::ObjectInfo o;
    o.name = n;
    o.mtime_us = t++;
    out.push_back(o);
  }
  return out;
}

std::vector<std::string> Names(const json& page) {
  std::vector<std::string> out;
  for (const json& i : page["items"]) out.push_back(i["name"]);
  return out;
}

TEST(GcsJson, PagesWalkEveryNameAndPrefixOnce) {
  // Sorted as Cloud Storage sorts: by bytes ('-' < '/' < '0').
  auto objects = Objects({"a-c", "a/b", "a/c", "a/d/e", "a0", "b/x", "top"});
  for (size_t size = 1; size <= 8; ++size) {
    ListQuery q;
    q.delimiter = "/";
    q.max_results = size;
    std::vector<std::string> seen;
    for (int pages = 0;; ++pages) {
      ASSERT_LT(pages, 20);
      json page = ObjectListPage("bk", objects, q);
      for (const std::string& n : Names(page)) seen.push_back(n);
      for (const json& p : page.value("prefixes", json::array())) seen.push_back(p);
      ASSERT_LE(page["items"].size() + page.value("prefixes", json::array()).size(), size);
      if (!page.contains("nextPageToken")) break;
      q.page_token = page["nextPageToken"];
    }
    std::sort(seen.begin(), seen.end());  // a page gives its items, then its prefixes
    EXPECT_EQ(seen, (std::vector<std::string>{"a-c", "a/", "a0", "b/", "top"})) << size;
  }
}

TEST(GcsJson, PrefixOffsetsAndTrailingDelimiter) {
  auto objects = Objects({"d/", "d/a", "d/b/c", "e"});
  ListQuery q;
  q.prefix = "d/";
  q.delimiter = "/";
  json page = ObjectListPage("bk", objects, q);
  EXPECT_EQ(Names(page), (std::vector<std::string>{"d/", "d/a"}));
  EXPECT_EQ(page["prefixes"], json::array({"d/b/"}));
  q = ListQuery();
  q.start_offset = "d/a";
  q.end_offset = "e";
  EXPECT_EQ(Names(ObjectListPage("bk", objects, q)), (std::vector<std::string>{"d/a", "d/b/c"}));
}

TEST(GcsJson, ObjectJsonCarriesGenerationsAndMetadata) {
  storage::ObjectInfo o;
  o.name = "a b/c";
  o.size = 3;
  o.mtime_us = 1700000000123456;
  o.meta.content_type = "text/plain";
  o.meta.custom = {{"k", "v"}};
  o.meta.metageneration = 4;
  json j = ObjectJson("bk", o);
  EXPECT_EQ(j["generation"], "1700000000123456");
  EXPECT_EQ(j["metageneration"], "4");
  EXPECT_EQ(j["contentType"], "text/plain");
  EXPECT_EQ(j["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(j["id"], "bk/a b/c/1700000000123456");
  EXPECT_EQ(j["selfLink"], "/storage/v1/b/bk/o/a%20b%2Fc");
}

TEST(GcsJson, MetaFromJsonMergesAsAPatch) {
  storage::ObjectMeta base;
  base.content_type = "text/plain";
  base.custom = {{"keep", "1"}, {"drop", "2"}};
  auto m = MetaFromJson(json::parse(R"({"metadata": {"drop": null, "n": 5}, "acl": []})"), "body",
                        base);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->content_type, "text/plain");
  EXPECT_EQ(m->custom, (std::map<std::string, std::string>{{"keep", "1"}, {"n", "5"}}));
  auto bad = MetaFromJson(json::parse(R"({"contentType": 3})"), "metadata part");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("metadata part.contentType"), std::string::npos);
  auto big = MetaFromJson(json{{"metadata", {{"k", std::string(9000, 'x')}}}}, "body");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("8 KiB"), std::string::npos);
}

TEST(GcsJson, PreconditionsAgainstTheObjectAsItIs) {
  storage::ObjectInfo now;
  now.mtime_us = 77;
  now.meta.metageneration = 2;
  auto req = [](std::map<std::string, std::string> q, std::string method = "POST") {
    http::Request r;
    r.method = std::move(method);
    r.query = std::move(q);
    return r;
  };
  EXPECT_FALSE(UnmetPrecondition(req({{"ifGenerationMatch", "77"}}), now));
  EXPECT_FALSE(UnmetPrecondition(req({{"ifGenerationMatch", "0"}}), std::nullopt));
  EXPECT_EQ(UnmetPrecondition(req({{"ifGenerationMatch", "0"}}), now)->status, 412);
  EXPECT_EQ(UnmetPrecondition(req({{"ifMetagenerationMatch", "1"}}), now)->status, 412);
  EXPECT_FALSE(UnmetPrecondition(req({{"ifMetagenerationNotMatch", "1"}}), now));
  EXPECT_EQ(UnmetPrecondition(req({{"ifGenerationNotMatch", "77"}}, "GET"), now)->status, 304);
  EXPECT_EQ(UnmetPrecondition(req({{"ifGenerationMatch", "x"}}), now)->status, 400);
  EXPECT_FALSE(UnmetPrecondition(req({{"ifSourceGenerationMatch", "1"}}), now));
  EXPECT_EQ(UnmetPrecondition(req({{"ifSourceGenerationMatch", "1"}}), now, "ifSource")->status, 412);
  auto body = json::parse(UnmetPrecondition(req({{"ifGenerationMatch", "1"}}), now)->body);
  EXPECT_EQ(body["error"]["errors"][0]["reason"], "conditionNotMet");
}

}  // namespace
}  // namespace stoker::api
