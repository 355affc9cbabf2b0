#include "storage/archive.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>
#include <system_error>

#include "common/files.h"
#include "storage/libarchive.h"
#include "storage/storage_internal.h"

namespace stoker::storage {
namespace fs = std::filesystem;
namespace {

using internal::IsInside;

// libarchive's functions: valid once LoadLibArchive() succeeded, which each
// entry point below checks first.
const LibArchive& Lib() { return **LoadLibArchive(); }

constexpr char kNotTarGzHint[] =
    ": not a gzip-compressed tar archive (build one with 'python3 setup.py sdist' or let "
    "'stoker jobs submit --package-path' pack it)";

struct ReadDeleter {
  void operator()(struct archive* a) const { Lib().archive_read_free(a); }
};
struct WriteDeleter {
  void operator()(struct archive* a) const { Lib().archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { Lib().archive_entry_free(e); }
};
using ReadPtr = std::unique_ptr<struct archive, ReadDeleter>;
using WritePtr = std::unique_ptr<struct archive, WriteDeleter>;
using EntryPtr = std::unique_ptr<archive_entry, EntryDeleter>;

std::string ErrorString(struct archive* a) {
  const char* s = Lib().archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::string JoinPath(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out;
}

// Normalises an entry name or hard-link target: drops "" and "." components.
// Returns the problem (absolute, "..") in `problem` instead.
std::string NormalizeEntryPath(std::string_view raw, std::string* problem) {
  if (!raw.empty() && raw.front() == '/') {
    *problem = "has an absolute path";
    return "";
  }
  std::vector<std::string> kept;
  for (std::string& part : SplitPath(raw)) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      *problem = "has a '..' path component";
      return "";
    }
    kept.push_back(std::move(part));
  }
  return JoinPath(kept, kept.size());
}

// A link that the cross-entry pass must walk: `base` is where resolution
// starts (the symlink's directory, or the archive root for a hard link).
struct PendingLink {
  std::string entry;
  std::vector<std::string> base;
  std::string target;
  bool hard = false;
};

// The rules shared by CheckTarGz and ExtractTarGz. Per-entry rules run as
// entries stream past; the rules that need the whole archive (an entry or a
// link that goes through a symlink declared anywhere in the archive) run in
// Finish(). Together they make lexical resolution equal the real one, so a
// link that looks inside the archive is inside.
class EntryRules {
 public:
  EntryRules(std::string name, const ArchiveLimits& limits)
      : name_(std::move(name)), limits_(limits) {}

