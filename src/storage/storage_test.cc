#include <archive.h>
#include <archive_entry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/files.h"
#include "storage/archive.h"
#include "storage/buckets.h"
#include "storage/upload_sessions.h"

namespace stoker::storage {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "storage_test.XXXXXX").string();
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    // Canonical, so that paths compare equal to what the code resolves.
    path_ = fs::canonical(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string ReadText(const fs::path& path) {
  Result<std::string> r = ReadFile(path);
  return r.ok() ? *r : "<missing>";
}

// One member of a hand-built (possibly hostile) test archive.
struct TarMember {
  std::string path;
  unsigned type = AE_IFREG;
  std::string content;
  std::string symlink;   // for AE_IFLNK
  std::string hardlink;  // non-empty: a hard link to this name
};

enum class Kind { kTarGz, kPlainTar, kZip };

std::string MakeArchive(const std::vector<TarMember>& members, Kind kind = Kind::kTarGz) {
  std::string out;
  struct archive* a = archive_write_new();
  if (kind == Kind::kTarGz) archive_write_add_filter_gzip(a);
  if (kind == Kind::kZip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
  }
  archive_write_open(
      a, &out, [](struct archive*, void*) { return ARCHIVE_OK; },
      [](struct archive*, void* o, const void* b, size_t n) -> la_ssize_t {
        static_cast<std::string*>(o)->append(static_cast<const char*>(b), n);
        return static_cast<la_ssize_t>(n);
      },
      [](struct archive*, void*) { return ARCHIVE_OK; });
  for (const TarMember& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.path.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, 0644);
    if (m.type == AE_IFLNK) archive_entry_set_symlink(e, m.symlink.c_str());
    if (!m.hardlink.empty()) archive_entry_set_hardlink(e, m.hardlink.c_str());
    if (m.type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 3));
    archive_entry_set_size(e, m.type == AE_IFREG && m.hardlink.empty()
                                  ? static_cast<la_int64_t>(m.content.size())
                                  : 0);
    EXPECT_GE(archive_write_header(a, e), ARCHIVE_WARN) << archive_error_string(a);
    if (!m.content.empty() && m.hardlink.empty()) {
      archive_write_data(a, m.content.data(), m.content.size());
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

Status CheckMembers(const std::vector<TarMember>& members, const ArchiveLimits& limits = {}) {
  return CheckTarGz(MakeArchive(members), "pkg.tar.gz", limits);
}

// ---------------------------------------------------------------- gs:// URIs

TEST(ParseGsUriTest, SplitsBucketAndObject) {
  Result<GsUri> r = ParseGsUri("gs://my-bucket_1.x/titanic/train.npz", "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bucket, "my-bucket_1.x");
  EXPECT_EQ(r->object, "titanic/train.npz");

  for (const char* root : {"gs://abc", "gs://abc/"}) {
    Result<GsUri> b = ParseGsUri(root, "f");
    ASSERT_TRUE(b.ok()) << root;
    EXPECT_EQ(b->bucket, "abc");
    EXPECT_EQ(b->object, "");
  }
}

TEST(ParseGsUriTest, RefusesBadUrisNamingTheField) {
  const std::string field = "baseOutputDirectory.outputUriPrefix";
  for (const std::string& uri : std::vector<std::string>{
           "s3://abc/x", "/local/path", "gs://", "gs:///x", "gs://ab/x", "gs://ABC/x",
           "gs://-abc/x", "gs://abc-/x", "gs://a b c/x", "gs://" + std::string(64, 'a') + "/x"}) {
    Result<GsUri> r = ParseGsUri(uri, field);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << uri;
    EXPECT_THAT(r.status().message(), HasSubstr(field + ": ")) << uri;
  }
  EXPECT_TRUE(ParseGsUri("gs://" + std::string(63, 'a'), field).ok());
}

// ------------------------------------------------------------------- Buckets

class BucketsTest : public ::testing::Test {
 protected:
  BucketsTest() : buckets_(dir_.path(), {}) { EXPECT_TRUE(buckets_.Create("data").ok()); }
  fs::path Bucket() const { return dir_.path() / "buckets" / "data"; }

  TempDir dir_;
  Buckets buckets_;
};

TEST_F(BucketsTest, LaysOutBucketsUnderTheDataDir) {
  EXPECT_EQ(buckets_.BucketDir("data"), dir_.path() / "buckets" / "data");
  EXPECT_EQ(buckets_.BucketDir(kStagingBucket), dir_.path() / "staging");
  Buckets mapped(dir_.path(), {{"shared", "/mnt/shared"}});
  EXPECT_EQ(mapped.BucketDir("shared"), fs::path("/mnt/shared"));
  EXPECT_TRUE(buckets_.Exists("data"));
  EXPECT_FALSE(buckets_.Exists("other"));
  EXPECT_TRUE(buckets_.Create("data").ok());  // idempotent
  EXPECT_EQ(buckets_.Create("NO").code(), Code::kInvalidArgument);
  EXPECT_EQ(buckets_.ListBuckets(), std::vector<std::string>{"data"});
}

TEST_F(BucketsTest, ResolvesObjectsAndTheBucketRoot) {
  Result<fs::path> p = buckets_.Resolve("gs://data/titanic/train.npz", "args[0]");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, Bucket() / "titanic" / "train.npz");
  for (const char* root : {"gs://data", "gs://data/"}) {
    Result<fs::path> r = buckets_.Resolve(root, "f");
    ASSERT_TRUE(r.ok()) << root;
    EXPECT_EQ(*r, Bucket()) << root;
  }
  Result<fs::path> out = buckets_.Resolve("gs://data/out/", "f");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, Bucket() / "out");
}

TEST_F(BucketsTest, RefusesObjectNamesThatLeaveTheBucket) {
  for (const char* uri : {"gs://data/../x", "gs://data/a/../../x", "gs://data/a/./b",
                          "gs://data//etc/passwd", "gs://data/a//b"}) {
    Result<fs::path> r = buckets_.Resolve(uri, "packageUris[0]");
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << uri;
    EXPECT_THAT(r.status().message(), HasSubstr("packageUris[0]: ")) << uri;
  }
  std::string with_nul("gs://data/a\0b", 13);
  EXPECT_FALSE(buckets_.Resolve(with_nul, "f").ok());
}

TEST_F(BucketsTest, RefusesASymlinkInsideTheBucketThatPointsOut) {
  TempDir outside;
  WriteText(outside.path() / "secret", "s");
  fs::create_directory_symlink(outside.path(), Bucket() / "link");
  for (const char* uri : {"gs://data/link", "gs://data/link/secret", "gs://data/link/new/file"}) {
    Result<fs::path> r = buckets_.Resolve(uri, "f");
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("outside bucket 'data'"));
  }
  EXPECT_FALSE(buckets_.Put("data", "link/planted", "x").ok());
  EXPECT_FALSE(fs::exists(outside.path() / "planted"));
  EXPECT_FALSE(buckets_.Get("data", "link/secret").ok());

  // A symlink that stays inside the bucket is fine.
  fs::create_directories(Bucket() / "real");
  fs::create_directory_symlink(Bucket() / "real", Bucket() / "alias");
  EXPECT_TRUE(buckets_.Resolve("gs://data/alias/x", "f").ok());
}

