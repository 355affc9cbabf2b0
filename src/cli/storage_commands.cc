// Storage commands: cp, ls, mb between local paths and gs:// buckets.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "common/files.h"
#include "common/json_yaml.h"
#include "common/time.h"
#include "http/http.h"
#include "spec/custom_job.h"
#include "spec/job_state.h"
#include "storage/archive.h"
#include "storage/buckets.h"

namespace stoker::cli {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- storage --------------------------------------------------------------

static bool IsGs(const std::string& s) { return s.rfind("gs://", 0) == 0; }

int StorageCp(const Globals& g, const std::string& src, const std::string& dst) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  if (!IsGs(src) && IsGs(dst)) {
    auto to = storage::ParseGsUri(dst, "DESTINATION");
    if (!to.ok()) return Report(to.status());
    std::vector<std::pair<fs::path, std::string>> files;  // local file, object name
    std::error_code ec;
    if (fs::is_directory(src, ec)) {
      std::string prefix = to->object;
      if (!prefix.empty() && prefix.back() != '/') prefix += '/';
      for (const auto& e : fs::recursive_directory_iterator(src)) {
        if (e.is_regular_file())
          files.push_back({e.path(), prefix + fs::relative(e.path(), src).generic_string()});
      }
      std::sort(files.begin(), files.end());
    } else if (fs::is_regular_file(src, ec)) {
      std::string object = to->object;
      if (object.empty() || object.back() == '/') object += fs::path(src).filename().string();
      files.push_back({src, object});
    } else {
      return Report(InvalidArgument("SOURCE: " + src + " does not exist"));
    }
    uint64_t bytes = 0;
    for (const auto& [path, object] : files) {
      auto data = ReadFile(path);
      if (!data.ok()) return Report(data.status());
      auto r = (*conn)->Call("POST",
                             "/upload/storage/v1/b/" + http::UrlEncode(to->bucket) +
                                 "/o?name=" + http::UrlEncode(object),
                             *data);
      if (!r.ok()) return Report(r.status());
      bytes += data->size();
    }
    std::cout << "Copied " << files.size() << " file(s), " << bytes << " bytes, to gs://"
              << to->bucket << "/" << (files.size() == 1 ? files[0].second : to->object) << "\n";
    return 0;
  }
  if (IsGs(src) && !IsGs(dst)) {
    auto from = storage::ParseGsUri(src, "SOURCE");
    if (!from.ok()) return Report(from.status());
    std::string prefix = from->object;
    auto list = (*conn)->Call("GET", "/storage/v1/b/" + http::UrlEncode(from->bucket) +
                                         "/o?prefix=" + http::UrlEncode(prefix));
    if (!list.ok()) return Report(list.status());
    int n = 0;
    for (const json& item : (*list)["items"]) {
      std::string name = item["name"];
      fs::path out;
      if (name == prefix) {
        out = fs::is_directory(dst) ? fs::path(dst) / fs::path(name).filename() : fs::path(dst);
      } else {
        std::string dir_prefix = prefix.empty() || prefix.back() == '/' ? prefix : prefix + "/";
        if (name.rfind(dir_prefix, 0) != 0) continue;  // "data" must not match "database"
        out = fs::path(dst) / name.substr(dir_prefix.size());
      }
      auto data = (*conn)->CallRaw("GET", "/storage/v1/b/" + http::UrlEncode(from->bucket) + "/o/" +
                                              http::UrlEncode(name) + "?alt=media");
      if (!data.ok()) return Report(data.status());
      if (out.has_parent_path()) fs::create_directories(out.parent_path());
      std::ofstream f(out, std::ios::binary);
      f << *data;
      if (!f) return Report(Internal("cannot write " + out.string()));
      ++n;
    }
    if (n == 0) return Report(NotFound("SOURCE: no objects match " + src));
    std::cout << "Copied " << n << " file(s) to " << dst << "\n";
    return 0;
  }
  return Report(
      InvalidArgument("cp copies between a local path and gs://BUCKET/PATH; give one of each"));
}

int StorageLs(const Globals& g, const std::string& uri) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  if (uri.empty()) {
    auto r = (*conn)->Call("GET", "/storage/v1/b");
    if (!r.ok()) return Report(r.status());
    for (const json& b : (*r)["items"])
      std::cout << "gs://" << b["name"].get<std::string>() << "/\n";
    return 0;
  }
  auto at = storage::ParseGsUri(uri, "URI");
  if (!at.ok()) return Report(at.status());
  auto r = (*conn)->Call("GET", "/storage/v1/b/" + http::UrlEncode(at->bucket) +
                                    "/o?prefix=" + http::UrlEncode(at->object));
  if (!r.ok()) return Report(r.status());
  for (const json& o : (*r)["items"]) {
    std::printf("%12s  %s  gs://%s/%s\n", o["size"].get<std::string>().c_str(),
                o["updated"].get<std::string>().c_str(), at->bucket.c_str(),
                o["name"].get<std::string>().c_str());
  }
  return 0;
}

int StorageMb(const Globals& g, const std::string& uri) {
  auto at = storage::ParseGsUri(uri, "URI");
  if (!at.ok()) return Report(at.status());
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto r = (*conn)->Call("POST", "/storage/v1/b", json{{"name", at->bucket}}.dump());
  if (!r.ok()) return Report(r.status());
  std::cout << "Created gs://" << at->bucket << "/\n";
  return 0;
}

void AddStorageCommands(CLI::App& app, const Globals& g, int& rc) {
  struct Flags {
    std::string src, dst, uri;
    bool recursive = false;
  };
  auto f = std::make_shared<Flags>();
  auto* st = app.add_subcommand("storage", "Local buckets behind gs:// URIs");
  st->require_subcommand(1);
  auto* cp = st->add_subcommand("cp", "Copy files or directories to or from a bucket");
  cp->add_option("SOURCE", f->src)->required();
  cp->add_option("DESTINATION", f->dst)->required();
  cp->add_flag("-r,--recursive", f->recursive,
               "Accepted for gsutil compatibility; directories always copy recursively");
  cp->callback([&g, &rc, f] { rc = StorageCp(g, f->src, f->dst); });
  auto* ls = st->add_subcommand("ls", "List buckets, or objects under gs://BUCKET/PREFIX");
  ls->add_option("URI", f->uri);
  ls->callback([&g, &rc, f] { rc = StorageLs(g, f->uri); });
  auto* mb = st->add_subcommand("mb", "Make a bucket");
  mb->add_option("URI", f->uri)->required();
  mb->callback([&g, &rc, f] { rc = StorageMb(g, f->uri); });
}

}  // namespace stoker::cli