  // Checks one entry; on success `*normalized` is its path relative to the
  // archive root ("" for the root itself) and `*hardlink` the normalised
  // hard-link target, if any.
  Status Check(archive_entry* e, std::string* normalized, std::string* hardlink) {
    const char* raw_c = Lib().archive_entry_pathname(e);
    if (raw_c == nullptr) raw_c = Lib().archive_entry_pathname_utf8(e);
    std::string raw = raw_c ? raw_c : "";
    if (++entries_ > limits_.max_entries) {
      return InvalidArgument(name_ + ": has more than " + std::to_string(limits_.max_entries) +
                             " entries (at '" + raw + "'); pack fewer files");
    }
    if (raw.empty()) return Refuse(raw, "has an empty name");
    std::string problem;
    std::string path = NormalizeEntryPath(raw, &problem);
    if (!problem.empty()) return Refuse(raw, problem);
    *normalized = path;
    hardlink->clear();

    if (const char* hl = Lib().archive_entry_hardlink(e); hl != nullptr) {
      std::string target = NormalizeEntryPath(hl, &problem);
      if (!problem.empty()) {
        return Refuse(raw, "is a hard link to '" + std::string(hl) + "', which " + problem);
      }
      if (target.empty()) return Refuse(raw, "is a hard link to the archive root");
      links_.push_back({raw, {}, target, /*hard=*/true});
      *hardlink = target;
    } else {
      switch (Lib().archive_entry_filetype(e)) {
        case AE_IFREG: {
          int64_t size = Lib().archive_entry_size(e);
          if (size > 0) bytes_ += static_cast<uint64_t>(size);
          if (bytes_ > limits_.max_total_bytes) {
            return InvalidArgument(name_ + ": unpacks to more than " +
                                   std::to_string(limits_.max_total_bytes) + " bytes (at '" + raw +
                                   "'); keep data out of the package and read it from a bucket");
          }
          break;
        }
        case AE_IFDIR:
          break;
        case AE_IFLNK: {
          const char* t = Lib().archive_entry_symlink(e);
          std::string target = t ? t : "";
          if (target.empty()) return Refuse(raw, "is a symlink with an empty target");
          if (target.front() == '/') {
            return Refuse(raw, "is a symlink to the absolute path '" + target +
                                   "'; links must stay inside the archive");
          }
          if (path.empty()) return Refuse(raw, "makes the archive root a symlink");
          std::vector<std::string> base = SplitPath(path);
          base.pop_back();
          links_.push_back({raw, std::move(base), target, /*hard=*/false});
          symlinks_.insert(path);
          break;
        }
        case AE_IFCHR:
        case AE_IFBLK:
          return Refuse(raw, "is a device file");
        case AE_IFIFO:
          return Refuse(raw, "is a fifo");
        case AE_IFSOCK:
          return Refuse(raw, "is a socket");
        default:
          return Refuse(raw, "has an unsupported file type");
      }
    }
    // Catch what the entries seen so far can show; Finish() sees the rest.
    if (!links_.empty() && links_.back().entry == raw)
      STOKER_RETURN_IF_ERROR(WalkLink(links_.back()));
    STOKER_RETURN_IF_ERROR(CheckNotUnderSymlink(raw, path));
    paths_.emplace_back(raw, path);
    return OkStatus();
  }

  // The cross-entry rules, once every entry has been seen.
  Status Finish() const {
    if (entries_ == 0) return InvalidArgument(name_ + ": the archive has no entries");
    for (const auto& link : links_) STOKER_RETURN_IF_ERROR(WalkLink(link));
    if (symlinks_.empty()) return OkStatus();
    for (const auto& [raw, path] : paths_) STOKER_RETURN_IF_ERROR(CheckNotUnderSymlink(raw, path));
    return OkStatus();
  }

 private:
  Status Refuse(const std::string& raw, const std::string& why) const {
    return InvalidArgument(name_ + ": entry '" + raw + "' " + why +
                           "; refusing to unpack it (rebuild the archive without it)");
  }

  Status CheckNotUnderSymlink(const std::string& raw, const std::string& path) const {
    std::vector<std::string> parts = SplitPath(path);
    for (size_t n = 1; n < parts.size(); ++n) {
      std::string prefix = JoinPath(parts, n);
      if (symlinks_.count(prefix)) {
        return Refuse(raw, "lies under the symlink '" + prefix + "' of the same archive");
      }
    }
    return OkStatus();
  }

  // Resolves a link target lexically from its base; refuses a target that
  // climbs above the root or passes through a symlink of the archive (whose
  // real target would make the lexical answer wrong).
  Status WalkLink(const PendingLink& link) const {
    std::vector<std::string> cur = link.base;
    std::vector<std::string> parts = SplitPath(link.target);
    const char* kind = link.hard ? "a hard link" : "a symlink";
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string& part = parts[i];
      if (part.empty() || part == ".") continue;
      if (!cur.empty() && symlinks_.count(JoinPath(cur, cur.size()))) {
        return Refuse(link.entry, std::string("is ") + kind + " to '" + link.target +
                                      "', which goes through another symlink of the archive");
      }
      if (part == "..") {
        if (cur.empty()) {
          return Refuse(link.entry, std::string("is ") + kind + " to '" + link.target +
                                        "', which points outside the archive");
        }
        cur.pop_back();
      } else {
        cur.push_back(part);
      }
    }
    if (link.hard && symlinks_.count(JoinPath(cur, cur.size()))) {
      return Refuse(link.entry, "is a hard link to the symlink '" + link.target + "'");
    }
    return OkStatus();
  }