TEST_F(BucketsTest, MissingBucketSaysHowToCreateIt) {
  Result<fs::path> r = buckets_.Resolve("gs://nope/trainer.tar.gz",
                                        "workerPoolSpecs[0].pythonPackageSpec.packageUris[0]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(),
            "workerPoolSpecs[0].pythonPackageSpec.packageUris[0]: bucket 'nope' does not exist; "
            "create it with 'stoker storage mb gs://nope' or copy data into it with 'stoker "
            "storage cp'");
  EXPECT_EQ(buckets_.Put("nope", "x", "y").code(), Code::kNotFound);
  EXPECT_EQ(buckets_.List("nope", "").status().code(), Code::kNotFound);
}

TEST_F(BucketsTest, PutsGetsAndListsObjects) {
  ASSERT_TRUE(buckets_.Put("data", "titanic/train.csv", "a,b\n1,2\n").ok());
  ASSERT_TRUE(buckets_.Put("data", "titanic/deep/eval.csv", "e").ok());
  ASSERT_TRUE(buckets_.Put("data", "readme.txt", "hello").ok());
  ASSERT_TRUE(buckets_.Put("data", "readme.txt", "hello again").ok());  // overwrite

  Result<std::string> got = buckets_.Get("data", "titanic/train.csv");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "a,b\n1,2\n");
  EXPECT_EQ(*buckets_.Get("data", "readme.txt"), "hello again");
  EXPECT_EQ(buckets_.Get("data", "absent").status().code(), Code::kNotFound);
  EXPECT_EQ(buckets_.Get("data", "titanic").status().code(), Code::kNotFound);  // a directory
  EXPECT_EQ(buckets_.Put("data", "dir/", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(buckets_.Put("data", "../escape", "x").code(), Code::kInvalidArgument);

  Result<std::vector<ObjectInfo>> all = buckets_.List("data", "");
  ASSERT_TRUE(all.ok());
  std::vector<std::string> names;
  for (const ObjectInfo& o : *all) names.push_back(o.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"readme.txt", "titanic/deep/eval.csv", "titanic/train.csv"}));
  EXPECT_EQ((*all)[0].size, 11u);
  EXPECT_GT((*all)[0].mtime_us, 0);

  Result<std::vector<ObjectInfo>> some = buckets_.List("data", "titanic/");
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->size(), 2u);
  EXPECT_EQ((*some)[0].name, "titanic/deep/eval.csv");
}

