#include "server/webhooks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "auth/auth.h"
#include "common/files.h"
#include "common/time.h"
#include "http/http.h"

namespace stoker::server {
namespace {

using nlohmann::json;

// "https://host:8443/a/b?x" -> base "https://host:8443", target "/a/b?x".
bool SplitUrl(const std::string& url, std::string* base, std::string* target) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return false;
  size_t slash = url.find('/', scheme + 3);
  *base = url.substr(0, slash);
  *target = slash == std::string::npos ? "/" : url.substr(slash);
  return base->size() > scheme + 3;
}

}  // namespace

Result<std::vector<Webhook>> ParseWebhooks(const json& value) {
  const std::string example =
      " (e.g. webhooks: [{url: https://hooks.example.com/stoker, secret_file: "
      "/etc/stoker/webhook.secret, events: [job.failed]}])";
  if (!value.is_array()) return InvalidArgument("webhooks: must be a list" + example);
  std::vector<Webhook> hooks;
  for (size_t i = 0; i < value.size(); ++i) {
    const json& h = value[i];
    const std::string at = "webhooks[" + std::to_string(i) + "]";
    if (!h.is_object()) return InvalidArgument(at + ": must be a mapping" + example);
    Webhook w;
    for (const auto& [key, v] : h.items()) {
      if (key == "url") {
        if (!v.is_string()) return InvalidArgument(at + ".url: must be a string");
        w.url = v.get<std::string>();
        std::string base, target;
        if ((w.url.rfind("http://", 0) != 0 && w.url.rfind("https://", 0) != 0) ||
            !SplitUrl(w.url, &base, &target)) {
          return InvalidArgument(at + ".url: '" + w.url + "' is not an http:// or https:// URL");
        }
      } else if (key == "secret") {
        if (!v.is_string() || v.get<std::string>().empty()) {
          return InvalidArgument(at + ".secret: must be a non-empty string");
        }
        w.secret = v.get<std::string>();
      } else if (key == "secret_file") {
        if (!v.is_string()) return InvalidArgument(at + ".secret_file: must be a path");
        auto text = ReadFile(v.get<std::string>());
        if (!text.ok()) {
          return InvalidArgument(at + ".secret_file: cannot read " + v.get<std::string>());
        }
        std::string secret = *text;
        while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
          secret.pop_back();
        }
        if (secret.empty()) return InvalidArgument(at + ".secret_file: the file is empty");
        w.secret = secret;
      } else if (key == "events") {
        if (!v.is_array() || v.empty()) {
          return InvalidArgument(at + ".events: must be a non-empty list of events");
        }
        for (const json& e : v) {
          if (!e.is_string() || !WebhookEvents().count(e.get<std::string>())) {
            std::string known;
            for (const std::string& k : WebhookEvents()) known += (known.empty() ? "" : ", ") + k;
            return InvalidArgument(at + ".events: " + e.dump() +
                                   " is not an event (known: " + known + ")");
          }
          w.events.insert(e.get<std::string>());
        }
      } else if (key == "gpu_idle_minutes") {
        if (!v.is_number() || v.get<double>() <= 0) {
          return InvalidArgument(
              at + ".gpu_idle_minutes: must be a number of minutes above 0, got " + v.dump());
        }
        w.gpu_idle_minutes = v.get<double>();
      } else {
        return InvalidArgument(at + ": unknown key '" + key +
                               "' (known: url, secret, secret_file, events, gpu_idle_minutes)");
      }
    }
    if (w.url.empty()) return InvalidArgument(at + ".url: required" + example);
    if (w.secret.empty()) {
      return InvalidArgument(at + ": give secret_file (or secret): receivers check the signature");
    }
    if (w.events.empty()) return InvalidArgument(at + ".events: required" + example);
    hooks.push_back(std::move(w));
  }
  return hooks;
}

std::vector<store::OutboxMessage> WebhookMessages(const std::vector<Webhook>& hooks,
                                                  const std::string& event, json body,
                                                  int64_t now_us) {
  std::vector<store::OutboxMessage> out;
  body["event"] = event;
  body["time"] = FormatRfc3339(now_us);
  std::string text;
  for (const Webhook& h : hooks) {
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

WebhookSender::WebhookSender(store::Store& store, std::vector<Webhook> hooks, const Clock& clock)
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
  auto hook =
      std::find_if(hooks_.begin(), hooks_.end(), [&](const Webhook& h) { return h.url == m.url; });
  if (hook == hooks_.end()) {  // the config no longer has this hook
    spdlog::warn("webhooks: dropping {} message {} for {}: no such hook in the config", m.event,
                 m.id, m.url);
    (void)store_.RemoveMessage(m.id);
    return true;
  }
  std::string base, target;
  SplitUrl(m.url, &base, &target);
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
