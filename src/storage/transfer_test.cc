#include "storage/transfer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace stoker::storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

RemoteObject Object(const std::string& name, uint64_t size = 1, const std::string& md5 = "") {
  RemoteObject o;
  o.name = name;
  o.size = size;
  o.md5 = md5;
  return o;
}

std::vector<std::string> Names(const std::vector<RemoteObject>& objects) {
  std::vector<std::string> out;
  for (const RemoteObject& o : objects) out.push_back(o.name);
  return out;
}

GsUri Uri(const std::string& bucket, const std::string& object) { return GsUri{bucket, object}; }

// A fresh directory under the test's temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "transfer_test.XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path Write(const std::string& relative, const std::string& bytes) const {
    fs::path p = path_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  fs::path path_;
};

TEST(TransferTest, HumanBytesUsesBinaryUnits) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
  EXPECT_EQ(HumanBytes(3.0 * (1 << 30)), "3.00 GiB");
}

TEST(TransferTest, StarStaysWithinOnePartOfTheName) {
  EXPECT_TRUE(WildMatch("data/*.csv", "data/a.csv"));
  EXPECT_FALSE(WildMatch("data/*.csv", "data/sub/a.csv"));
  EXPECT_TRUE(WildMatch("data/**.csv", "data/sub/a.csv"));
  EXPECT_TRUE(WildMatch("data/?.csv", "data/a.csv"));
  EXPECT_FALSE(WildMatch("data?a.csv", "data/a.csv"));
  EXPECT_TRUE(WildMatch("part-[0-9]", "part-7"));
  EXPECT_FALSE(WildMatch("part-[0-9]", "part-x"));
}

TEST(TransferTest, ListingPrefixStopsAtTheFirstWildcard) {
  EXPECT_EQ(ListingPrefix(Uri("b", "logs/2024-*/x")), "logs/2024-");
  EXPECT_EQ(ListingPrefix(Uri("b", "logs/a.txt")), "logs/a.txt");
  EXPECT_EQ(ListingPrefix(Uri("b", "")), "");
}

TEST(TransferTest, AnObjectOfTheUrlsNameWinsOverAPrefix) {
  ExpandedUrl e = SelectObjects(Uri("b", "data/model"),
                                {Object("data/model"), Object("data/model/part-0")}, false);
  EXPECT_FALSE(e.is_prefix);
  EXPECT_EQ(e.base, "data/");
  EXPECT_EQ(Names(e.objects), std::vector<std::string>{"data/model"});
}

TEST(TransferTest, AUrlWithoutAnObjectOfItsNameIsAPrefix) {
  ExpandedUrl e = SelectObjects(
      Uri("b", "data"), {Object("data/a"), Object("data/sub/b"), Object("database")}, false);
  EXPECT_TRUE(e.is_prefix);
  EXPECT_EQ(e.base, "data/");
  EXPECT_EQ(Names(e.objects), (std::vector<std::string>{"data/a", "data/sub/b"}));
}

TEST(TransferTest, RecursiveWildcardTakesEverythingUnderAMatchingPrefix) {
  std::vector<RemoteObject> listing = {Object("dir1/a"), Object("dir2/sub/b"), Object("other")};
  EXPECT_TRUE(SelectObjects(Uri("b", "dir*"), listing, false).objects.empty());
  ExpandedUrl e = SelectObjects(Uri("b", "dir*"), listing, true);
  EXPECT_EQ(Names(e.objects), (std::vector<std::string>{"dir1/a", "dir2/sub/b"}));
  EXPECT_EQ(e.base, "");
}

TEST(TransferTest, UploadedFileGoesBelowADirectoryDestinationOrBecomesIt) {
  LocalFile f{"/tmp/x/report.txt", "report.txt"};
  EXPECT_EQ(UploadObjectName("out/", true, false, f), "out/report.txt");
  EXPECT_EQ(UploadObjectName("", true, false, f), "report.txt");
  EXPECT_EQ(UploadObjectName("out/renamed.txt", false, false, f), "out/renamed.txt");
}

TEST(TransferTest, UploadedDirectoryKeepsItsNameOnlyInsideAnExistingDestination) {
  LocalFile f{"/tmp/x/data/sub/a.bin", "data/sub/a.bin"};
  EXPECT_EQ(UploadObjectName("dst", true, true, f), "dst/data/sub/a.bin");
  EXPECT_EQ(UploadObjectName("dst", false, true, f), "dst/sub/a.bin");
}

