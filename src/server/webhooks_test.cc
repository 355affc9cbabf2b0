#include "server/webhooks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace stoker::server {
namespace {

using nlohmann::json;

TEST(WebhookSignatureTest, IsHmacSha256OfTimeDotBody) {
  // Computed independently: Python's hmac.new(b"key", b"1700000000.{}", hashlib.sha256).
  EXPECT_EQ(WebhookSignature("key", 1700000000, "{}"),
            "t=1700000000,v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae");
}

TEST(ParseWebhooksTest, NamesTheKeyOfEveryMistake) {
  auto parse = [](const std::string& text) { return config::ParseWebhooks(json::parse(text)); };
  auto ok =
      parse(R"([{"url": "https://h.example/x?y=1", "secret": "s", "events": ["job.failed"]}])");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->at(0).events.count("job.failed"), 1u);
  EXPECT_EQ(ok->at(0).gpu_idle_minutes, 30);
  auto idle = parse(R"([{"url": "http://h/x", "secret": "s", "events": ["job.gpu_idle",
                         "study.best_trial"], "gpu_idle_minutes": 2.5}])");
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_EQ(idle->at(0).gpu_idle_minutes, 2.5);
  struct Case {
    const char* text;
    const char* names;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"url": "x"})", "webhooks: must be a list"},
           {R"([{"url": "ftp://h/x", "secret": "s", "events": ["job.state"]}])", "webhooks[0].url"},
           {R"([{"url": "http://h/x", "events": ["job.state"]}])", "secret_file"},
           {R"([{"url": "http://h/x", "secret": "s", "events": ["job.exploded"]}])",
            "webhooks[0].events: \"job.exploded\" is not an event"},
           {R"([{"url": "http://h/x", "secret": "s", "events": []}])", "webhooks[0].events"},
           {R"([{"url": "http://h/x", "secret": "s", "events": ["job.state"], "retry": 3}])",
            "unknown key 'retry'"},
           {R"([{"url": "http://h/x", "secret": "s", "events": ["job.gpu_idle"],
                "gpu_idle_minutes": 0}])",
            "webhooks[0].gpu_idle_minutes: must be a number of minutes above 0"},
           {R"([{"url": "http://h/x", "secret_file": "/nonexistent/s", "events": ["job.state"]}])",
            "webhooks[0].secret_file: cannot read /nonexistent/s"},
       }) {
    auto r = parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.names), std::string::npos) << r.status().message();
  }
}

TEST(WebhookMessagesTest, OneMessagePerHookThatAskedForTheEvent) {
  std::vector<config::Webhook> hooks = {{"http://a/x", "s", {"job.state"}},
                                        {"http://b/y", "s", {"job.failed", "job.state"}},
                                        {"http://c/z", "s", {"budget.warning"}}};
  auto m =
      WebhookMessages(hooks, "job.state", {{"to", "JOB_STATE_RUNNING"}}, 1'700'000'000'000'000);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].url, "http://a/x");
  EXPECT_EQ(m[1].url, "http://b/y");
  json body = json::parse(m[0].body);
  EXPECT_EQ(body["event"], "job.state");
  EXPECT_EQ(body["to"], "JOB_STATE_RUNNING");
  EXPECT_EQ(body["time"], "2023-11-14T22:13:20.000000Z");
}

TEST(WebhookSenderTest, AnUnreachableReceiverIsRetriedLaterAndTheMessageKept) {
  auto dir = std::filesystem::temp_directory_path() / ("webhooks_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  FakeClock clock(1'700'000'000'000'000);
  auto store = std::move(store::Store::Open(dir, clock)).value();
  // Port 1 on loopback: nothing listens there.
  std::vector<config::Webhook> hooks = {{"http://127.0.0.1:1/hook", "s", {"budget.warning"}}};
  ASSERT_TRUE(store->Enqueue(WebhookMessages(hooks, "budget.warning", json::object(), 0)).ok());
  ASSERT_TRUE(store->Enqueue(WebhookMessages(hooks, "budget.warning", {{"n", 2}}, 0)).ok());
  WebhookSender sender(*store, hooks, clock);
  EXPECT_EQ(sender.RunOnce(), 0);
  auto heads = store->OutboxHeads().value();
  ASSERT_EQ(heads.size(), 1u);  // the first message holds the second back
  EXPECT_EQ(heads[0].attempts, 1);
  EXPECT_EQ(heads[0].next_time_us, clock.NowMicros() + 1'000'000);  // backed off 1 s
  EXPECT_FALSE(heads[0].last_error.empty());
  EXPECT_EQ(sender.RunOnce(), 0);  // not due yet: not tried
  EXPECT_EQ(store->OutboxHeads().value()[0].attempts, 1);
  // Each failure doubles the wait; after kMaxAttempts the first is given up.
  for (int i = 1; i < WebhookSender::kMaxAttempts; ++i) {
    clock.Advance(3'600'000'000);
    sender.RunOnce();
  }
  heads = store->OutboxHeads().value();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(json::parse(heads[0].body)["n"], 2);
  store.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::server