  std::string name_;
  ArchiveLimits limits_;
  uint64_t entries_ = 0;
  uint64_t bytes_ = 0;
  std::set<std::string> symlinks_;
  std::vector<PendingLink> links_;
  std::vector<std::pair<std::string, std::string>> paths_;  // raw name, normalised
};

ReadPtr NewTarGzReader() {
  ReadPtr a(Lib().archive_read_new());
  // Only gzip and tar: anything else (zip, bzip2, plain text) fails to open
  // or is caught by the filter check in FirstHeader.
  Lib().archive_read_support_filter_gzip(a.get());
  Lib().archive_read_support_format_tar(a.get());
  return a;
}

// Reads the first header and checks that the stream really is tar inside
// gzip. ARCHIVE_EOF is returned as-is for the caller's emptiness rule.
Result<int> FirstHeader(struct archive* a, archive_entry** e, const std::string& name) {
  int r = Lib().archive_read_next_header(a, e);
  if (r != ARCHIVE_OK && r != ARCHIVE_WARN && r != ARCHIVE_EOF) {
    return InvalidArgument(name + kNotTarGzHint + " [" + ErrorString(a) + "]");
  }
  bool gzip = false;
  for (int i = 0; i < Lib().archive_filter_count(a); ++i) {
    if (Lib().archive_filter_code(a, i) == ARCHIVE_FILTER_GZIP) gzip = true;
  }
  if (!gzip) return InvalidArgument(name + kNotTarGzHint + " [not gzip-compressed]");
  return r;
}

// Streams every header through `rules` without writing anything.
Status CheckAll(struct archive* a, const std::string& name, const ArchiveLimits& limits) {
  EntryRules rules(name, limits);
  archive_entry* e = nullptr;
  STOKER_ASSIGN_OR_RETURN(int r, FirstHeader(a, &e, name));
  std::string path, hardlink;
  while (r != ARCHIVE_EOF) {
    STOKER_RETURN_IF_ERROR(rules.Check(e, &path, &hardlink));
    r = Lib().archive_read_next_header(a, &e);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN && r != ARCHIVE_EOF) {
      return InvalidArgument(name + ": corrupt archive after entry '" + path +
                             "': " + ErrorString(a));
    }
  }
  return rules.Finish();
}

int ArchiveOpen(struct archive*, void*) { return ARCHIVE_OK; }
la_ssize_t ArchiveWrite(struct archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}
int ArchiveClose(struct archive*, void*) { return ARCHIVE_OK; }

// One member of an sdist being packed: from a file on disk or from memory.
struct SdistMember {
  std::string path;  // inside the archive
  bool dir = false;
  bool executable = false;
  fs::path source;  // empty for generated members
  std::string content;
};

// Package names and versions go into a generated setup.py and into paths, so
// keep them to the characters PEP 508 / PEP 440 allow.
Status CheckSdistToken(const std::string& value, const std::string& what, bool version) {
  auto ok_char = [version](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || (version && (c == '+' || c == '!'));
  };
  if (value.empty() || value == "." || value == ".." ||
      !std::all_of(value.begin(), value.end(), ok_char)) {
    return InvalidArgument(what + " '" + value +
                           "' may only contain letters, digits, '.', '_' and '-'" +
                           (version ? std::string(" (and '+', '!')") : std::string()));
  }
  return OkStatus();
}

}  // namespace

Status CheckTarGz(std::string_view data, const std::string& name, const ArchiveLimits& limits) {
  STOKER_RETURN_IF_ERROR(LoadLibArchive().status());
  ReadPtr a = NewTarGzReader();
  if (Lib().archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    return InvalidArgument(name + kNotTarGzHint + " [" + ErrorString(a.get()) + "]");
  }
  return CheckAll(a.get(), name, limits);
}

