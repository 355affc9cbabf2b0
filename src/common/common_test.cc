#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/crc32c.h"
#include "common/files.h"
#include "common/json_yaml.h"
#include "common/strings.h"
#include "common/time.h"

namespace stoker {
namespace {

TEST(TimeTest, FormatsRfc3339InUtcWithMicros) {
  EXPECT_EQ(FormatRfc3339(1716000000123456), "2024-05-18T02:40:00.123456Z");
}

TEST(TimeTest, MonotonicMsNeverGoesBackAndCountsMilliseconds) {
  int64_t a = MonotonicMs();
  ::usleep(20000);
  int64_t b = MonotonicMs();
  EXPECT_GE(b - a, 20);
  EXPECT_LT(b - a, 20000);  // milliseconds, not microseconds
}

TEST(TimeTest, ParsesDurationsWithAndWithoutSuffix) {
  EXPECT_DOUBLE_EQ(ParseDuration("3600s", "f").value(), 3600);
  EXPECT_DOUBLE_EQ(ParseDuration("0.5s", "f").value(), 0.5);
  EXPECT_DOUBLE_EQ(ParseDuration("10", "f").value(), 10);
  Result<double> bad = ParseDuration("1h", "scheduling.timeout");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("scheduling.timeout"), std::string::npos);
  EXPECT_EQ(FormatDuration(604800), "604800s");
  EXPECT_EQ(FormatDuration(1234567.5), "1234567.5s");
}

TEST(JsonYamlTest, KeepsQuotedNumbersAsStrings) {
  auto j = ParseYamlOrJson("a: 1\nb: '1'\nc: [x, 2.5]\nd: true\n", "f.yaml");
  ASSERT_TRUE(j.ok());
  EXPECT_TRUE((*j)["a"].is_number_integer());
  EXPECT_TRUE((*j)["b"].is_string());
  EXPECT_TRUE((*j)["c"][1].is_number_float());
  EXPECT_TRUE((*j)["d"].is_boolean());
}

TEST(JsonYamlTest, ParsesJsonToo) {
  auto j = ParseYamlOrJson(R"({"displayName": "x", "n": "2"})", "f.json");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["displayName"], "x");
  EXPECT_EQ((*j)["n"], "2");
}

