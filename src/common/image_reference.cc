#include "common/image_reference.h"

#include <arpa/inet.h>

#include <array>
#include <cctype>
#include <cstdio>

namespace stoker {
namespace {

constexpr size_t kMaxNameLength = 255;  // HOST[:PORT]/PATH, as Docker's NameTotalLengthMax
constexpr size_t kMaxTagLength = 128;

// The transports containers/image (podman, skopeo, buildah) reads before
// a ':' in an image argument, and Docker's "docker://" spelling.
constexpr std::array<std::string_view, 11> kTransports = {
    "containers-storage", "dir",    "docker", "docker-archive", "docker-daemon", "oci",
    "oci-archive",        "ostree", "sif",    "tarball",        "atomic"};

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The name as it can be shown in a message: control and non-ASCII bytes
// as \xNN, cut at 200 characters.
std::string Shown(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c >= 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > 200) out += "...";
  return out;
}

// "" when `c` is a path component: [a-z0-9]+ joined by '.', '_', '__' or
// a run of '-'; else why not.
std::string PathComponentError(std::string_view c) {
  if (c.empty()) return "an empty path component (a '//', or a '/' at an end)";
  const std::string why = "path component '" + std::string(c) + "' ";
  for (char ch : c) {
    if (ch >= 'A' && ch <= 'Z') return why + "has upper-case letters; image names are lower-case";
  }
  size_t i = 0;
  while (true) {
    if (i >= c.size() || !IsLowerAlnum(c[i])) {
      return why + "must be letters and digits joined by '.', '_', '__' or '-'";
    }
    while (i < c.size() && IsLowerAlnum(c[i])) ++i;
    if (i == c.size()) return "";
    if (c[i] == '.') {
      ++i;
    } else if (c[i] == '_') {
      i += (i + 1 < c.size() && c[i + 1] == '_') ? 2 : 1;
    } else if (c[i] == '-') {
      while (i < c.size() && c[i] == '-') ++i;
    } else {
      return why + "must be letters and digits joined by '.', '_', '__' or '-'";
    }
  }
}

// "" when `h` is domain-name components joined by '.' (an IPv4 address is
// one too); else why not.
std::string HostError(std::string_view h) {
  const std::string why = "registry host '" + std::string(h) + "' ";
  size_t start = 0;
  while (true) {
    size_t dot = h.find('.', start);
    std::string_view part = h.substr(start, dot == std::string_view::npos ? h.npos : dot - start);
    if (part.empty() || !IsAlnum(part.front()) || !IsAlnum(part.back())) {
      return why + "must be names of letters, digits and '-' joined by '.'";
    }
    for (char ch : part) {
      if (!IsAlnum(ch) && ch != '-') {
        return why + "must be names of letters, digits and '-' joined by '.'";
      }
    }
    if (dot == std::string_view::npos) return "";
    start = dot + 1;
  }
}

// Parses HOST[:PORT] into `ref`; "" or why not.
std::string ParseRegistry(std::string_view d, ImageReference* ref) {
  ref->registry = std::string(d);
  std::string_view port;
  if (!d.empty() && d.front() == '[') {
    size_t close = d.find(']');
    if (close == std::string_view::npos) return "registry '" + std::string(d) + "' lacks its ']'";
    ref->host = std::string(d.substr(1, close - 1));
    in6_addr addr;
    if (::inet_pton(AF_INET6, ref->host.c_str(), &addr) != 1) {
      return "registry '" + std::string(d) + "' has no valid IPv6 address in its brackets";
    }
    std::string_view rest = d.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return "registry '" + std::string(d) + "': ']' must end it or be followed by ':PORT'";
      port = rest.substr(1);
      if (port.empty()) return "registry '" + std::string(d) + "' has an empty port";
    }
  } else {
    size_t colon = d.find(':');
    ref->host = std::string(d.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = d.substr(colon + 1);
      if (port.empty()) return "registry '" + std::string(d) + "' has an empty port";
    }
    if (std::string why = HostError(ref->host); !why.empty()) return why;
  }
  if (!port.empty()) {
    long value = 0;
    for (char ch : port) {
      if (!IsDigit(ch) || value > 65535) {
        return "registry '" + std::string(d) + "': the port must be a number from 1 to 65535";
      }
      value = value * 10 + (ch - '0');
    }
    if (value < 1 || value > 65535) {
      return "registry '" + std::string(d) + "': the port must be a number from 1 to 65535";
    }
    ref->port = static_cast<int>(value);
  }
  return "";
}

