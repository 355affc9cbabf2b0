// The pure planning of gs:// transfers (transfer.h): wildcards, what a URL
// or a local argument names, where each copy goes, what an rsync does.
#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "storage/transfer.h"

namespace stoker::storage {

namespace fs = std::filesystem;

std::string HumanBytes(double bytes, int decimals) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f %s", u == 0 ? 0 : decimals, bytes, units[u]);
  return buf;
}

bool HasWildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool WildMatch(std::string_view pat, std::string_view name) {
  if (pat.empty()) return name.empty();
  if (pat.substr(0, 2) == "**") {
    for (size_t i = 0; i <= name.size(); ++i) {
      if (WildMatch(pat.substr(2), name.substr(i))) return true;
    }
    return false;
  }
  if (pat[0] == '*') {
    for (size_t i = 0; i <= name.size(); ++i) {
      if (WildMatch(pat.substr(1), name.substr(i))) return true;
      if (i < name.size() && name[i] == '/') break;
    }
    return false;
  }
  if (name.empty()) return false;
  if (pat[0] == '?') return name[0] != '/' && WildMatch(pat.substr(1), name.substr(1));
  if (pat[0] == '[') {
    size_t close = pat.find(']', 1);
    if (close != std::string_view::npos) {
      std::string set(pat.substr(1, close - 1));
      return fnmatch(("[" + set + "]").c_str(), std::string(1, name[0]).c_str(), 0) == 0 &&
             WildMatch(pat.substr(close + 1), name.substr(1));
    }
  }
  return pat[0] == name[0] && WildMatch(pat.substr(1), name.substr(1));
}

std::string ListingPrefix(const GsUri& uri) {
  return uri.object.substr(0, uri.object.find_first_of("*?["));
}

ExpandedUrl SelectObjects(const GsUri& u, std::vector<RemoteObject> all, bool recursive) {
  ExpandedUrl e;
  e.bucket = u.bucket;
  if (HasWildcard(u.object)) {
    std::string fixed = ListingPrefix(u);
    size_t slash = fixed.rfind('/');
    e.base = slash == std::string::npos ? "" : fixed.substr(0, slash + 1);
    for (RemoteObject& o : all) {
      if (WildMatch(u.object, o.name)) {
        e.objects.push_back(std::move(o));
      } else if (recursive) {
        // "gs://b/dir*" with -r takes everything under a matching prefix.
        for (size_t p = o.name.find('/'); p != std::string::npos; p = o.name.find('/', p + 1)) {
          if (WildMatch(u.object, o.name.substr(0, p))) {
            e.objects.push_back(o);
            break;
          }
        }
      }
    }
    return e;
  }
  const std::string& object = u.object;
  std::string dir = object.empty() || object.back() == '/' ? object : object + "/";
  for (RemoteObject& o : all) {
    if (o.name == object) {
      e.objects.push_back(o);
      size_t slash = object.rfind('/');
      e.base = slash == std::string::npos ? "" : object.substr(0, slash + 1);
      return e;  // an object of that name wins over a prefix
    }
  }
  e.is_prefix = true;
  e.base = dir;
  for (RemoteObject& o : all) {
    if (o.name.rfind(dir, 0) == 0) e.objects.push_back(std::move(o));
  }
  return e;
}

