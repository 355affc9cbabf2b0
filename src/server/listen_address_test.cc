#include "server/listen_address.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::server {
namespace {

using ::testing::HasSubstr;

TEST(ParseListenListTest, ReadsOneOrSeveralAddressesInOrder) {
  auto one = ParseListenList("127.0.0.1:8470");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].host, "127.0.0.1");
  EXPECT_EQ((*one)[0].port, 8470);

  auto several = ParseListenList("127.0.0.1:8470, [::1]:9000 ,0.0.0.0:0");
  ASSERT_TRUE(several.ok()) << several.status().message();
  ASSERT_EQ(several->size(), 3u);
  EXPECT_EQ((*several)[1].host, "::1");
  EXPECT_EQ((*several)[1].port, 9000);
  EXPECT_EQ((*several)[1].ToString(), "[::1]:9000");
  EXPECT_EQ((*several)[2].ToString(), "0.0.0.0:0");
}

TEST(ParseListenListTest, NamesTheSettingAndTheEntryWhenOneIsBad) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:80x", ":8470", "::1:8470", ""}) {
    auto r = ParseListenList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("listen:")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("HOST:PORT")) << bad;
  }
  auto second = ParseListenList("127.0.0.1:8470,localhost");
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("'localhost'"));
}

TEST(BindFirstFreeTest, SkipsTakenAddressesAndSaysSo) {
  auto list = ParseListenList("127.0.0.1:8470,127.0.0.1:8471,127.0.0.1:0");
  ASSERT_TRUE(list.ok());
  std::vector<int> tried;
  std::vector<std::string> notes;
  auto bound = BindFirstFree(
      *list,
      [&](const ListenAddress& a) {
        tried.push_back(a.port);
        return a.port == 0 ? OkStatus() : Unavailable("Address already in use");
      },
      [&](const std::string& n) { notes.push_back(n); });
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(*bound, 2u);
  EXPECT_EQ(tried, (std::vector<int>{8470, 8471, 0}));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_THAT(notes[0], HasSubstr("127.0.0.1:8470 cannot be used"));
  EXPECT_THAT(notes[0], HasSubstr("trying 127.0.0.1:8471"));
}

TEST(BindFirstFreeTest, StopsAtAFailureThatIsNotATakenAddressAndAtTheLast) {
  auto list = ParseListenList("127.0.0.1:80,127.0.0.1:0");
  ASSERT_TRUE(list.ok());
  int calls = 0;
  auto denied = BindFirstFree(
      *list,
      [&](const ListenAddress&) {
        ++calls;
        return PermissionDenied("Permission denied");
      },
      [](const std::string&) {});
  EXPECT_EQ(denied.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(calls, 1);

  auto all_taken = BindFirstFree(
      *list, [](const ListenAddress&) { return Unavailable("Address already in use"); },
      [](const std::string&) {});
  EXPECT_EQ(all_taken.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace stoker::server