std::string TagError(std::string_view t) {
  if (t.empty()) return "an empty tag after ':'";
  if (t.size() > kMaxTagLength) return "a tag longer than 128 characters";
  if (!IsAlnum(t.front()) && t.front() != '_') {
    return "tag '" + std::string(t) + "' must start with a letter, digit or '_'";
  }
  for (char ch : t) {
    if (!IsAlnum(ch) && ch != '_' && ch != '.' && ch != '-') {
      return "tag '" + std::string(t) + "' may hold only letters, digits, '_', '.' and '-'";
    }
  }
  return "";
}

std::string DigestError(std::string_view d) {
  size_t colon = d.find(':');
  if (colon == std::string_view::npos) return "digest '" + std::string(d) + "' lacks 'sha256:'";
  if (d.substr(0, colon) != "sha256") {
    return "digest algorithm '" + std::string(d.substr(0, colon)) +
           "' is not accepted (only sha256 digests are)";
  }
  std::string_view hex = d.substr(colon + 1);
  if (hex.size() != 64)
    return "a sha256 digest has 64 hex digits, this one " + std::to_string(hex.size());
  for (char ch : hex) {
    if (!IsDigit(ch) && !(ch >= 'a' && ch <= 'f')) {
      return "a sha256 digest is 64 lower-case hex digits";
    }
  }
  return "";
}

// Everything but the error message's framing; "" or why `name` is not a
// reference.
std::string Parse(std::string_view name, ImageReference* ref) {
  if (name.empty()) return "it is empty";
  for (char ch : name) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f) return "it holds whitespace, a control or a non-ASCII character";
  }
  if (size_t colon = name.find(':'); colon != std::string_view::npos) {
    std::string before(name.substr(0, colon));
    for (char& ch : before) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (std::string_view t : kTransports) {
      if (before == t) {
        return "'" + before +
               ":' names a transport of the engine; write the image's registry and name "
               "instead, e.g. docker.io/library/NAME:TAG";
      }
    }
  }
  std::string_view rest = name;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    if (std::string why = DigestError(rest.substr(at + 1)); !why.empty()) return why;
    ref->digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
  }
  size_t last_slash = rest.rfind('/');
  size_t last_colon = rest.rfind(':');
  if (last_colon != std::string_view::npos &&
      (last_slash == std::string_view::npos || last_colon > last_slash)) {
    if (std::string why = TagError(rest.substr(last_colon + 1)); !why.empty()) return why;
    ref->tag = std::string(rest.substr(last_colon + 1));
    rest = rest.substr(0, last_colon);
  }
  if (rest.size() > kMaxNameLength) {
    return "the name before its tag is " + std::to_string(rest.size()) +
           " characters, more than 255";
  }
  std::string_view path = rest;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view first = rest.substr(0, slash);
    if (first.find_first_of(".:") != std::string_view::npos || first == "localhost" ||
        first.front() == '[') {
      if (std::string why = ParseRegistry(first, ref); !why.empty()) return why;
      path = rest.substr(slash + 1);
    }
  }
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string_view part =
        path.substr(start, slash == std::string_view::npos ? path.npos : slash - start);
    if (std::string why = PathComponentError(part); !why.empty()) return why;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  ref->path = std::string(path);
  return "";
}

}  // namespace

std::string ImageReference::ToString() const {
  std::string out = registry.empty() ? path : registry + "/" + path;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

std::string ImageReference::Registry() const { return registry.empty() ? "docker.io" : registry; }

std::string ImageReference::ConnectHost() const {
  if (host.empty() || host == "docker.io" || host == "index.docker.io") {
    return "registry-1.docker.io";
  }
  return host;
}

int ImageReference::ConnectPort() const { return port == 0 ? 443 : port; }

Result<ImageReference> ParseImageReference(std::string_view name, std::string_view field) {
  ImageReference ref;
  std::string why = Parse(name, &ref);
  if (why.empty()) return ref;
  return InvalidArgument((field.empty() ? "" : std::string(field) + ": ") + "'" + Shown(name) +
                         "' is not an image reference (" + why +
                         "): expected [HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST] (lower-case name, "
                         "no transport such as containers-storage:)");
}

}  // namespace stoker