Result<std::optional<std::string>> ReadTarGzFile(
    std::string_view data, const std::function<bool(std::string_view)>& wanted, size_t max_bytes) {
  STOKER_RETURN_IF_ERROR(LoadLibArchive().status());
  ReadPtr a = NewTarGzReader();
  if (Lib().archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    return InvalidArgument(std::string("not a gzip-compressed tar archive [") +
                           ErrorString(a.get()) + "]");
  }
  archive_entry* e = nullptr;
  while (Lib().archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    const char* raw = Lib().archive_entry_pathname(e);
    std::string_view path = raw ? raw : "";
    if (path.substr(0, 2) == "./") path.remove_prefix(2);
    if (Lib().archive_entry_filetype(e) != AE_IFREG || !wanted(path)) continue;
    if (Lib().archive_entry_size(e) < 0 ||
        static_cast<uint64_t>(Lib().archive_entry_size(e)) > max_bytes) {
      return std::optional<std::string>();
    }
    std::string out(static_cast<size_t>(Lib().archive_entry_size(e)), '\0');
    size_t got = 0;
    while (got < out.size()) {
      la_ssize_t n = Lib().archive_read_data(a.get(), out.data() + got, out.size() - got);
      if (n < 0) {
        return InvalidArgument("cannot read " + std::string(path) + ": " + ErrorString(a.get()));
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    return std::optional<std::string>(std::move(out));
  }
  return std::optional<std::string>();
}

Status CheckTarGzFd(int fd, const std::string& name, const ArchiveLimits& limits) {
  STOKER_RETURN_IF_ERROR(LoadLibArchive().status());
  if (::lseek(fd, 0, SEEK_SET) != 0) return Internal(name + ": cannot seek to its start");
  ReadPtr a = NewTarGzReader();
  if (Lib().archive_read_open_fd(a.get(), fd, 64 * 1024) != ARCHIVE_OK) {
    return InvalidArgument(name + kNotTarGzHint + " [" + ErrorString(a.get()) + "]");
  }
  return CheckAll(a.get(), name, limits);
}

namespace {

// What an unpacked entry's mode becomes (the umask applies on top):
// directories 0755, files 0755 when any execute bit is set, else 0644.
void SetUnpackedPerm(archive_entry* e) {
  mode_t perm = Lib().archive_entry_perm(e);
  if (Lib().archive_entry_filetype(e) == AE_IFDIR) {
    Lib().archive_entry_set_perm(e, 0755);
  } else if (Lib().archive_entry_filetype(e) == AE_IFREG) {
    Lib().archive_entry_set_perm(e, (perm & 0111) ? 0755 : 0644);
  }
}

}  // namespace

Status ExtractTarGz(const fs::path& archive, const fs::path& dest, const ArchiveLimits& limits) {
  STOKER_RETURN_IF_ERROR(LoadLibArchive().status());
  const std::string name = archive.string();
  std::error_code ec;
  if (!fs::is_regular_file(archive, ec)) {
    return NotFound(name + ": package archive does not exist");
  }
  // Pass 1: every rule, including the cross-entry ones, before writing a byte.
  {
    ReadPtr a = NewTarGzReader();
    if (Lib().archive_read_open_filename(a.get(), archive.c_str(), 64 * 1024) != ARCHIVE_OK) {
      return InvalidArgument(name + kNotTarGzHint + " [" + ErrorString(a.get()) + "]");
    }
    STOKER_RETURN_IF_ERROR(CheckAll(a.get(), name, limits));
  }

  STOKER_RETURN_IF_ERROR(MakeDirs(dest));
  fs::path root = fs::canonical(dest, ec);
  if (ec)
    return Internal("cannot resolve extraction directory " + dest.string() + ": " + ec.message());

  // Pass 2: extract, re-checking each entry (the file could have changed) and
  // each link against the real file system.
  ReadPtr in = NewTarGzReader();
  if (Lib().archive_read_open_filename(in.get(), archive.c_str(), 64 * 1024) != ARCHIVE_OK) {
    return InvalidArgument(name + kNotTarGzHint + " [" + ErrorString(in.get()) + "]");
  }
  WritePtr out(Lib().archive_write_disk_new());
  // Entry names are rewritten to absolute paths under the canonical `root`
  // (a multi-threaded daemon cannot chdir into `dest`), so libarchive's
  // ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS cannot be used; EntryRules refuses
  // absolute names before the rewrite instead. No OWNER/PERM flags: owners
  // are not restored and the modes set below go through the umask.
  Lib().archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_TIME |
                                                      ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                      ARCHIVE_EXTRACT_SECURE_SYMLINKS);
  EntryRules rules(name, limits);
  uint64_t written = 0;
  archive_entry* e = nullptr;
  STOKER_ASSIGN_OR_RETURN(int r, FirstHeader(in.get(), &e, name));
  std::string path, hardlink;
  while (r != ARCHIVE_EOF) {
    STOKER_RETURN_IF_ERROR(rules.Check(e, &path, &hardlink));
    if (path.empty()) {  // "./": the root itself, which is `dest`
      r = Lib().archive_read_next_header(in.get(), &e);
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN && r != ARCHIVE_EOF) break;
      continue;
    }
    fs::path target = root / path;
    fs::path parent = fs::weakly_canonical(target.parent_path(), ec);
    if (ec || !IsInside(parent, root)) {
      return InvalidArgument(name + ": entry '" + path + "' would be written outside " +
                             root.string() + " (through an existing symlink); refusing");
    }
    if (!hardlink.empty()) {
      fs::path link_to = root / hardlink;
      struct stat st;
      fs::path real = fs::weakly_canonical(link_to, ec);
      if (ec || !IsInside(real, root) || ::lstat(link_to.c_str(), &st) != 0 ||
          !S_ISREG(st.st_mode)) {
        return InvalidArgument(name + ": entry '" + path + "' is a hard link to '" + hardlink +
                               "', which is not a file unpacked from this archive; refusing");
      }
      Lib().archive_entry_set_hardlink(e, link_to.c_str());
    } else if (Lib().archive_entry_filetype(e) == AE_IFLNK) {
      fs::path real =
          fs::weakly_canonical(target.parent_path() / Lib().archive_entry_symlink(e), ec);
      if (ec || !IsInside(real, root)) {
        return InvalidArgument(name + ": entry '" + path + "' is a symlink that resolves to " +
                               real.string() + ", outside " + root.string() + "; refusing");
      }
    }
    Lib().archive_entry_set_pathname(e, target.c_str());
    SetUnpackedPerm(e);
    if (Lib().archive_write_header(out.get(), e) < ARCHIVE_WARN) {
      return InvalidArgument(name + ": cannot unpack entry '" + path +
                             "': " + ErrorString(out.get()));
    }
    if (Lib().archive_entry_size(e) > 0) {
      const void* buf = nullptr;
      size_t size = 0;
      la_int64_t offset = 0;
      int dr;
      while ((dr = Lib().archive_read_data_block(in.get(), &buf, &size, &offset)) == ARCHIVE_OK) {
        written += size;
        if (written > limits.max_total_bytes) {
          return InvalidArgument(name + ": unpacks to more than " +
                                 std::to_string(limits.max_total_bytes) + " bytes (at '" + path +
                                 "'); keep data out of the package and read it from a bucket");
        }
        if (Lib().archive_write_data_block(out.get(), buf, size, offset) < ARCHIVE_WARN) {
          return Internal(name + ": cannot write '" + target.string() +
                          "': " + ErrorString(out.get()));
        }
      }
      if (dr != ARCHIVE_EOF) {
        return InvalidArgument(name + ": corrupt archive at entry '" + path +
                               "': " + ErrorString(in.get()));
      }
    }
    if (Lib().archive_write_finish_entry(out.get()) < ARCHIVE_WARN) {
      return Internal(name + ": cannot finish '" + target.string() +
                      "': " + ErrorString(out.get()));
    }
    r = Lib().archive_read_next_header(in.get(), &e);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN && r != ARCHIVE_EOF) break;
  }
  if (r != ARCHIVE_EOF) {
    return InvalidArgument(name + ": corrupt archive after entry '" + path +
                           "': " + ErrorString(in.get()));
  }
  STOKER_RETURN_IF_ERROR(rules.Finish());
  if (Lib().archive_write_close(out.get()) != ARCHIVE_OK) {
    return Internal(name + ": cannot finish unpacking into " + root.string() + ": " +
                    ErrorString(out.get()));
  }
  return OkStatus();
}

