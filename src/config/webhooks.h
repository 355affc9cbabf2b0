// The `webhooks:` section of the config (docs/webhooks.md): which URLs get
// which events, with their signing secrets. The server's webhooks.h writes
// and delivers the messages.
//
//   webhooks:
//     - url: https://hooks.example.com/stoker
//       secret_file: /etc/stoker/webhook.secret   # or secret: "..."
//       events: [job.state, job.failed, job.gpu_idle, study.best_trial,
//                budget.warning, budget.exceeded]
//       gpu_idle_minutes: 30    # job.gpu_idle: GPUs under 15% busy this long
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::config {

// The events a hook may ask for.
inline const std::set<std::string>& WebhookEvents() {
  static const std::set<std::string> kEvents = {"job.state",      "job.failed",
                                                "job.gpu_idle",   "study.best_trial",
                                                "budget.warning", "budget.exceeded"};
  return kEvents;
}

struct Webhook {
  std::string url;  // http:// or https://
  std::string secret;
  std::set<std::string> events;
  // job.gpu_idle: the job's GPUs under 15% busy for this long without a break.
  double gpu_idle_minutes = 30;
};

// Parses the config's `webhooks:` list (JSON as read from YAML); reads
// secret_file. InvalidArgument naming the key ("webhooks[0].events: ...").
Result<std::vector<Webhook>> ParseWebhooks(const nlohmann::json& value);

// "https://host:8443/a/b?x" -> base "https://host:8443", target "/a/b?x";
// false when `url` has no scheme and host.
bool SplitWebhookUrl(const std::string& url, std::string* base, std::string* target);

}  // namespace stoker::config