std::string SmallPackage(const fs::path& root) {
  WriteText(root / "trainer" / "__init__.py", "");
  WriteText(root / "trainer" / "task.py", "VALUE = 42\n");
  Result<std::string> bytes = PackSdist(root / "trainer", "trainer", "0.1");
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : "";
}

TEST_F(BucketsTest, StagesArchivesByContentHashOnce) {
  TempDir src;
  std::string bytes = SmallPackage(src.path());
  Result<std::string> first = buckets_.Stage(bytes);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::string> second = buckets_.Stage(bytes);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(first->rfind("gs://stoker-staging/", 0), 0u) << *first;
  EXPECT_EQ(first->size(), std::string("gs://stoker-staging/").size() + 64 + 7);
  EXPECT_EQ(first->substr(first->size() - 7), ".tar.gz");

  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_.path() / "staging")) {
    ++files;
    EXPECT_EQ(ReadText(e.path()), bytes);
  }
  EXPECT_EQ(files, 1u);
  Result<fs::path> local = buckets_.Resolve(*first, "packageUris[0]");
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(fs::is_regular_file(*local));

  Result<std::string> text = buckets_.Stage("print('not an archive')\n");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("not a gzip-compressed tar archive"));
}

TEST_F(BucketsTest, StagingIsWrittenOnlyByStageAndCheckedAgainstItsName) {
  TempDir src;
  std::string bytes = SmallPackage(src.path());
  Result<std::string> uri = buckets_.Stage(bytes);
  ASSERT_TRUE(uri.ok());
  Result<GsUri> parsed = ParseGsUri(*uri, "f");
  ASSERT_TRUE(parsed.ok());
  Status put = buckets_.Put(kStagingBucket, parsed->object, "other bytes");
  EXPECT_EQ(put.code(), Code::kPermissionDenied);
  EXPECT_THAT(put.message(), HasSubstr("written only by staging"));
  EXPECT_TRUE(CheckStagedContent(*parsed, bytes, "f").ok());
  Status changed = CheckStagedContent(*parsed, "other bytes", "packageUris[0]");
  EXPECT_EQ(changed.code(), Code::kFailedPrecondition);
  EXPECT_THAT(changed.message(), HasSubstr("packageUris[0]"));
  EXPECT_THAT(changed.message(), HasSubstr("does not hold the bytes its name promises"));
  EXPECT_EQ(CheckStagedContent({kStagingBucket, "pkg.tar.gz"}, bytes, "f").code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(CheckStagedContent({"data", "anything"}, "x", "f").ok());  // other buckets
  // A staged file changed behind the daemon's back is put right by the
  // next Stage of the same bytes.
  fs::path file = dir_.path() / "staging" / parsed->object;
  { std::ofstream(file, std::ios::trunc) << "tampered"; }
  ASSERT_TRUE(buckets_.Stage(bytes).ok());
  EXPECT_EQ(ReadText(file), bytes);
}

TEST_F(BucketsTest, ObjectNamePartsLongerThanAFileNameAreRefused) {
  Status s = buckets_.Put("data", std::string(256, 'a'), "x");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("255"));
  EXPECT_TRUE(buckets_.Put("data", std::string(255, 'a'), "x").ok());
}

TEST(BucketWritersTest, SharedBucketsAreTheWriterGroupsAndSetgid) {
  TempDir dir;
  const auto gid = static_cast<uint32_t>(::getegid());
  Buckets buckets(dir.path(), {}, gid);
  ASSERT_TRUE(buckets.Create("shared").ok());
  ASSERT_TRUE(buckets.Put("shared", "a/b/obj", "x").ok());
  auto mode = [](const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  fs::path root = dir.path() / "buckets/shared";
  EXPECT_EQ(mode(root), 02775u);
  EXPECT_EQ(mode(root / "a/b"), 02775u);
  EXPECT_EQ(mode(root / "a/b/obj"), 0664u);
  Result<fs::path> out = buckets.MakeDir("gs://shared/out/7/", "f");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(mode(root / "out/7"), 02775u);
  // A bucket made before the group: shared once, at start.
  fs::create_directories(dir.path() / "buckets/old/d");
  { std::ofstream(dir.path() / "buckets/old/d/f") << "x"; }
  fs::permissions(dir.path() / "buckets/old", fs::perms(0755));
  fs::permissions(dir.path() / "buckets/old/d", fs::perms(0755));
  fs::permissions(dir.path() / "buckets/old/d/f", fs::perms(0644));
  Result<int64_t> changed = buckets.ShareWithWriters();
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 3);
  EXPECT_EQ(mode(dir.path() / "buckets/old/d") & 02070, 02070u);
  EXPECT_EQ(mode(dir.path() / "buckets/old/d/f") & 060, 060u);
  EXPECT_EQ(buckets.ShareWithWriters().value(), 0);  // done once
}