std::vector<LocalFile> ExpandLocal(const std::string& arg, bool recursive, bool* omitted_dir) {
  std::vector<std::string> matches;
  if (HasWildcard(arg)) {
    glob_t g{};
    if (::glob(arg.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) matches.push_back(g.gl_pathv[i]);
    }
    globfree(&g);
  } else {
    matches.push_back(arg);
  }
  std::vector<LocalFile> out;
  for (const std::string& m : matches) {
    std::error_code ec;
    if (fs::is_directory(m, ec)) {
      if (!recursive) {
        *omitted_dir = true;
        std::cerr << "Omitting directory \"" << m << "\". (Did you mean to do cp -r?)\n";
        continue;
      }
      fs::path root = fs::path(m).lexically_normal();
      std::string top = root.filename().empty() ? root.parent_path().filename().string()
                                                : root.filename().string();
      if (top == "." || top.empty()) top = "";
      std::vector<LocalFile> files;
      for (auto it = fs::recursive_directory_iterator(m, ec); !ec && it != fs::end(it);
           it.increment(ec)) {
        if (it->is_regular_file()) {
          std::string rel = fs::relative(it->path(), m).generic_string();
          files.push_back({it->path(), top.empty() ? rel : top + "/" + rel});
        }
      }
      std::sort(files.begin(), files.end(),
                [](const LocalFile& a, const LocalFile& b) { return a.relative < b.relative; });
      out.insert(out.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(m, ec) || m == "-") {
      out.push_back({m, fs::path(m).filename().string()});
    }
  }
  return out;
}

// ---- destinations ----------------------------------------------------------

namespace {

std::string JoinObject(const std::string& base, const std::string& rel) {
  if (base.empty()) return rel;
  return base.back() == '/' ? base + rel : base + "/" + rel;
}

}  // namespace

std::string UploadObjectName(const std::string& dest_object, bool into, bool src_is_dir,
                             const LocalFile& file) {
  if (!src_is_dir) {
    return into ? JoinObject(dest_object, fs::path(file.path).filename().string()) : dest_object;
  }
  std::string rel = file.relative;
  if (!into) rel = rel.substr(rel.find('/') == std::string::npos ? 0 : rel.find('/') + 1);
  return JoinObject(dest_object, rel);
}

fs::path DownloadPath(const std::string& dst, bool dst_is_dir, bool recursive,
                      const ExpandedUrl& from, const RemoteObject& object) {
  std::string rel = object.name.substr(from.base.size());
  if (from.is_prefix) {
    // gs://b/data -> DST/data/... when DST exists, else DST/...
    std::string top = from.base.empty()
                          ? ""
                          : fs::path(from.base.substr(0, from.base.size() - 1)).filename().string();
    return dst_is_dir && !top.empty() ? fs::path(dst) / top / rel : fs::path(dst) / rel;
  }
  if (dst_is_dir || from.objects.size() > 1 || dst.back() == '/') {
    return fs::path(dst) / (recursive ? rel : fs::path(object.name).filename().string());
  }
  return dst;
}

// ---- rsync -----------------------------------------------------------------

std::map<std::string, fs::path> LocalFilesByName(const fs::path& root, bool recursive) {
  std::map<std::string, fs::path> local;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return local;
  auto add = [&](const fs::directory_entry& e) {
    if (e.is_regular_file()) local[fs::relative(e.path(), root).generic_string()] = e.path();
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(root, ec)) add(e);
  } else {
    for (const auto& e : fs::directory_iterator(root, ec)) add(e);
  }
  return local;
}

std::map<std::string, RemoteObject> RemoteObjectsByName(std::vector<RemoteObject> listing,
                                                        const std::string& prefix, bool recursive) {
  std::map<std::string, RemoteObject> remote;
  for (RemoteObject& obj : listing) {
    std::string rel = obj.name.substr(prefix.size());
    if (!recursive && rel.find('/') != std::string::npos) continue;
    remote[rel] = std::move(obj);
  }
  return remote;
}

std::vector<SyncStep> PlanRsync(
    const std::map<std::string, fs::path>& local, const std::map<std::string, RemoteObject>& remote,
    const fs::path& local_root, const std::string& prefix, bool upload, bool delete_extra,
    const std::function<bool(const RemoteObject&, const fs::path&)>& same) {
  std::vector<SyncStep> steps;
  std::error_code ec;
  for (const auto& [rel, path] : local) {
    auto it = remote.find(rel);
    bool equal = it != remote.end() && same(it->second, path);
    if (upload && !equal) {
      steps.push_back({SyncAction::kUpload, path, prefix + rel, fs::file_size(path, ec)});
    }
    if (!upload && it == remote.end() && delete_extra) {
      steps.push_back({SyncAction::kDeleteLocal, path, "", 0});
    }
    if (!upload && it != remote.end() && !equal) {
      steps.push_back({SyncAction::kDownload, path, it->second.name, it->second.size});
    }
  }
  for (const auto& [rel, obj] : remote) {
    if (local.count(rel)) continue;
    if (upload && delete_extra) steps.push_back({SyncAction::kDeleteRemote, "", obj.name, 0});
    if (!upload) steps.push_back({SyncAction::kDownload, local_root / rel, obj.name, obj.size});
  }
  return steps;
}

}  // namespace stoker::storage