TEST(TransferTest, DownloadedPrefixGoesUnderItsNameWhenTheDestinationExists) {
  ExpandedUrl e;
  e.bucket = "b";
  e.base = "runs/data/";
  e.is_prefix = true;
  e.objects = {Object("runs/data/sub/a")};
  EXPECT_EQ(DownloadPath("out", true, true, e, e.objects[0]), fs::path("out/data/sub/a"));
  EXPECT_EQ(DownloadPath("out", false, true, e, e.objects[0]), fs::path("out/sub/a"));
}

TEST(TransferTest, DownloadedObjectsTakeTheirFileNamesInADirectory) {
  ExpandedUrl e;
  e.bucket = "b";
  e.base = "logs/";
  e.objects = {Object("logs/a/x.txt"), Object("logs/b.txt")};
  EXPECT_EQ(DownloadPath("out", false, false, e, e.objects[0]), fs::path("out/x.txt"));
  EXPECT_EQ(DownloadPath("out", false, true, e, e.objects[0]), fs::path("out/a/x.txt"));
  e.objects.resize(1);
  EXPECT_EQ(DownloadPath("copy.txt", false, false, e, e.objects[0]), fs::path("copy.txt"));
  EXPECT_EQ(DownloadPath("out/", false, false, e, e.objects[0]), fs::path("out/x.txt"));
}

TEST(TransferTest, ExpandLocalNamesADirectorysFilesUnderItsOwnName) {
  TempDir tmp;
  tmp.Write("data/b.txt", "b");
  tmp.Write("data/a/c.txt", "c");
  bool omitted = false;
  std::vector<LocalFile> files = ExpandLocal((tmp.path() / "data").string(), true, &omitted);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].relative, "data/a/c.txt");
  EXPECT_EQ(files[1].relative, "data/b.txt");
  EXPECT_FALSE(omitted);
}

TEST(TransferTest, ExpandLocalSkipsADirectoryWithoutRecursive) {
  TempDir tmp;
  tmp.Write("data/b.txt", "b");
  fs::path single = tmp.Write("one.txt", "1");
  bool omitted = false;
  EXPECT_TRUE(ExpandLocal((tmp.path() / "data").string(), false, &omitted).empty());
  EXPECT_TRUE(omitted);
  std::vector<LocalFile> files = ExpandLocal((tmp.path() / "*.txt").string(), false, &omitted);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, single);
  EXPECT_EQ(files[0].relative, "one.txt");
}

TEST(TransferTest, RemoteObjectsByNameKeepsOnlyTheTopLevelWithoutRecursive) {
  std::vector<RemoteObject> listing = {Object("p/a"), Object("p/sub/b")};
  auto flat = RemoteObjectsByName(listing, "p/", false);
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat.begin()->first, "a");
  EXPECT_EQ(RemoteObjectsByName(listing, "p/", true).count("sub/b"), 1u);
}

TEST(TransferTest, LocalFilesByNameUsesSlashSeparatedRelativeNames) {
  TempDir tmp;
  tmp.Write("a", "1");
  tmp.Write("sub/b", "2");
  auto all = LocalFilesByName(tmp.path(), true);
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(all.count("sub/b"), 1u);
  EXPECT_EQ(LocalFilesByName(tmp.path(), false).size(), 1u);
  EXPECT_TRUE(LocalFilesByName(tmp.path() / "missing", true).empty());
}

TEST(TransferTest, SameContentComparesSizeThenMd5) {
  TempDir tmp;
  fs::path f = tmp.Write("a", "hello");
  Hasher h;
  h.Update("hello");
  EXPECT_TRUE(SameContent(Object("a", 5, h.Md5Base64()), f));
  EXPECT_TRUE(SameContent(Object("a", 5, ""), f));
  EXPECT_FALSE(SameContent(Object("a", 4, h.Md5Base64()), f));
  EXPECT_FALSE(SameContent(Object("a", 5, "bm90IHRoZSBzYW1lIG1kNQ=="), f));
}

