#include "server/listen_address.h"

#include <charconv>

namespace stoker::server {

std::string ListenAddress::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

Result<ListenAddress> ParseOne(std::string_view entry) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("listen: '" + std::string(entry) + "' " + why +
                           "; write HOST:PORT (127.0.0.1:8470, [::1]:8470, 0.0.0.0:0), several "
                           "separated by commas to take the first free one");
  };
  size_t colon = entry.rfind(':');
  if (colon == std::string_view::npos) return bad("has no port");
  std::string_view host = entry.substr(0, colon);
  std::string_view port_text = entry.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("is an IPv6 address without brackets");
  }
  if (host.empty()) return bad("has no host");
  int port = -1;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return bad("has no port in 0..65535");
  }
  return ListenAddress{std::string(host), port};
}

}  // namespace

Result<std::vector<ListenAddress>> ParseListenList(std::string_view text) {
  std::vector<ListenAddress> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view entry = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (!entry.empty()) {
      STOKER_ASSIGN_OR_RETURN(ListenAddress a, ParseOne(entry));
      out.push_back(std::move(a));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (out.empty()) {
    return InvalidArgument("listen: no address given; write HOST:PORT, e.g. 127.0.0.1:8470");
  }
  return out;
}

Result<size_t> BindFirstFree(const std::vector<ListenAddress>& candidates,
                             const std::function<Status(const ListenAddress&)>& bind,
                             const std::function<void(const std::string&)>& note) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    Status s = bind(candidates[i]);
    if (s.ok()) return i;
    const bool last = i + 1 == candidates.size();
    if (last || s.code() != Code::kUnavailable) return s;
    note(candidates[i].ToString() + " cannot be used (" + s.message() + "); trying " +
         candidates[i + 1].ToString());
  }
  return InvalidArgument("listen: no address given");
}

}  // namespace stoker::server