Result<std::string> PackSdist(const fs::path& package_dir, const std::string& name,
                              const std::string& version) {
  return PackSdist(package_dir, name, version, {});
}

namespace {

// The package directory's files and directories under `prefix` ("NAME-VERSION/PKG"),
// without __pycache__ and .pyc files; a symlink to a file is packed as the file.
Status AddPackageTree(const fs::path& dir, const std::string& prefix,
                      std::vector<SdistMember>& members) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec);
  if (ec) return Internal("cannot read " + dir.string() + ": " + ec.message());
  for (fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return Internal("cannot read " + dir.string() + ": " + ec.message());
    const fs::path& p = it->path();
    std::string rel = p.lexically_relative(dir).generic_string();
    std::string file = p.filename().string();
    fs::file_status lst = it->symlink_status(ec);
    if (fs::is_directory(lst)) {
      if (file == "__pycache__") {
        it.disable_recursion_pending();
        continue;
      }
      members.push_back({prefix + "/" + rel, true, false, {}, {}});
      continue;
    }
    if (p.extension() == ".pyc") continue;
    fs::file_status st = fs::status(p, ec);  // follows a symlink to a file
    if (fs::is_directory(st)) {
      return InvalidArgument("--package-path: " + p.string() +
                             " is a symlink to a directory, which is not packed; copy the "
                             "directory into the package instead");
    }
    if (!fs::is_regular_file(st)) {
      return InvalidArgument("--package-path: " + p.string() +
                             " is not a regular file (a broken symlink, fifo or socket); "
                             "remove it from the package");
    }
    bool exec = (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
    members.push_back({prefix + "/" + rel, false, exec, p, {}});
  }

  return OkStatus();
}