TEST(TransferTest, RsyncUpCopiesWhatDiffersAndDeletesExtrasOnlyWhenAsked) {
  std::map<std::string, fs::path> local = {
      {"changed", "/l/changed"}, {"new", "/l/new"}, {"same", "/l/same"}};
  std::map<std::string, RemoteObject> remote = {
      {"changed", Object("p/changed")}, {"extra", Object("p/extra")}, {"same", Object("p/same")}};
  auto same = [](const RemoteObject& o, const fs::path&) { return o.name == "p/same"; };
  std::vector<SyncStep> keep = PlanRsync(local, remote, "/l", "p/", true, false, same);
  ASSERT_EQ(keep.size(), 2u);
  EXPECT_EQ(keep[0].action, SyncAction::kUpload);
  EXPECT_EQ(keep[0].object, "p/changed");
  EXPECT_EQ(keep[1].object, "p/new");
  std::vector<SyncStep> mirror = PlanRsync(local, remote, "/l", "p/", true, true, same);
  ASSERT_EQ(mirror.size(), 3u);
  EXPECT_EQ(mirror[2].action, SyncAction::kDeleteRemote);
  EXPECT_EQ(mirror[2].object, "p/extra");
}

TEST(TransferTest, RsyncDownWritesNewObjectsUnderTheLocalRoot) {
  std::map<std::string, fs::path> local = {{"changed", "/l/changed"}, {"extra", "/l/extra"}};
  std::map<std::string, RemoteObject> remote = {{"changed", Object("p/changed", 7)},
                                                {"sub/new", Object("p/sub/new", 9)}};
  auto differ = [](const RemoteObject&, const fs::path&) { return false; };
  std::vector<SyncStep> steps = PlanRsync(local, remote, "/l", "p/", false, true, differ);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].action, SyncAction::kDownload);
  EXPECT_EQ(steps[0].local, fs::path("/l/changed"));
  EXPECT_EQ(steps[0].bytes, 7u);
  EXPECT_EQ(steps[1].action, SyncAction::kDeleteLocal);
  EXPECT_EQ(steps[1].local, fs::path("/l/extra"));
  EXPECT_EQ(steps[2].action, SyncAction::kDownload);
  EXPECT_EQ(steps[2].local, fs::path("/l/sub/new"));
  EXPECT_EQ(steps[2].object, "p/sub/new");
}

// One object served as stokerd's JSON API serves it: metadata at
// /storage/v1/b/B/o/NAME, bytes with ?alt=media.
class FakeObjectApi : public ObjectApi {
 public:
  FakeObjectApi(std::string bytes, json meta) : bytes_(std::move(bytes)), meta_(std::move(meta)) {}

  Result<http::Response> Stream(const std::string& method, const std::string& target,
                                std::map<std::string, std::string>, uint64_t,
                                const http::Client::BodyReader&,
                                const http::Client::BodyWriter& writer) override {
    requests_.push_back(method + " " + target);
    http::Response r;
    if (method == "GET" && target.size() > 10 && target.ends_with("?alt=media")) {
      STOKER_RETURN_IF_ERROR(writer(bytes_));
    }
    return r;
  }
  Result<json> Call(const std::string& method, const std::string& target) override {
    requests_.push_back(method + " " + target);
    return meta_;
  }
  Status StatusOf(const http::Response& r) const override {
    return r.status / 100 == 2 ? OkStatus() : Internal("HTTP " + std::to_string(r.status));
  }
  const std::string& url() const override { return url_; }

  const std::vector<std::string>& requests() const { return requests_; }

 private:
  std::string bytes_;
  json meta_;
  std::string url_ = "http://fake";
  std::vector<std::string> requests_;
};

json MetaOf(const std::string& bytes) {
  Hasher h;
  h.Update(bytes);
  return json{{"size", std::to_string(bytes.size())}, {"crc32c", h.Crc32cBase64()}};
}

TEST(TransferTest, FetchCheckedWritesTheObjectAndChecksIt) {
  TempDir tmp;
  fs::path out = tmp.path() / "out";
  int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  FakeObjectApi api("payload", MetaOf("payload"));
  Progress none(false, 0, 0);
  EXPECT_TRUE(FetchChecked(api, "b", "dir/o", fd, &none).ok());
  ::close(fd);
  std::ifstream in(out);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, "payload");
  EXPECT_EQ(api.requests().back(), "GET /storage/v1/b/b/o/dir%2Fo?alt=media");
}

TEST(TransferTest, FetchCheckedRefusesBytesThatDoNotMatchTheChecksum) {
  TempDir tmp;
  int fd = ::open((tmp.path() / "out").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  FakeObjectApi api("tampered", MetaOf("payload"));
  Progress none(false, 0, 0);
  Status s = FetchChecked(api, "b", "o", fd, &none);
  ::close(fd);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace stoker::storage
