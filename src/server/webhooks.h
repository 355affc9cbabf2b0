// Webhooks (docs/webhooks.md): signed JSON POSTs about jobs and budgets to
// the URLs in the config, delivered from a durable outbox by a thread of
// their own, so a slow or dead receiver never blocks the control loop and a
// daemon restart loses nothing.
//
//   webhooks:
//     - url: https://hooks.example.com/stoker
//       secret_file: /etc/stoker/webhook.secret   # or secret: "..."
//       events: [job.state, job.failed, job.gpu_idle, study.best_trial,
//                budget.warning, budget.exceeded]
//       gpu_idle_minutes: 30    # job.gpu_idle: GPUs under 15% busy this long
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "config/webhooks.h"
#include "store/store.h"

namespace stoker::server {

// Outbox messages for `event` with `body` (the "event" and "time" fields are
// added here), one per hook that asked for it.
std::vector<store::OutboxMessage> WebhookMessages(const std::vector<config::Webhook>& hooks,
                                                  const std::string& event, nlohmann::json body,
                                                  int64_t now_us);

// The X-Stoker-Signature header: "t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>" under `secret`>". A receiver recomputes it, compares in
// constant time and refuses old timestamps (replays).
std::string WebhookSignature(const std::string& secret, int64_t unix_seconds,
                             const std::string& body);

// Delivers the outbox, in order per hook: the oldest message of each hook is
// POSTed when due (10 s timeout); a 2xx answer removes it, anything else
// tries it again after 1 s, 2 s, 4 s, ... (at most an hour apart), holding
// that hook's later messages back, and after kMaxAttempts it is given up
// with an error in the daemon's log.
class WebhookSender {
 public:
  static constexpr int kMaxAttempts = 20;

  WebhookSender(store::Store& store, std::vector<config::Webhook> hooks, const Clock& clock);
  ~WebhookSender();
  void Start();  // a thread that runs RunOnce every 500 ms
  void Stop();
  // One pass over the due messages, in order per hook; returns how many
  // were delivered (or given up).
  int RunOnce();

 private:
  // Tries `m` once; true when it left the outbox (delivered or given up).
  bool Deliver(const store::OutboxMessage& m, int64_t now_us);

  store::Store& store_;
  const std::vector<config::Webhook> hooks_;
  const Clock& clock_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace stoker::server