// Files the caller adds under `top` (requirements, a generated module): each
// a safe relative path that no package member has.
Status AddExtraFiles(const std::vector<SdistFile>& extra_files, const std::string& top,
                     std::vector<SdistMember>& members) {
  for (const SdistFile& f : extra_files) {
    fs::path rel(f.path);
    bool safe = !f.path.empty() && rel.is_relative() && f.path.find('\\') == std::string::npos;
    for (const fs::path& part : rel) {
      if (part == ".." || part == "." || part.empty()) safe = false;
    }
    if (!safe)
      return InvalidArgument("sdist extra file '" + f.path + "': not a safe relative path");
    std::string path = top + "/" + rel.generic_string();
    for (const SdistMember& m : members) {
      if (m.path == path) {
        return InvalidArgument("sdist extra file '" + f.path + "' clashes with " + m.path +
                               " of the package");
      }
    }
    members.push_back({path, false, f.executable, {}, f.content});
  }
  return OkStatus();
}

}  // namespace

Result<std::string> PackSdist(const fs::path& package_dir, const std::string& name,
                              const std::string& version,
                              const std::vector<SdistFile>& extra_files) {
  STOKER_RETURN_IF_ERROR(LoadLibArchive().status());
  STOKER_RETURN_IF_ERROR(CheckSdistToken(name, "package name", /*version=*/false));
  STOKER_RETURN_IF_ERROR(CheckSdistToken(version, "package version", /*version=*/true));
  std::error_code ec;
  fs::path dir = fs::absolute(package_dir, ec).lexically_normal();
  if (!dir.empty() && !dir.has_filename()) dir = dir.parent_path();  // "trainer/"
  if (ec || !fs::is_directory(dir, ec)) {
    return NotFound("--package-path: " + package_dir.string() +
                    " is not a directory; point it at the Python package of the trainer "
                    "(e.g. ./trainer)");
  }
  const std::string top = name + "-" + version;
  const std::string pkg = dir.filename().string();
  std::vector<SdistMember> members;
  members.push_back({top, true, false, {}, {}});
  members.push_back({top + "/" + pkg, true, false, {}, {}});

  STOKER_RETURN_IF_ERROR(AddPackageTree(dir, top + "/" + pkg, members));

  members.push_back({top + "/PKG-INFO",
                     false,
                     false,
                     {},
                     "Metadata-Version: 1.0\nName: " + name + "\nVersion: " + version + "\n"});
  fs::path parent = dir.parent_path();
  if (fs::is_regular_file(parent / "setup.py", ec)) {
    for (const char* f : {"setup.py", "setup.cfg", "pyproject.toml"}) {
      if (fs::is_regular_file(parent / f, ec)) {
        members.push_back({top + "/" + f, false, false, parent / f, {}});
      }
    }
  } else {
    members.push_back({top + "/setup.py",
                       false,
                       false,
                       {},
                       "from setuptools import setup, find_packages\nsetup(name='" + name +
                           "', version='" + version + "', packages=find_packages())\n"});
  }
  STOKER_RETURN_IF_ERROR(AddExtraFiles(extra_files, top, members));
  std::sort(members.begin(), members.end(),
            [](const SdistMember& a, const SdistMember& b) { return a.path < b.path; });

  std::string bytes;
  WritePtr a(Lib().archive_write_new());
  if (Lib().archive_write_add_filter_gzip(a.get()) != ARCHIVE_OK ||
      Lib().archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      // No timestamp in the gzip header: the same tree gives the same bytes.
      Lib().archive_write_set_options(a.get(), "gzip:!timestamp") != ARCHIVE_OK ||
      Lib().archive_write_set_bytes_in_last_block(a.get(), 1) != ARCHIVE_OK ||
      Lib().archive_write_open(a.get(), &bytes, ArchiveOpen, ArchiveWrite, ArchiveClose) !=
          ARCHIVE_OK) {
    return Internal("cannot start packing " + dir.string() + ": " + ErrorString(a.get()));
  }
  for (SdistMember& m : members) {
    if (!m.dir && !m.source.empty()) {
      STOKER_ASSIGN_OR_RETURN(m.content, ReadFile(m.source));
    }
    EntryPtr e(Lib().archive_entry_new());
    Lib().archive_entry_set_pathname(e.get(), m.path.c_str());
    Lib().archive_entry_set_filetype(e.get(), m.dir ? AE_IFDIR : AE_IFREG);
    Lib().archive_entry_set_perm(e.get(), (m.dir || m.executable) ? 0755 : 0644);
    Lib().archive_entry_set_size(e.get(), m.dir ? 0 : static_cast<la_int64_t>(m.content.size()));
    Lib().archive_entry_set_mtime(e.get(), 0, 0);
    Lib().archive_entry_set_uid(e.get(), 0);
    Lib().archive_entry_set_gid(e.get(), 0);
    if (Lib().archive_write_header(a.get(), e.get()) != ARCHIVE_OK ||
        (!m.dir && !m.content.empty() &&
         Lib().archive_write_data(a.get(), m.content.data(), m.content.size()) !=
             static_cast<la_ssize_t>(m.content.size()))) {
      return Internal("cannot pack " + m.path + ": " + ErrorString(a.get()));
    }
    m.content.clear();
    m.content.shrink_to_fit();
  }
  if (Lib().archive_write_close(a.get()) != ARCHIVE_OK) {
    return Internal("cannot finish packing " + dir.string() + ": " + ErrorString(a.get()));
  }
  return bytes;
}

std::vector<fs::path> SdistRoots(const fs::path& dest) {
  std::vector<fs::path> dirs;
  bool is_package_root = false;
  std::error_code ec;
  for (fs::directory_iterator it(dest, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code e2;
    if (fs::is_directory(p, e2)) {
      if (fs::is_regular_file(p / "__init__.py", e2)) is_package_root = true;
      if (p.filename().string().front() != '.') dirs.push_back(p);
    } else if (p.extension() == ".py") {
      is_package_root = true;
    }
  }
  if (is_package_root) return {dest};
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace stoker::storage
