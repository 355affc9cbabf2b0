#include "api/list_filter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stoker::api {
namespace {

using ::testing::HasSubstr;

// 2021-05-18T00:00:00Z
constexpr int64_t kMay18 = 1621296000LL * 1000000;

FilterSubject Job(std::string name, std::string state, int64_t create_us,
                  std::map<std::string, std::string> labels = {}) {
  return {std::move(name), std::move(state), create_us, std::move(labels)};
}

bool M(const std::string& filter, const FilterSubject& s) {
  auto f = ParseFilter(filter);
  EXPECT_TRUE(f.ok()) << filter << ": " << f.status().message();
  return f.ok() && f->Matches(s);
}

std::string Err(const std::string& filter) {
  auto f = ParseFilter(filter);
  EXPECT_FALSE(f.ok()) << filter;
  return f.ok() ? "" : f.status().message();
}

const FilterSubject kA = Job("my_job_1", "JOB_STATE_SUCCEEDED", kMay18 + 1000000, {{"team", "ml"}});
const FilterSubject kB = Job("other", "JOB_STATE_FAILED", kMay18 - 1000000, {{"team", "infra"}});
const FilterSubject kC = Job("my_job_2", "JOB_STATE_RUNNING", kMay18, {});

TEST(ListFilter, EmptyMatchesEverything) {
  EXPECT_TRUE(M("", kA));
  EXPECT_TRUE(M("   ", kB));
  EXPECT_TRUE(ParseFilter("")->MatchesAll());
}

TEST(ListFilter, DisplayNameEqualsAndNotEquals) {
  EXPECT_TRUE(M("display_name=\"my_job_1\"", kA));
  EXPECT_TRUE(M("display_name = my_job_1", kA));
  EXPECT_FALSE(M("display_name=my_job", kA));
  EXPECT_TRUE(M("display_name!=other", kA));
  EXPECT_FALSE(M("display_name!='other'", kB));
  EXPECT_TRUE(M("displayName=other", kB));
}

TEST(ListFilter, DisplayNameWildcard) {
  EXPECT_TRUE(M("display_name:\"my_job_*\"", kA));
  EXPECT_TRUE(M("display_name:my_job_*", kC));
  EXPECT_FALSE(M("display_name:\"my_job_*\"", kB));
  EXPECT_TRUE(M("display_name:*job*", kA));
  EXPECT_TRUE(M("display_name:*", kB));
  EXPECT_TRUE(M("display_name:\"*_1\"", kA));
  EXPECT_FALSE(M("display_name:\"*_1\"", kC));
  EXPECT_TRUE(M("display_name:other", kB));
  EXPECT_FALSE(M("display_name:oth", kB));
}

TEST(ListFilter, User) {
  FilterSubject ada = kA;
  ada.user = "ada";
  EXPECT_TRUE(M("user=ada", ada));
  EXPECT_FALSE(M("user=bob", ada));
  EXPECT_TRUE(M("user!=bob", ada));
  EXPECT_TRUE(M("user:a*", ada));
  EXPECT_FALSE(M("user=ada", kB));
  EXPECT_THAT(Err("user<ada"), HasSubstr("user supports =, != and :"));
}

TEST(ListFilter, State) {
  EXPECT_TRUE(M("state=\"JOB_STATE_SUCCEEDED\"", kA));
  EXPECT_TRUE(M("state=JOB_STATE_SUCCEEDED", kA));
  EXPECT_FALSE(M("state=JOB_STATE_SUCCEEDED", kB));
  EXPECT_TRUE(M("state!=JOB_STATE_SUCCEEDED", kB));
  EXPECT_FALSE(M("state!=JOB_STATE_FAILED", kB));
}

TEST(ListFilter, CreateTimeComparisons) {
  const std::string t = "\"2021-05-18T00:00:00Z\"";
  EXPECT_TRUE(M("create_time>" + t, kA));
  EXPECT_FALSE(M("create_time>" + t, kB));
  EXPECT_FALSE(M("create_time>" + t, kC));
  EXPECT_TRUE(M("create_time>=" + t, kC));
  EXPECT_TRUE(M("create_time<" + t, kB));
  EXPECT_TRUE(M("create_time<=" + t, kC));
  EXPECT_FALSE(M("create_time<=" + t, kA));
  EXPECT_TRUE(M("create_time=" + t, kC));
  EXPECT_TRUE(M("create_time!=" + t, kA));
  EXPECT_TRUE(M("create_time>2021-05-18T00:00:00Z", kA));  // bare
  EXPECT_TRUE(M("createTime=\"2021-05-18T02:00:00+02:00\"", kC));
  EXPECT_TRUE(M("create_time<\"2021-05-18T00:00:00.5Z\"", kC));
  EXPECT_FALSE(M("create_time<\"2021-05-18T00:00:00.000001Z\"", kA));
}

TEST(ListFilter, Labels) {
  EXPECT_TRUE(M("labels.team=ml", kA));
  EXPECT_TRUE(M("labels.team=\"ml\"", kA));
  EXPECT_FALSE(M("labels.team=ml", kB));
  EXPECT_FALSE(M("labels.team=ml", kC));
  EXPECT_TRUE(M("labels.team!=ml", kB));
  EXPECT_TRUE(M("labels.team!=ml", kC));  // no label: not equal
  EXPECT_TRUE(M("labels.team:*", kA));
  EXPECT_TRUE(M("labels.team:*", kB));
  EXPECT_FALSE(M("labels.team:*", kC));
  EXPECT_TRUE(M("labels.team:\"in*\"", kB));
  EXPECT_FALSE(M("labels.team:\"in*\"", kA));
  EXPECT_TRUE(M("labels:team", kA));
  EXPECT_FALSE(M("labels:team", kC));
  EXPECT_TRUE(M("labels.my-key.x=1", Job("n", "JOB_STATE_RUNNING", 0, {{"my-key.x", "1"}})));
}

TEST(ListFilter, AndOrNot) {
  const std::string ex = "state=\"JOB_STATE_SUCCEEDED\" AND display_name:\"my_job_*\"";
  EXPECT_TRUE(M(ex, kA));
  EXPECT_FALSE(M(ex, kB));
  EXPECT_FALSE(M(ex, kC));
  EXPECT_TRUE(M("state=JOB_STATE_FAILED OR state=JOB_STATE_RUNNING", kB));
  EXPECT_TRUE(M("state=JOB_STATE_FAILED OR state=JOB_STATE_RUNNING", kC));
  EXPECT_FALSE(M("state=JOB_STATE_FAILED OR state=JOB_STATE_RUNNING", kA));
  EXPECT_TRUE(M("NOT state=JOB_STATE_FAILED", kA));
  EXPECT_FALSE(M("NOT state=JOB_STATE_FAILED", kB));
  EXPECT_FALSE(M("-state=JOB_STATE_SUCCEEDED", kA));
  EXPECT_TRUE(M("NOT NOT state=JOB_STATE_SUCCEEDED", kA));
  EXPECT_TRUE(M("NOT(state=JOB_STATE_FAILED)", kA));
  // Juxtaposition is AND.
  EXPECT_TRUE(M("labels.team=ml display_name:my_*", kA));
  EXPECT_FALSE(M("labels.team=ml display_name:other", kA));
}

TEST(ListFilter, ParenthesesAndPrecedence) {
  const std::string f =
      "(state=JOB_STATE_SUCCEEDED AND labels.team=ml) OR (state=JOB_STATE_FAILED AND "
      "labels.team=infra)";
  EXPECT_TRUE(M(f, kA));
  EXPECT_TRUE(M(f, kB));
  EXPECT_FALSE(M(f, kC));
  // AIP-160: OR binds tighter than AND.
  EXPECT_FALSE(M("labels.team=infra AND state=JOB_STATE_FAILED OR display_name:my_*", kA));
  EXPECT_TRUE(M("labels.team=ml OR labels.team=infra AND display_name:*", kB));
  EXPECT_TRUE(M("NOT (labels.team:* AND state=JOB_STATE_FAILED)", kA));
  EXPECT_FALSE(M("NOT (labels.team:* AND state=JOB_STATE_FAILED)", kB));
  EXPECT_TRUE(M("((((display_name=other))))", kB));
}

TEST(ListFilter, KeywordsNeedWordBoundaries) {
  // A display name that starts with a keyword is a value, not an operator.
  EXPECT_TRUE(M("display_name=ANDROID", Job("ANDROID", "JOB_STATE_RUNNING", 0)));
  EXPECT_TRUE(M("display_name=\"a AND b\"", Job("a AND b", "JOB_STATE_RUNNING", 0)));
  EXPECT_TRUE(M("display_name=\"say \\\"hi\\\"\"", Job("say \"hi\"", "JOB_STATE_RUNNING", 0)));
}

TEST(ListFilter, ErrorsNamePositionAndExpectation) {
  EXPECT_EQ(Err("display_name="), "filter: at 14: expected a value after '='");
  EXPECT_EQ(Err("state="), "filter: at 7: expected a value after '='");
  EXPECT_THAT(Err("foo=bar"), HasSubstr("filter: at 1: unknown field 'foo'"));
  EXPECT_THAT(Err("state<JOB_STATE_FAILED"), HasSubstr("at 6: state supports = and !=, not '<'"));
  EXPECT_THAT(Err("display_name>a"), HasSubstr("at 13: display_name supports =, != and :"));
  EXPECT_THAT(Err("create_time:x"), HasSubstr("create_time supports"));
  EXPECT_THAT(Err("state=RUNNING"), HasSubstr("at 7: expected a job state"));
  EXPECT_THAT(Err("create_time>yesterday"), HasSubstr("at 13: expected an RFC 3339 time"));
  EXPECT_THAT(Err("state JOB_STATE_FAILED"), HasSubstr("at 7: expected an operator"));
  EXPECT_THAT(Err("display_name=\"abc"), HasSubstr("at 14: unterminated string"));
  EXPECT_THAT(Err("(state=JOB_STATE_FAILED"), HasSubstr("expected ')' to close the '(' at 1"));
  EXPECT_THAT(Err("state=JOB_STATE_FAILED)"), HasSubstr("at 23: unbalanced ')'"));
  EXPECT_THAT(Err("state=JOB_STATE_FAILED AND"), HasSubstr("expected a restriction after 'AND'"));
  EXPECT_THAT(Err("state=JOB_STATE_FAILED OR"), HasSubstr("expected a restriction after 'OR'"));
  EXPECT_THAT(Err("NOT"), HasSubstr("expected a restriction after 'NOT'"));
  EXPECT_THAT(Err("()"), HasSubstr("expected a restriction inside '()'"));
  EXPECT_THAT(Err("=x"), HasSubstr("at 1: expected a field"));
  EXPECT_THAT(Err("labels.=x"), HasSubstr("unknown field 'labels.'"));
  EXPECT_THAT(Err("labels=x"), HasSubstr("labels supports only ':'"));
  for (const std::string& bad : {"state=", "x", "(", ")", "AND", "labels:"}) {
    EXPECT_THAT(Err(bad), HasSubstr("filter: at ")) << bad;
  }
}

TEST(ListFilter, BoundsLengthAndDepth) {
  std::string name(kMaxFilterLength - 13, 'x');
  EXPECT_TRUE(ParseFilter("display_name=" + name).ok());
  EXPECT_THAT(Err("display_name=" + name + "y"), HasSubstr("at most 4096"));

  auto nested = [](int n) {
    return std::string(n, '(') + "state=JOB_STATE_FAILED" + std::string(n, ')');
  };
  EXPECT_TRUE(ParseFilter(nested(kMaxFilterDepth)).ok());
  EXPECT_THAT(Err(nested(kMaxFilterDepth + 1)), HasSubstr("nested more than 32 deep"));
  std::string nots;
  for (int i = 0; i < kMaxFilterDepth + 1; ++i) nots += "NOT ";
  EXPECT_THAT(Err(nots + "state=JOB_STATE_FAILED"), HasSubstr("nested more than 32 deep"));
  // Deep input of the maximum length fails fast, not by stack overflow.
  EXPECT_FALSE(ParseFilter(std::string(kMaxFilterLength, '(')).ok());
  EXPECT_FALSE(ParseFilter(std::string(kMaxFilterLength / 2, '-')).ok());
}

TEST(ListFilter, LongOrChainIsNotDeep) {
  std::string f = "state=JOB_STATE_QUEUED";
  for (int i = 0; i < 100; ++i) f += " OR labels.k" + std::to_string(i) + "=v";
  f += " OR display_name=other";
  EXPECT_TRUE(M(f, kB));
  EXPECT_FALSE(M(f, kA));
}

}  // namespace
}  // namespace stoker::api
