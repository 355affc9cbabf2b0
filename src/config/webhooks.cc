#include "config/webhooks.h"

#include "common/files.h"

namespace stoker::config {

using nlohmann::json;

// "https://host:8443/a/b?x" -> base "https://host:8443", target "/a/b?x".
bool SplitWebhookUrl(const std::string& url, std::string* base, std::string* target) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return false;
  size_t slash = url.find('/', scheme + 3);
  *base = url.substr(0, slash);
  *target = slash == std::string::npos ? "/" : url.substr(slash);
  return base->size() > scheme + 3;
}

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
            !SplitWebhookUrl(w.url, &base, &target)) {
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

}  // namespace stoker::config