TEST_F(BucketsTest, RewritesGsUrisInsideArguments) {
  const std::string b = Bucket().string();
  EXPECT_EQ(RewriteGsUris("--train=gs://data/titanic/train.npz", buckets_),
            "--train=" + b + "/titanic/train.npz");
  EXPECT_EQ(RewriteGsUris("gs://data/out/", buckets_), b + "/out/");
  EXPECT_EQ(RewriteGsUris("gs://data", buckets_), b);
  EXPECT_EQ(RewriteGsUris("a=gs://data/x,b=gs://data/y", buckets_), "a=" + b + "/x,b=" + b + "/y");
  EXPECT_EQ(RewriteGsUris("{\"path\": \"gs://data/x\"} 'gs://data/y' gs://data/z\tend", buckets_),
            "{\"path\": \"" + b + "/x\"} '" + b + "/y' " + b + "/z\tend");
  // Unknown buckets, bad URIs and escapes stay as they were.
  EXPECT_EQ(RewriteGsUris("--x=gs://unknown/a", buckets_), "--x=gs://unknown/a");
  EXPECT_EQ(RewriteGsUris("gs://data/../etc/passwd", buckets_), "gs://data/../etc/passwd");
  EXPECT_EQ(RewriteGsUris("gs://", buckets_), "gs://");
  EXPECT_EQ(RewriteGsUris("no uris here", buckets_), "no uris here");
  EXPECT_EQ(RewriteGsUris("", buckets_), "");
}

// ------------------------------------------------------------------ archives

TEST(CheckTarGzTest, AcceptsAnOrdinaryArchive) {
  Status s = CheckMembers({{"pkg-1.0/", AE_IFDIR},
                           {"pkg-1.0/a.py", AE_IFREG, "x = 1\n"},
                           {"./pkg-1.0/sub/b.py", AE_IFREG, "y = 2\n"},
                           {"pkg-1.0/sub/link.py", AE_IFLNK, "", "../a.py"},
                           {"pkg-1.0/hard.py", AE_IFREG, "", "", "pkg-1.0/a.py"}});
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(CheckTarGzTest, RefusesThingsThatAreNotTarGz) {
  for (const auto& [what, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"text", "print('hello')\n"},
           {"empty", ""},
           {"zip", MakeArchive({{"a.py", AE_IFREG, "x"}}, Kind::kZip)},
           {"plain tar", MakeArchive({{"a.py", AE_IFREG, "x"}}, Kind::kPlainTar)},
       }) {
    Status s = CheckTarGz(bytes, "trainer.zip");
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << what;
    EXPECT_THAT(s.message(),
                HasSubstr("trainer.zip: not a gzip-compressed tar archive (build one with 'python3 "
                          "setup.py sdist' or let 'stoker jobs submit --package-path' pack it)"))
        << what;
  }
  std::string noise(100000, '\0');
  uint32_t x = 12345;  // a fixed LCG: incompressible, so the cut lands inside the entry
  for (char& c : noise) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  std::string truncated = MakeArchive({{"a.py", AE_IFREG, noise}});
  truncated.resize(truncated.size() / 2);
  EXPECT_FALSE(CheckTarGz(truncated, "t").ok());
}

TEST(CheckTarGzTest, RefusesHostileEntriesNamingThem) {
  struct Case {
    std::string what;
    std::vector<TarMember> members;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"dotdot", {{"../evil", AE_IFREG, "x"}}, "entry '../evil'"},
      {"nested dotdot", {{"pkg/../../evil", AE_IFREG, "x"}}, "'..'"},
      {"absolute", {{"/etc/cron.d/evil", AE_IFREG, "x"}}, "absolute path"},
      {"symlink to /etc/passwd", {{"pkg/passwd", AE_IFLNK, "", "/etc/passwd"}}, "/etc/passwd"},
      {"symlink climbing out", {{"pkg/up", AE_IFLNK, "", "../../x"}}, "outside the archive"},
      {"symlink through symlink",
       {{"d", AE_IFLNK, "", "."}, {"l", AE_IFLNK, "", "d/../x"}},
       "through another symlink"},
      {"entry under a symlink",
       {{"pkg/dir", AE_IFLNK, "", "."}, {"pkg/dir/x.py", AE_IFREG, "x"}},
       "under the symlink"},
      {"entry under a later symlink",
       {{"pkg/dir/x.py", AE_IFREG, "x"}, {"pkg/dir", AE_IFLNK, "", "."}},
       "under the symlink"},
      {"hardlink out", {{"pkg/h", AE_IFREG, "", "", "../../etc/passwd"}}, "hard link"},
      {"hardlink absolute", {{"pkg/h", AE_IFREG, "", "", "/etc/passwd"}}, "hard link"},
      {"hardlink to symlink",
       {{"a/b/l", AE_IFLNK, "", "../.."}, {"l2", AE_IFREG, "", "", "a/b/l"}},
       "hard link to the symlink"},
      {"char device", {{"pkg/null", AE_IFCHR}}, "device file"},
      {"block device", {{"pkg/sda", AE_IFBLK}}, "device file"},
      {"fifo", {{"pkg/pipe", AE_IFIFO}}, "fifo"},
  };
  for (const Case& c : cases) {
    Status s = CheckMembers(c.members);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.what;
    EXPECT_THAT(s.message(), HasSubstr("pkg.tar.gz: ")) << c.what;
    EXPECT_THAT(s.message(), HasSubstr(c.expect)) << c.what << ": " << s.message();
  }
}

