#include "api/console_links.h"

#include "gtest/gtest.h"

namespace stoker::api::console {
namespace {

TEST(SignInLinksTest, ACodeStandsForItsCallerOnce) {
  int64_t now = 1'000'000'000;
  SignInLinks links([&] { return now; });
  auth::Principal alice{"alice", auth::Role::kUser, "", "tok-a"};
  auto link = links.Issue(alice);
  ASSERT_TRUE(link.ok()) << link.status().message();
  EXPECT_EQ(link->code.size(), 64u);
  EXPECT_EQ(link->code.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(link->expire_time_us, now + kSignInLinkSeconds * 1'000'000);

  auto who = links.Redeem(link->code);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->user, "alice");
  EXPECT_EQ(who->token_id, "tok-a");
  EXPECT_FALSE(links.Redeem(link->code).has_value()) << "a link opens one session";
}

TEST(SignInLinksTest, UnknownAndExpiredCodesOpenNothing) {
  int64_t now = 1'000'000'000;
  SignInLinks links([&] { return now; });
  auto a = links.Issue({"alice", auth::Role::kUser, "", "tok-a"});
  auto b = links.Issue({"bob", auth::Role::kViewer, "", "tok-b"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->code, b->code);
  EXPECT_FALSE(links.Redeem(std::string(64, '0')).has_value());
  EXPECT_FALSE(links.Redeem("").has_value());

  now += kSignInLinkSeconds * 1'000'000;  // the moment it expires
  EXPECT_FALSE(links.Redeem(a->code).has_value());
  // An expired link is forgotten when the next one is issued, and stays unusable.
  ASSERT_TRUE(links.Issue({"carol", auth::Role::kAdmin, "", "tok-c"}).ok());
  EXPECT_FALSE(links.Redeem(b->code).has_value());
}

}  // namespace
}  // namespace stoker::api::console