TEST(JsonYamlTest, ReportsSyntaxErrorsWithSourceAndLine) {
  auto j = ParseYamlOrJson("a: [1, 2\nb: c\n", "job.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(j.status().message().rfind("job.yaml:", 0), 0u);
}

TEST(FilesTest, WritesAtomicallyAndReadsBack) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_files_" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "a.json", "{\"x\":1}").ok());
  EXPECT_EQ(ReadFile(dir / "a.json").value(), "{\"x\":1}");
  EXPECT_EQ(ReadFile(dir / "missing").status().code(), Code::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, ReadsLargeFilesAndFilesWithoutASize) {
  auto dir = std::filesystem::temp_directory_path() / ("stoker_read_" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::string big(3 * 1000 * 1000 + 7, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  ASSERT_TRUE(WriteFileAtomic(dir / "big", big, Durability::kNoSync).ok());
  EXPECT_EQ(ReadFile(dir / "big").value(), big);
  ASSERT_TRUE(WriteFileAtomic(dir / "empty", "", Durability::kNoSync).ok());
  EXPECT_EQ(ReadFile(dir / "empty").value(), "");
  // procfs files stat as empty; their content is read all the same.
  EXPECT_NE(ReadFile("/proc/self/status").value().find("Pid:"), std::string::npos);
  EXPECT_FALSE(ReadFile(dir).ok());  // a directory
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, AppendLineNoFollowCreatesTheDirectoryAndAppends) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_nofollow_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(AppendLineNoFollow(dir, "sub/f.txt", "one").ok());
  ASSERT_TRUE(AppendLineNoFollow(dir, "sub/f.txt", "two").ok());
  EXPECT_EQ(ReadFile(dir / "sub/f.txt").value(), "one\ntwo\n");
  EXPECT_EQ(AppendLineNoFollow(dir, "../f.txt", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(AppendLineNoFollow(dir, "/etc/f.txt", "x").code(), Code::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, AppendLineNoFollowRefusesSymlinksAtEveryComponent) {
  // Whoever owns `dir` (a trainer) must not make root append elsewhere.
  auto base =
      std::filesystem::temp_directory_path() / ("stoker_links_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  auto dir = base / "replica", victim = base / "victim";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(MakeDirs(victim).ok());
  ASSERT_TRUE(WriteFileAtomic(victim / "f.txt", "victim\n").ok());

  std::filesystem::create_directory_symlink(victim, dir / "sub");  // a linked directory
  Status s = AppendLineNoFollow(dir, "sub/f.txt", "x");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.message();
  EXPECT_NE(s.message().find((dir / "sub").string()), std::string::npos) << s.message();
  std::filesystem::remove(dir / "sub");

  ASSERT_TRUE(MakeDirs(dir / "sub").ok());  // a linked file
  std::filesystem::create_symlink(victim / "f.txt", dir / "sub/f.txt");
  EXPECT_EQ(AppendLineNoFollow(dir, "sub/f.txt", "x").code(), Code::kFailedPrecondition);
  std::filesystem::remove(dir / "sub/f.txt");
  std::filesystem::create_symlink(victim / "new.txt", dir / "sub/f.txt");  // dangling
  EXPECT_EQ(AppendLineNoFollow(dir, "sub/f.txt", "x").code(), Code::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(victim / "new.txt"));
  std::filesystem::remove(dir / "sub/f.txt");
  std::filesystem::create_hard_link(victim / "f.txt", dir / "sub/f.txt");  // a hard link
  EXPECT_EQ(AppendLineNoFollow(dir, "sub/f.txt", "x").code(), Code::kFailedPrecondition);
  std::filesystem::remove(dir / "sub/f.txt");
  ASSERT_EQ(::mkfifo((dir / "sub/f.txt").c_str(), 0644), 0);  // would block an open
  EXPECT_EQ(AppendLineNoFollow(dir, "sub/f.txt", "x").code(), Code::kFailedPrecondition);

  std::filesystem::create_directory_symlink(victim, base / "link");  // `dir` itself
  EXPECT_EQ(AppendLineNoFollow(base / "link", "f.txt", "x").code(), Code::kFailedPrecondition);
  EXPECT_EQ(ReadFile(victim / "f.txt").value(), "victim\n");
  std::filesystem::remove_all(base);
}

TEST(FilesTest, ReadFileNoFollowReadsOnlyARegularFileBelowTheDirectory) {
  // A trainer must not point root's reads elsewhere or block them on a FIFO.
  auto base =
      std::filesystem::temp_directory_path() / ("stoker_reads_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  auto dir = base / "replica", secret = base / "secret";
  ASSERT_TRUE(MakeDirs(dir / "sub").ok());
  ASSERT_TRUE(MakeDirs(secret).ok());
  ASSERT_TRUE(WriteFileAtomic(secret / "f.txt", "secret\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "sub/f.txt", "mine\n").ok());
  EXPECT_EQ(ReadFileNoFollow(dir, "sub/f.txt").value(), "mine\n");
  EXPECT_EQ(ReadFileNoFollow(dir, "sub/none.txt").status().code(), Code::kNotFound);
  EXPECT_EQ(ReadFileNoFollow(dir, "nodir/f.txt").status().code(), Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir / "nodir"));  // creates nothing
  EXPECT_EQ(ReadFileNoFollow(dir, "../secret/f.txt").status().code(), Code::kInvalidArgument);

  std::filesystem::create_directory_symlink(secret, dir / "linked");  // a linked directory
  EXPECT_EQ(ReadFileNoFollow(dir, "linked/f.txt").status().code(), Code::kFailedPrecondition);
  std::filesystem::remove(dir / "sub/f.txt");
  std::filesystem::create_symlink(secret / "f.txt", dir / "sub/f.txt");  // a linked file
  EXPECT_EQ(ReadFileNoFollow(dir, "sub/f.txt").status().code(), Code::kFailedPrecondition);
  std::filesystem::remove(dir / "sub/f.txt");
  std::filesystem::create_hard_link(secret / "f.txt", dir / "sub/f.txt");  // a hard link
  EXPECT_EQ(ReadFileNoFollow(dir, "sub/f.txt").status().code(), Code::kFailedPrecondition);
  std::filesystem::remove(dir / "sub/f.txt");
  ASSERT_EQ(::mkfifo((dir / "sub/f.txt").c_str(), 0644), 0);  // would block a plain read
  EXPECT_EQ(ReadFileNoFollow(dir, "sub/f.txt").status().code(), Code::kFailedPrecondition);
  std::filesystem::remove_all(base);
}

TEST(FilesTest, WriteFileAtomicNeverWritesThroughAPlantedTempLink) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_tmplink_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "victim", "victim").ok());
  // The first temp names this process may use next.
  for (int i = 0; i < 256; ++i) {
    std::filesystem::create_symlink(
        dir / "victim",
        dir / ("a.json.tmp." + std::to_string(::getpid()) + "." + std::to_string(i)));
  }
  ASSERT_TRUE(WriteFileAtomic(dir / "a.json", "new").ok());
  EXPECT_EQ(ReadFile(dir / "a.json").value(), "new");
  EXPECT_EQ(ReadFile(dir / "victim").value(), "victim");
  std::filesystem::remove_all(dir);
}

// Sets an environment variable for one scope and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(FilesTest, DefaultHomeIsStokerHomeThenByAccount) {
  ScopedEnv home("HOME", "/home/ada");
  {
    ScopedEnv stoker_home("STOKER_HOME", "/data/stoker");
    EXPECT_EQ(DefaultStokerHome(), "/data/stoker");
  }
  ScopedEnv no_stoker_home("STOKER_HOME", nullptr);
  // Root's trainers run as another account, which cannot enter /root.
  EXPECT_EQ(DefaultStokerHome(), ::geteuid() == 0 ? std::filesystem::path("/var/lib/stoker")
                                                  : "/home/ada/.local/share/stoker");
}

TEST(TimeTest, ParsesRfc3339Timestamps) {
  constexpr int64_t kMay18 = 1621296000LL * 1000000;
  EXPECT_EQ(ParseRfc3339Micros("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339Micros("2021-05-18T00:00:00Z"), kMay18);
  EXPECT_EQ(ParseRfc3339Micros("2021-05-18T00:00:00.123456Z"), kMay18 + 123456);
  EXPECT_EQ(ParseRfc3339Micros("2021-05-17T19:00:00-05:00"), kMay18);
  EXPECT_EQ(ParseRfc3339Micros("2024-02-29T00:00:00Z").has_value(), true);
  for (const char* bad :
       {"2021-05-18", "2021-13-01T00:00:00Z", "2021-02-29T00:00:00Z", "2021-05-18T00:00:00",
        "2021-05-18T24:00:00Z", "yesterday", "2021-05-18T00:00:00Zjunk", "2021-05-18T00:00:00.Z"}) {
    EXPECT_FALSE(ParseRfc3339Micros(bad).has_value()) << bad;
  }
}

// An empty directory of this test's own under the temp dir.
std::filesystem::path FreshDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(FilesTest, ReadsNoFollowWithinABoundAndBelievesOnlyOwnFiles) {
  namespace fs = std::filesystem;
  fs::path dir = FreshDir("stoker_bounded");
  ASSERT_TRUE(WriteFileAtomic(dir / "f", std::string(1000, 'x')).ok());
  EXPECT_EQ(ReadFileNoFollow(dir, "f", 1000).value().size(), 1000u);
  EXPECT_EQ(ReadFileNoFollow(dir, "f", 999).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(ReadOwnFileNoFollow(dir, "f", 1000).value().size(), 1000u);
  // Writable by others: another account could have written it.
  ASSERT_EQ(::chmod((dir / "f").c_str(), 0666), 0);
  Result<std::string> open_to_all = ReadOwnFileNoFollow(dir, "f");
  EXPECT_EQ(open_to_all.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(open_to_all.status().message().find("not believed"), std::string::npos);
  // A FIFO neither blocks nor reads: the caller gets an answer at once.
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadOwnFileNoFollow(dir, "fifo").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(OpenReadNoFollow(dir, "fifo").status().code(), Code::kFailedPrecondition);
  fs::create_symlink(dir / "f", dir / "link");
  EXPECT_EQ(OpenReadNoFollow(dir, "link").status().code(), Code::kFailedPrecondition);
  fs::remove_all(dir);
}

TEST(FilesTest, RemoveTreeNoFollowNeverLeavesTheTree) {
  namespace fs = std::filesystem;
  fs::path base = FreshDir("stoker_rmtree");
  fs::path tree = base / "tree", outside = base / "outside";
  fs::create_directories(tree / "a/b/c");
  fs::create_directories(outside / "keep");
  ASSERT_TRUE(WriteFileAtomic(outside / "keep/file", "precious").ok());
  ASSERT_TRUE(WriteFileAtomic(tree / "a/b/c/f", "x").ok());
  fs::create_directory_symlink(outside, tree / "a/link");  // rm -rf must not go in
  fs::create_symlink(outside / "keep/file", tree / "a/b/filelink");
  ASSERT_TRUE(RemoveTreeNoFollow(tree).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(ReadFile(outside / "keep/file").value(), "precious");
  EXPECT_TRUE(RemoveTreeNoFollow(tree).ok());  // gone already: fine
  fs::remove_all(base);
}

TEST(FilesTest, WritesBelowADirectoryWithoutFollowingLinksAndWithTheModesAsked) {
  namespace fs = std::filesystem;
  fs::path base = FreshDir("stoker_below");
  fs::path bucket = base / "bucket", outside = base / "outside";
  fs::create_directories(bucket);
  fs::create_directories(outside);
  CreateModes modes{02775, 0664, static_cast<int64_t>(::getegid())};
  ASSERT_TRUE(WriteFileBelow(bucket, "a/b/obj", "data", modes).ok());
  EXPECT_EQ(ReadFile(bucket / "a/b/obj").value(), "data");
  struct stat st {};
  ASSERT_EQ(::stat((bucket / "a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02775u);  // whatever the umask
  ASSERT_EQ(::stat((bucket / "a/b/obj").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0664u);
  ASSERT_TRUE(WriteFileBelow(bucket, "a/b/obj", "new", modes).ok());  // replaces
  EXPECT_EQ(ReadFile(bucket / "a/b/obj").value(), "new");
  // A directory swapped for a link (by an account that may write the
  // bucket) is refused, and nothing lands behind it.
  fs::create_directory_symlink(outside, bucket / "link");
  Status s = WriteFileBelow(bucket, "link/obj", "evil", modes);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(MakeDirsBelow(bucket, "link/sub", modes).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(WriteFileBelow(bucket, "../escape", "x").code(), Code::kInvalidArgument);
  ASSERT_TRUE(MakeDirsBelow(bucket, "x/y/", modes).ok());
  EXPECT_TRUE(fs::is_directory(bucket / "x/y"));
  fs::remove_all(base);
}

TEST(JsonYamlTest, RefusesAliasBombs) {
  // Nine levels of nine aliases each: 9^9 (387 million) scalars if expanded.
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 9; ++k) text += ", " + prev;
    text += "]\n";
  }
  Result<nlohmann::json> r = ParseYamlOrJson(text, "job.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("job.yaml: expands to more than"), std::string::npos)
      << r.status().message();
  // A few aliases, as real files use them, still work.
  auto ok = ParseYamlOrJson("base: &b {x: 1}\nuse: *b\n", "f");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["use"]["x"], 1);
}

// ---- CRC-32C ----

TEST(Crc32cTest, MatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // Continuing a CRC over a split input gives the CRC of the whole.
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xE3069283u);
  std::string zeros(32, '\0');  // RFC 3720 B.4: 32 bytes of zeros
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
}

TEST(Crc32cTest, AnySplitOfALongInputGivesTheSameCrc) {
  std::string data;
  for (int i = 0; i < 100003; ++i) data.push_back(static_cast<char>((i * 7919) >> 3));
  uint32_t whole = Crc32c(data);
  for (size_t cut : {size_t{1}, size_t{7}, size_t{8}, size_t{4097}, data.size() - 3}) {
    EXPECT_EQ(
        Crc32c(std::string_view(data).substr(cut), Crc32c(std::string_view(data).substr(0, cut))),
        whole)
        << cut;
  }
}

TEST(Crc32cTest, Base64IsTheBigEndianBytesAsCloudStorageShowsThem) {
  EXPECT_EQ(Crc32cBase64(0), "AAAAAA==");
  // gsutil hash of "hello world": crc32c yZRlqg== (0xC99465AA).
  EXPECT_EQ(Crc32c("hello world"), 0xC99465AAu);
  EXPECT_EQ(Crc32cBase64(0xC99465AAu), "yZRlqg==");
}

TEST(StringsTest, TrimSpaceDropsWhitespaceAtBothEndsOnly) {
  EXPECT_EQ(TrimSpace("  12345;cluster\n"), "12345;cluster");
  EXPECT_EQ(TrimSpace("\t a b \r\n"), "a b");
  EXPECT_EQ(TrimSpace(" \n\t "), "");
  EXPECT_EQ(TrimSpace(""), "");
}

}  // namespace
}  // namespace stoker