TEST(CheckTarGzTest, EnforcesEntryAndByteLimits) {
  std::vector<TarMember> many;
  for (int i = 0; i < 5; ++i) many.push_back({"f" + std::to_string(i), AE_IFREG, "x"});
  ArchiveLimits few;
  few.max_entries = 4;
  Status s = CheckMembers(many, few);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("more than 4 entries"));
  few.max_entries = 5;
  EXPECT_TRUE(CheckMembers(many, few).ok());

  ArchiveLimits small;
  small.max_total_bytes = 1000;
  Status big = CheckMembers(
      {{"a", AE_IFREG, std::string(600, 'a')}, {"b", AE_IFREG, std::string(600, 'b')}}, small);
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  EXPECT_THAT(big.message(), HasSubstr("more than 1000 bytes (at 'b')"));
}

TEST(ExtractTarGzTest, WritesNothingWhenAnyEntryIsRefused) {
  TempDir dir;
  WriteText(dir.path() / "bad.tar.gz",
            MakeArchive({{"ok.py", AE_IFREG, "x"}, {"../evil", AE_IFREG, "boom"}}));
  Status s = ExtractTarGz(dir.path() / "bad.tar.gz", dir.path() / "out" / "x");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'../evil'"));
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "x" / "ok.py"));
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "evil"));
  EXPECT_EQ(ExtractTarGz(dir.path() / "absent.tar.gz", dir.path() / "o").code(), Code::kNotFound);
}

