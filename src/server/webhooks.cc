#include "server/webhooks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "auth/auth.h"
#include "common/files.h"
#include "common/time.h"
#include "http/http.h"

namespace stoker::server {
using nlohmann::json;

std::vector<store::OutboxMessage> WebhookMessages(const std::vector<config::Webhook>& hooks,
                                                  const std::string& event, json body,
                                                  int64_t now_us) {
  std::vector<store::OutboxMessage> out;
  body["event"] = event;
  body["time"] = FormatRfc3339(now_us);
  std::string text;
  for (const config::Webhook& h : hooks) {
    if (!h.events.count(event)) continue;
    if (text.empty()) text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    store::OutboxMessage m;
    m.url = h.url;
    m.event = event;
    m.body = text;
    out.push_back(std::move(m));
  }
  return out;
}

std::string WebhookSignature(const std::string& secret, int64_t unix_seconds,
                             const std::string& body) {
  return "t=" + std::to_string(unix_seconds) +
         ",v1=" + auth::HmacSha256Hex(secret, std::to_string(unix_seconds) + "." + body);
}

WebhookSender::WebhookSender(store::Store& store, std::vector<config::Webhook> hooks,
                             const Clock& clock)
    : store_(store), hooks_(std::move(hooks)), clock_(clock) {}

WebhookSender::~WebhookSender() { Stop(); }

void WebhookSender::Start() {
  if (hooks_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      RunOnce();
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stop_; });
    }
  });
}

void WebhookSender::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int WebhookSender::RunOnce() {
  int delivered = 0;
  // Each round delivers the head of every hook's queue that is due; a hook
  // whose head fails (or waits for its retry) is left for a later pass.
  for (int round = 0; round < 64; ++round) {
    const int64_t now = clock_.NowMicros();
    auto heads = store_.OutboxHeads();
    if (!heads.ok()) {
      spdlog::warn("webhooks: {}", heads.status().ToString());
      return delivered;
    }
    bool progress = false;
    for (const store::OutboxMessage& m : *heads) {
      if (m.next_time_us > now) continue;
      if (Deliver(m, now)) {
        ++delivered;
        progress = true;
      }
    }
    if (!progress) break;
  }
  return delivered;
}

bool WebhookSender::Deliver(const store::OutboxMessage& m, int64_t now) {
  auto hook = std::find_if(hooks_.begin(), hooks_.end(),
                           [&](const config::Webhook& h) { return h.url == m.url; });
  if (hook == hooks_.end()) {  // the config no longer has this hook
    spdlog::warn("webhooks: dropping {} message {} for {}: no such hook in the config", m.event,
                 m.id, m.url);
    (void)store_.RemoveMessage(m.id);
    return true;
  }
  std::string base, target;
  config::SplitWebhookUrl(m.url, &base, &target);
  std::string error;
  http::Client client(base);
  auto r =
      client.Call("POST", target, m.body,
                  {{"content-type", "application/json"},
                   {"x-stoker-event", m.event},
                   {"x-stoker-delivery", std::to_string(m.id)},
                   {"x-stoker-signature", WebhookSignature(hook->secret, now / 1'000'000, m.body)}},
                  10'000);
  if (!r.ok()) {
    error = r.status().message();
  } else if (r->status < 200 || r->status > 299) {
    error = "HTTP " + std::to_string(r->status);
  }
  if (error.empty()) {
    (void)store_.RemoveMessage(m.id);
    return true;
  }
  int attempts = m.attempts + 1;
  if (attempts >= kMaxAttempts) {
    spdlog::error("webhooks: giving up {} message {} to {} after {} tries: {}", m.event, m.id,
                  m.url, attempts, error);
    (void)store_.RemoveMessage(m.id);
    return true;
  }
  int64_t backoff_us =
      std::min<int64_t>(1'000'000LL << std::min(attempts - 1, 12), 3'600'000'000LL);
  (void)store_.RescheduleMessage(m.id, attempts, now + backoff_us, error);
  return false;
}

}  // namespace stoker::server
