// The `auth:` config section and the priority-ceiling decision.
#include "auth/policy.h"

#include <gtest/gtest.h>

namespace stoker::auth {
namespace {

using nlohmann::json;

TEST(PriorityCeilingTest, AUsersOwnCeilingWinsOverItsRoles) {
  PriorityCeilings c;  // user 100, admin 1000
  EXPECT_EQ(PriorityCeiling(c, Role::kUser, std::nullopt), 100);
  EXPECT_EQ(PriorityCeiling(c, Role::kAdmin, std::nullopt), 1000);
  EXPECT_EQ(PriorityCeiling(c, Role::kUser, 500), 500);
  EXPECT_EQ(PriorityCeiling(c, Role::kAdmin, 10), 10);  // an admin may be held lower too
}

TEST(PriorityCeilingTest, APriorityAboveTheCeilingIsLoweredWithAWarningThatSaysHowToRaiseIt) {
  PriorityDecision d = ClampPriority(1000, 100, "alice");
  EXPECT_EQ(d.priority, 100);
  EXPECT_EQ(d.warning,
            "warning: priority 1000 was lowered to 100, the highest user alice may set; an admin "
            "can raise it with `stoker admin users set-max-priority alice N`");
}

TEST(PriorityCeilingTest, APriorityAtOrBelowTheCeilingIsKeptSilently) {
  EXPECT_EQ(ClampPriority(100, 100, "a").priority, 100);
  EXPECT_EQ(ClampPriority(100, 100, "a").warning, "");
  EXPECT_EQ(ClampPriority(-1000, 0, "a").priority, -1000);
  EXPECT_EQ(ClampPriority(-1000, 0, "a").warning, "");
  // A ceiling below zero lowers even the default priority.
  EXPECT_EQ(ClampPriority(0, -5, "a").priority, -5);
}

TEST(AuthPolicyTest, ReadsCeilingsPerRoleAndTheSessionLifetime) {
  AuthPolicy p;
  ASSERT_TRUE(ParseAuthPolicy(json::parse(R"({"max_priority": {"user": 10, "admin": 900},
                                                "console_session_hours": 0.5})"),
                              "c: auth", p)
                  .ok());
  EXPECT_EQ(p.max_priority.user, 10);
  EXPECT_EQ(p.max_priority.admin, 900);
  EXPECT_EQ(p.max_priority.viewer, 0);
  EXPECT_EQ(p.console_session_seconds, 1800);
  AuthPolicy defaults;
  EXPECT_EQ(defaults.max_priority.user, 100);
  EXPECT_EQ(defaults.console_session_seconds, 12 * 3600);
}

TEST(AuthPolicyTest, BadValuesNameTheKey) {
  auto error = [](const char* text) {
    AuthPolicy p;
    return ParseAuthPolicy(json::parse(text), "c: auth", p).message();
  };
  EXPECT_NE(error(R"({"max_priority": {"user": 1001}})").find("c: auth.max_priority.user"),
            std::string::npos);
  EXPECT_NE(error(R"({"max_priority": {"user": "high"}})").find("c: auth.max_priority.user"),
            std::string::npos);
  EXPECT_NE(error(R"({"max_priority": {"boss": 5}})").find("unknown role 'boss'"),
            std::string::npos);
  EXPECT_NE(error(R"({"max_priority": 5})").find("c: auth.max_priority: must be a mapping"),
            std::string::npos);
  EXPECT_NE(error(R"({"console_session_hours": 0})").find("c: auth.console_session_hours"),
            std::string::npos);
  EXPECT_NE(error(R"({"sessions": 1})").find("c: auth.sessions: unknown key"), std::string::npos);
  EXPECT_NE(error("[]").find("c: auth: must be a mapping"), std::string::npos);
}

TEST(AuthPolicyTest, ACeilingIsAPriority) {
  EXPECT_TRUE(ValidatePriorityCeiling(-1000, "n").ok());
  EXPECT_TRUE(ValidatePriorityCeiling(1000, "n").ok());
  EXPECT_EQ(ValidatePriorityCeiling(1001, "n").code(), Code::kInvalidArgument);
  EXPECT_EQ(ValidatePriorityCeiling(-1001, "n").code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace stoker::auth