TEST(ExtractTarGzTest, UnpacksLinksAndSaneModes) {
  TempDir dir;
  WriteText(dir.path() / "a.tar.gz", MakeArchive({{"./", AE_IFDIR},
                                                  {"p/a.py", AE_IFREG, "a"},
                                                  {"p/l.py", AE_IFLNK, "", "a.py"},
                                                  {"p/h.py", AE_IFREG, "", "", "p/a.py"}}));
  fs::path out = dir.path() / "out";
  Status s = ExtractTarGz(dir.path() / "a.tar.gz", out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadText(out / "p" / "a.py"), "a");
  EXPECT_TRUE(fs::is_symlink(out / "p" / "l.py"));
  EXPECT_EQ(ReadText(out / "p" / "l.py"), "a");
  EXPECT_EQ(ReadText(out / "p" / "h.py"), "a");
  struct stat st;
  ASSERT_EQ(::stat((out / "p" / "a.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07000, 0u);
  EXPECT_EQ(st.st_uid, ::getuid());
}

TEST(ExtractTarGzTest, RefusesToWriteThroughAnExistingSymlinkInDest) {
  TempDir dir, outside;
  fs::path out = dir.path() / "out";
  fs::create_directories(out);
  fs::create_directory_symlink(outside.path(), out / "p");
  WriteText(dir.path() / "a.tar.gz", MakeArchive({{"p/x.py", AE_IFREG, "x"}}));
  EXPECT_FALSE(ExtractTarGz(dir.path() / "a.tar.gz", out).ok());
  EXPECT_FALSE(fs::exists(outside.path() / "x.py"));
}

// -------------------------------------------------------------------- sdists

TEST(PackSdistTest, RoundTripsThroughExtract) {
  TempDir src, dest;
  WriteText(src.path() / "trainer" / "__init__.py", "");
  WriteText(src.path() / "trainer" / "task.py", "VALUE = 42\n");
  WriteText(src.path() / "trainer" / "util" / "__init__.py", "");
  WriteText(src.path() / "trainer" / "__pycache__" / "task.cpython-311.pyc", "junk");
  WriteText(src.path() / "trainer" / "old.pyc", "junk");
  Result<std::string> bytes = PackSdist(src.path() / "trainer", "trainer", "0.1");
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_TRUE(CheckTarGz(*bytes, "sdist").ok());
  WriteText(src.path() / "trainer-0.1.tar.gz", *bytes);
  Status s = ExtractTarGz(src.path() / "trainer-0.1.tar.gz", dest.path());
  ASSERT_TRUE(s.ok()) << s.ToString();

  fs::path root = dest.path() / "trainer-0.1";
  EXPECT_EQ(ReadText(root / "trainer" / "task.py"), "VALUE = 42\n");
  EXPECT_TRUE(fs::exists(root / "trainer" / "util" / "__init__.py"));
  EXPECT_FALSE(fs::exists(root / "trainer" / "__pycache__"));
  EXPECT_FALSE(fs::exists(root / "trainer" / "old.pyc"));
  EXPECT_EQ(ReadText(root / "PKG-INFO"), "Metadata-Version: 1.0\nName: trainer\nVersion: 0.1\n");
  EXPECT_EQ(ReadText(root / "setup.py"),
            "from setuptools import setup, find_packages\n"
            "setup(name='trainer', version='0.1', packages=find_packages())\n");
  EXPECT_EQ(SdistRoots(dest.path()), std::vector<fs::path>{root});
}

TEST(PackSdistTest, SameTreeGivesSameBytes) {
  TempDir src;
  WriteText(src.path() / "trainer" / "__init__.py", "");
  WriteText(src.path() / "trainer" / "b.py", "b\n");
  WriteText(src.path() / "trainer" / "a.py", "a\n");
  Result<std::string> first = PackSdist(src.path() / "trainer", "trainer", "0.1");
  fs::last_write_time(src.path() / "trainer" / "a.py",
                      fs::last_write_time(src.path() / "trainer" / "a.py") - std::chrono::hours(5));
  Result<std::string> second = PackSdist(src.path() / "trainer/", "trainer", "0.1");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  ASSERT_GT(first->size(), 10u);
  // The gzip header carries no timestamp (bytes 4-7).
  EXPECT_EQ(first->substr(4, 4), std::string(4, '\0'));
}

TEST(PackSdistTest, UsesTheUsersSetupPyAndPacksPackagesWithoutInit) {
  TempDir src, dest;
  WriteText(src.path() / "setup.py", "# mine\n");
  WriteText(src.path() / "pyproject.toml", "[project]\n");
  WriteText(src.path() / "trainer" / "task.py", "print('hi')\n");
  Result<std::string> bytes = PackSdist(src.path() / "trainer", "my_trainer", "2.0");
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  WriteText(src.path() / "p.tar.gz", *bytes);
  ASSERT_TRUE(ExtractTarGz(src.path() / "p.tar.gz", dest.path()).ok());
  fs::path root = dest.path() / "my_trainer-2.0";
  EXPECT_EQ(ReadText(root / "setup.py"), "# mine\n");
  EXPECT_EQ(ReadText(root / "pyproject.toml"), "[project]\n");
  EXPECT_FALSE(fs::exists(root / "setup.cfg"));
  EXPECT_EQ(ReadText(root / "trainer" / "task.py"), "print('hi')\n");
}

TEST(PackSdistTest, RefusesBadNamesAndMissingDirectories) {
  TempDir src;
  WriteText(src.path() / "trainer" / "task.py", "");
  EXPECT_EQ(PackSdist(src.path() / "trainer", "x'); import os; ('", "0.1").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(PackSdist(src.path() / "trainer", "trainer", "../1").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(PackSdist(src.path() / "absent", "trainer", "0.1").status().code(), Code::kNotFound);
}

TEST(PackSdistTest, ExtractedPackageImportsInPython) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir src, dest;
  WriteText(src.path() / "trainer" / "__init__.py", "");
  WriteText(src.path() / "trainer" / "task.py",
            "from trainer import helper\nassert helper.VALUE == 42\n");
  WriteText(src.path() / "trainer" / "helper.py", "VALUE = 42\n");
  Result<std::string> bytes = PackSdist(src.path() / "trainer", "trainer", "0.1");
  ASSERT_TRUE(bytes.ok());
  WriteText(src.path() / "t.tar.gz", *bytes);
  ASSERT_TRUE(ExtractTarGz(src.path() / "t.tar.gz", dest.path()).ok());
  std::vector<fs::path> roots = SdistRoots(dest.path());
  ASSERT_EQ(roots.size(), 1u);
  std::string cmd = "/usr/bin/python3 -B -c \"import sys; sys.path.insert(0, '" +
                    roots[0].string() + "'); import trainer.task\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string bad = "/usr/bin/python3 -B -c \"import sys; sys.path.insert(0, '" +
                    dest.path().string() + "'); import trainer.task\" 2>/dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

TEST(SdistRootsTest, ReturnsDestForABarePackageArchive) {
  TempDir dest;
  EXPECT_TRUE(SdistRoots(dest.path()).empty());
  WriteText(dest.path() / "b-1" / "setup.py", "");
  WriteText(dest.path() / "a-1" / "setup.py", "");
  EXPECT_EQ(SdistRoots(dest.path()),
            (std::vector<fs::path>{dest.path() / "a-1", dest.path() / "b-1"}));

  TempDir bare;
  WriteText(bare.path() / "trainer" / "__init__.py", "");
  EXPECT_EQ(SdistRoots(bare.path()), std::vector<fs::path>{bare.path()});
  TempDir module;
  WriteText(module.path() / "task.py", "");
  EXPECT_EQ(SdistRoots(module.path()), std::vector<fs::path>{module.path()});
}

// ------------------------------------------------------ streamed object I/O

TEST(HasherTest, GivesCloudStoragesChecksums) {
  Hasher h;
  h.Update("hello ");
  h.Update("world");
  // What `gsutil hash` prints for "hello world".
  EXPECT_EQ(h.Crc32cBase64(), "yZRlqg==");
  EXPECT_EQ(h.Md5Base64(), "XrY7u+Ae7tCTyyK7j1rNww==");
  EXPECT_EQ(h.bytes(), 11u);
  Hasher copy = h;
  copy.Update("!");
  EXPECT_EQ(h.Md5Base64(), "XrY7u+Ae7tCTyyK7j1rNww==");  // the copy goes on alone
  EXPECT_NE(copy.Md5Base64(), h.Md5Base64());
}

TEST_F(BucketsTest, AStreamedObjectAppearsOnlyWhenCommitted) {
  auto w = buckets_.OpenWriter("data", "deep/dir/obj.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Append("hello ").ok());
  ASSERT_TRUE((*w)->Append("world").ok());
  // Not visible, neither by name nor in a listing, before Commit.
  EXPECT_EQ(buckets_.Stat("data", "deep/dir/obj.bin").status().code(), Code::kNotFound);
  EXPECT_TRUE(buckets_.List("data", "")->empty());
  auto info = (*w)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 11u);
  EXPECT_EQ(info->crc32c, "yZRlqg==");
  EXPECT_EQ(info->md5, "XrY7u+Ae7tCTyyK7j1rNww==");
  EXPECT_EQ(ReadText(Bucket() / "deep/dir/obj.bin"), "hello world");
  auto listed = buckets_.List("data", "deep/");
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "deep/dir/obj.bin");
  EXPECT_EQ((*listed)[0].md5, "XrY7u+Ae7tCTyyK7j1rNww==");  // kept from the upload

  // A writer dropped before Commit (a broken upload) leaves nothing behind.
  {
    auto broken = buckets_.OpenWriter("data", "deep/dir/obj.bin");
    ASSERT_TRUE(broken.ok());
    ASSERT_TRUE((*broken)->Append("partial").ok());
  }
  EXPECT_EQ(ReadText(Bucket() / "deep/dir/obj.bin"), "hello world");
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(Bucket() / "deep/dir")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST_F(BucketsTest, ChecksumsOfAnObjectChangedInPlaceAreComputedAgain) {
  WriteText(Bucket() / "made-by-trainer.txt", "hello world");
  auto info = buckets_.Stat("data", "made-by-trainer.txt");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->crc32c, "yZRlqg==");
  WriteText(Bucket() / "made-by-trainer.txt", "hello world, again");
  info = buckets_.Stat("data", "made-by-trainer.txt");
  ASSERT_TRUE(info.ok());
  Hasher h;
  h.Update("hello world, again");
  EXPECT_EQ(info->md5, h.Md5Base64());
  EXPECT_EQ(info->size, 18u);
}

TEST_F(BucketsTest, WritersNeverGoThroughALinkInTheBucket) {
  TempDir outside;
  fs::create_symlink(outside.path(), Bucket() / "link");
  auto w = buckets_.OpenWriter("data", "link/obj");
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(fs::is_empty(outside.path()));
  fs::create_symlink(outside.path() / "target", Bucket() / "file-link");
  auto open = buckets_.Open("data", "file-link", false);
  EXPECT_FALSE(open.ok());
  EXPECT_EQ(buckets_.OpenWriter("stoker-staging", "x").status().code(), Code::kPermissionDenied);
  fs::create_directories(Bucket() / "adir");
  EXPECT_EQ(buckets_.OpenWriter("data", "adir").status().code(), Code::kFailedPrecondition);
}

TEST_F(BucketsTest, DeleteRemovesTheObjectAndTheDirectoriesItLeavesEmpty) {
  ASSERT_TRUE(buckets_.Put("data", "a/b/c.txt", "x").ok());
  ASSERT_TRUE(buckets_.Put("data", "a/keep.txt", "y").ok());
  ASSERT_TRUE(buckets_.Delete("data", "a/b/c.txt").ok());
  EXPECT_FALSE(fs::exists(Bucket() / "a" / "b"));
  EXPECT_TRUE(fs::exists(Bucket() / "a" / "keep.txt"));
  EXPECT_EQ(buckets_.Delete("data", "a/b/c.txt").code(), Code::kNotFound);
  EXPECT_EQ(buckets_.Delete("data", "a").code(), Code::kNotFound);  // a prefix, not an object
}

TEST_F(BucketsTest, StagingAStreamedArchiveKeepsItUnderItsHash) {
  TempDir src;
  std::string bytes = SmallPackage(src.path());
  auto w = buckets_.StageWriter();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Append(bytes.substr(0, 10)).ok());
  ASSERT_TRUE((*w)->Append(bytes.substr(10)).ok());
  auto uri = buckets_.StageCommit(std::move(*w));
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  EXPECT_EQ(*uri, *buckets_.Stage(bytes));  // the same name as a collected one

  auto bad = buckets_.StageWriter();
  ASSERT_TRUE((*bad)->Append("not an archive").ok());
  EXPECT_EQ(buckets_.StageCommit(std::move(*bad)).status().code(), Code::kInvalidArgument);
}

// ------------------------------------------------------ resumable sessions

class UploadSessionsTest : public BucketsTest {
 protected:
  UploadSessionsTest() : sessions_(dir_.path() / "uploads", &buckets_) {}

  // Sends bytes [first, first+len) of `content` as one chunk.
  Result<UploadSessions::Outcome> Send(UploadSessions& sessions, const std::string& id,
                                       const std::string& content, uint64_t first, uint64_t len,
                                       int64_t total) {
    STOKER_ASSIGN_OR_RETURN(auto chunk, sessions.OpenChunk(id, first, len, total));
    STOKER_RETURN_IF_ERROR(chunk->Append(std::string_view(content).substr(first, len)));
    return chunk->Finish();
  }

  UploadSessions sessions_;
};

TEST_F(UploadSessionsTest, ChunksInOrderMakeTheObjectAtTheLastByte) {
  std::string content(300000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7);
  auto s = sessions_.Start("data", "big/obj", -1, "alice");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto first = Send(sessions_, s->id, content, 0, 100000, -1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->object);
  EXPECT_EQ(first->session.received, 100000u);
  // A resent chunk that overlaps what the session has: the known part is skipped.
  auto resent = Send(sessions_, s->id, content, 50000, 150000, 300000);
  ASSERT_TRUE(resent.ok()) << resent.status().ToString();
  EXPECT_EQ(resent->session.received, 200000u);
  // A chunk past the end of what it has is refused, saying where it stands.
  auto gap = Send(sessions_, s->id, content, 250000, 50000, 300000);
  ASSERT_FALSE(gap.ok());
  EXPECT_THAT(gap.status().message(), HasSubstr("resend from byte 200000"));
  auto last = Send(sessions_, s->id, content, 200000, 100000, 300000);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_TRUE(last->object);
  Hasher h;
  h.Update(content);
  EXPECT_EQ(last->object->md5, h.Md5Base64());
  EXPECT_EQ(last->object->crc32c, h.Crc32cBase64());
  EXPECT_EQ(ReadText(Bucket() / "big/obj"), content);
  // The session is gone with its files.
  EXPECT_EQ(sessions_.Get(s->id).status().code(), Code::kNotFound);
  EXPECT_TRUE(fs::is_empty(dir_.path() / "uploads"));
}

TEST_F(UploadSessionsTest, ARestartedDaemonResumesFromTheFilesOnDisk) {
  std::string content = "0123456789abcdefghij";
  auto s = sessions_.Start("data", "obj", 20, "");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(Send(sessions_, s->id, content, 0, 8, 20).ok());
  {
    // A chunk broken off half-way keeps what arrived.
    auto chunk = sessions_.OpenChunk(s->id, 8, 8, 20);
    ASSERT_TRUE(chunk.ok());
    ASSERT_TRUE((*chunk)->Append("89ab").ok());
  }
  UploadSessions after_restart(dir_.path() / "uploads", &buckets_);
  auto got = after_restart.Get(s->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->received, 12u);
  EXPECT_EQ(got->size, 20);
  auto last = Send(after_restart, s->id, content, 12, 8, 20);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_TRUE(last->object);
  Hasher h;
  h.Update(content);
  EXPECT_EQ(last->object->crc32c, h.Crc32cBase64());
  EXPECT_EQ(ReadText(Bucket() / "obj"), content);
}

TEST_F(UploadSessionsTest, RefusesUnknownIdsChangedSizesAndASecondWriter) {
  EXPECT_EQ(sessions_.Get("../../etc/passwd").status().code(), Code::kNotFound);
  EXPECT_EQ(sessions_.Get(std::string(32, 'a')).status().code(), Code::kNotFound);
  auto s = sessions_.Start("data", "obj", 10, "");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(sessions_.OpenChunk(s->id, 0, 5, 11).status().code(), Code::kInvalidArgument);
  auto open = sessions_.OpenChunk(s->id, 0, 5, 10);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(sessions_.OpenChunk(s->id, 0, 5, 10).status().code(), Code::kUnavailable);
  open->reset();
  EXPECT_TRUE(sessions_.Cancel(s->id).ok());
  EXPECT_EQ(sessions_.Get(s->id).status().code(), Code::kNotFound);
  EXPECT_EQ(sessions_.Start("data", "dir/", -1, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(sessions_.Start("nobucket", "x", -1, "").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace stoker::storage
