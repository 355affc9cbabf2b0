// Storage commands: `stoker storage ...` and `stoker gsutil ...` between
// local paths and gs:// buckets (docs/storage.md). The command lines, their
// messages and exit codes; the transfers themselves (streaming, resumable
// uploads, checksums, the pool of connections) are storage/transfer.h's.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "http/http.h"
#include "storage/buckets.h"
#include "storage/transfer.h"

namespace stoker::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using storage::ExpandedUrl;
using storage::ObjectApi;
using storage::Progress;
using storage::RemoteObject;
using storage::TransferJob;

namespace {

bool IsGs(const std::string& s) { return s.rfind("gs://", 0) == 0; }

// The transfer engine's view of a Connection.
class ConnectionApi final : public ObjectApi {
 public:
  explicit ConnectionApi(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}

  Result<http::Response> Stream(const std::string& method, const std::string& target,
                                std::map<std::string, std::string> headers, uint64_t body_size,
                                const http::Client::BodyReader& reader,
                                const http::Client::BodyWriter& writer) override {
    return conn_->Stream(method, target, std::move(headers), body_size, reader, writer);
  }
  Result<json> Call(const std::string& method, const std::string& target) override {
    return conn_->Call(method, target);
  }
  Status StatusOf(const http::Response& response) const override {
    return Connection::StatusOf(response);
  }
  const std::string& url() const override { return conn_->url(); }

 private:
  std::unique_ptr<Connection> conn_;
};

Result<std::unique_ptr<ObjectApi>> OpenApi(const Globals& g) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Connect(g));
  return std::unique_ptr<ObjectApi>(new ConnectionApi(std::move(conn)));
}

// Runs the jobs on kTransferWorkers connections of their own.
int RunJobs(const Globals& g, const std::vector<TransferJob>& jobs) {
  return storage::RunTransfers([&g] { return OpenApi(g); }, jobs, storage::kTransferWorkers);
}

struct Opts {
  bool recursive = false;
  bool parallel = false;
  bool quiet = false;
  bool long_list = false;
  bool summarize = false;
  bool human = false;
  bool delete_extra = false;
  bool force = false;
  bool gsutil = false;  // gsutil's messages and exit codes (1 on any failure)
};

int Fail(const Opts& o, const Status& s) {
  if (o.gsutil) {
    std::cerr << "CommandException: " << s.message() << "\n";
    return 1;
  }
  return Report(s);
}

// The transfers a cp will run. Jobs report to *progress, set once the
// jobs are counted (Progress needs the totals), before any job runs.
struct CopyPlan {
  std::vector<TransferJob> jobs;
  uint64_t total = 0;    // bytes
  bool omitted = false;  // a source directory was skipped (no -r)
  std::shared_ptr<Progress*> progress = std::make_shared<Progress*>(nullptr);
};

// cp SRC... gs://DST: one upload per local file.
Status PlanUploads(ObjectApi& api, const std::vector<std::string>& args, const std::string& dst,
                   const Opts& o, CopyPlan* plan) {
  STOKER_ASSIGN_OR_RETURN(storage::GsUri to, storage::ParseGsUri(dst, "DESTINATION"));
  auto progress = plan->progress;
  for (const std::string& src : args) {
    if (IsGs(src)) {
      return InvalidArgument("copying between two gs:// URLs (" + src + " to " + dst +
                             ") is not supported; copy through a local file");
    }
    if (src == "-") {
      if (to.object.empty() || to.object.back() == '/') {
        return InvalidArgument("cp - needs an object name: cp - gs://BUCKET/OBJECT");
      }
      plan->jobs.push_back({[progress, object = to.object, b = to.bucket](ObjectApi& c) {
                              uint64_t n = 0;
                              return storage::Upload(c, "-", b, object, *progress, &n).status();
                            },
                            "- -> " + dst});
      continue;
    }
    std::vector<storage::LocalFile> files = storage::ExpandLocal(src, o.recursive, &plan->omitted);
    if (files.empty() && !plan->omitted) return NotFound("No URLs matched: " + src);
    std::error_code ec;
    const bool src_is_dir = fs::is_directory(src, ec);
    // "cp -r ./data gs://b/data" makes gs://b/data/..., as gsutil does
    // when gs://b/data/ does not exist yet; into an existing "directory"
    // (or a bucket root, or a URL ending in '/') it goes below it.
    bool into = to.object.empty() || to.object.back() == '/' || args.size() > 1 ||
                storage::HasWildcard(src);
    if (!into && src_is_dir) {
      auto existing = storage::ListObjects(api, to.bucket, to.object + "/");
      into = existing.ok() && !existing->empty();
    }
    for (const storage::LocalFile& f : files) {
      std::string object = storage::UploadObjectName(to.object, into, src_is_dir, f);
      std::error_code size_ec;
      plan->total += fs::file_size(f.path, size_ec);
      plan->jobs.push_back({[progress, p = f.path.string(), object, b = to.bucket](ObjectApi& c) {
                              uint64_t n = 0;
                              auto r = storage::Upload(c, p, b, object, *progress, &n);
                              if (r.ok() && *progress) (*progress)->FileDone();
                              return r.status();
                            },
                            f.path.string() + " -> gs://" + to.bucket + "/" + object});
    }
  }
  return OkStatus();
}

// cp gs://SRC... DST: one download per object (to stdout for "-").
Status PlanDownloads(ObjectApi& api, const std::vector<std::string>& args, const std::string& dst,
                     const Opts& o, CopyPlan* plan) {
  auto progress = plan->progress;
  for (const std::string& src : args) {
    if (!IsGs(src)) {
      return InvalidArgument("cp copies between local paths and gs:// URLs; '" + src + "' and '" +
                             dst + "' are both local (use cp(1))");
    }
    STOKER_ASSIGN_OR_RETURN(ExpandedUrl e, storage::ExpandGs(api, src, o.recursive || !o.gsutil));
    if (e.objects.empty()) return NotFound("No URLs matched: " + src);
    if (e.is_prefix && !o.recursive && o.gsutil) {
      return InvalidArgument("No URLs matched: " + src +
                             " names a prefix; use cp -r to copy everything below it");
    }
    if (dst == "-") {
      for (const RemoteObject& obj : e.objects) {
        plan->jobs.push_back({[progress, b = e.bucket, name = obj.name](ObjectApi& c) {
                                return storage::FetchChecked(c, b, name, 1, *progress);
                              },
                              "gs://" + e.bucket + "/" + obj.name + " -> -"});
      }
      continue;
    }
    std::error_code ec;
    const bool dst_dir = fs::is_directory(dst, ec);
    if (e.objects.size() > 1 && !dst_dir && !e.is_prefix) {
      fs::create_directories(dst, ec);  // several matches go into a directory
    }
    for (const RemoteObject& obj : e.objects) {
      fs::path out = storage::DownloadPath(dst, dst_dir, o.recursive, e, obj);
      plan->total += obj.size;
      plan->jobs.push_back({[progress, b = e.bucket, name = obj.name, out](ObjectApi& c) {
                              Status s = storage::Download(c, b, name, out, *progress);
                              if (s.ok() && *progress) (*progress)->FileDone();
                              return s;
                            },
                            "gs://" + e.bucket + "/" + obj.name + " -> " + out.string()});
    }
  }
  return OkStatus();
}

int Cp(const Globals& g, std::vector<std::string> args, const Opts& o) {
  if (args.size() < 2) {
    return Fail(o, InvalidArgument("cp needs a SOURCE and a DESTINATION (cp [-r] SRC... DST)"));
  }
  std::string dst = args.back();
  args.pop_back();
  auto api = OpenApi(g);
  if (!api.ok()) return Fail(o, api.status());
  CopyPlan plan;
  Status planned = IsGs(dst) ? PlanUploads(**api, args, dst, o, &plan)
                             : PlanDownloads(**api, args, dst, o, &plan);
  if (!planned.ok()) return Fail(o, planned);
  Progress progress(!o.quiet && !g.quiet && dst != "-", plan.total, plan.jobs.size());
  *plan.progress = &progress;
  int failed = RunJobs(g, plan.jobs);
  progress.Stop();
  if (failed > 0 || plan.omitted) {
    if (o.gsutil) return 1;
    return Report(Status(Code::kInternal, std::to_string(failed) + " of " +
                                              std::to_string(plan.jobs.size()) + " copies failed"));
  }
  if (o.gsutil && !o.quiet && !g.quiet) {
    std::cerr << "Operation completed over " << plan.jobs.size() << " objects/"
              << storage::HumanBytes(plan.total) << ".\n";
  } else if (!o.gsutil && !o.quiet && dst != "-") {
    // `storage cp` printed its summary on stdout.
    std::cout << "Copied " << plan.jobs.size() << " file(s), " << plan.total << " bytes, to " << dst
              << "\n";
  }
  return 0;
}

int Ls(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto api = OpenApi(g);
  if (!api.ok()) return Fail(o, api.status());
  if (urls.empty()) {
    auto r = (*api)->Call("GET", "/storage/v1/b");
    if (!r.ok()) return Fail(o, r.status());
    for (const json& b : (*r)["items"])
      std::cout << "gs://" << b["name"].get<std::string>() << "/\n";
    return 0;
  }
  int rc = 0;
  uint64_t count = 0, bytes = 0;
  for (const std::string& url : urls) {
    auto u = storage::ParseGsUri(url, "URL");
    if (!u.ok()) return Fail(o, u.status());
    auto e = storage::ExpandGs(**api, url, true);
    if (!e.ok()) {
      rc = Fail(o, e.status());
      continue;
    }
    if (e->objects.empty()) {
      // An empty but existing bucket lists nothing, successfully.
      if (u->object.empty()) continue;
      rc = Fail(o, NotFound("One or more URLs matched no objects: " + url));
      continue;
    }
    std::set<std::string> dirs;
    for (const RemoteObject& obj : e->objects) {
      std::string rel = obj.name.substr(e->base.size());
      size_t slash = rel.find('/');
      if (!o.recursive && e->is_prefix && slash != std::string::npos) {
        std::string d = "gs://" + e->bucket + "/" + e->base + rel.substr(0, slash + 1);
        if (dirs.insert(d).second) {
          std::cout << (o.long_list ? "                                 " : "") << d << "\n";
        }
        continue;
      }
      ++count;
      bytes += obj.size;
      if (o.long_list) {
        std::printf("%10llu  %s  gs://%s/%s\n", static_cast<unsigned long long>(obj.size),
                    obj.updated.substr(0, 19).append("Z").c_str(), e->bucket.c_str(),
                    obj.name.c_str());
      } else if (!o.gsutil) {
        // `storage ls` keeps its old columns: size, time, URL.
        std::printf("%12llu  %s  gs://%s/%s\n", static_cast<unsigned long long>(obj.size),
                    obj.updated.c_str(), e->bucket.c_str(), obj.name.c_str());
      } else {
        std::cout << "gs://" << e->bucket << "/" << obj.name << "\n";
      }
    }
  }
  if (o.long_list) {
    std::cout << "TOTAL: " << count << " objects, " << bytes << " bytes ("
              << storage::HumanBytes(bytes) << ")\n";
  }
  return rc;
}

int Mb(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  int rc = 0;
  for (const std::string& url : urls) {
    auto at = storage::ParseGsUri(url, "URL");
    if (!at.ok()) return Fail(o, at.status());
    if (!at->object.empty()) {
      return Fail(o, InvalidArgument("mb takes a bucket URL (gs://BUCKET), not an object: " + url));
    }
    std::cout << "Creating gs://" << at->bucket << "/...\n";
    auto r = (*conn)->Call("POST", "/storage/v1/b", json{{"name", at->bucket}}.dump());
    if (!r.ok()) {
      if (o.gsutil && r.status().code() == Code::kAlreadyExists) {
        std::cerr << "ServiceException: 409 A Cloud Storage bucket named '" << at->bucket
                  << "' already exists. Try another name.\n";
        rc = 1;
        continue;
      }
      return Fail(o, r.status());
    }
  }
  return rc;
}

int Rm(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto api = OpenApi(g);
  if (!api.ok()) return Fail(o, api.status());
  std::vector<TransferJob> jobs;
  std::vector<std::string> buckets_to_remove;
  for (const std::string& url : urls) {
    auto u = storage::ParseGsUri(url, "URL");
    if (!u.ok()) return Fail(o, u.status());
    auto e = storage::ExpandGs(**api, url, o.recursive);
    if (!e.ok()) return Fail(o, e.status());
    if (e->is_prefix && !o.recursive && !e->objects.empty()) {
      return Fail(o, InvalidArgument("\"rm " + url +
                                     "\" names a prefix or bucket; use rm -r to delete "
                                     "everything below it"));
    }
    if (e->objects.empty() && !(o.recursive && u->object.empty())) {
      if (o.force) continue;
      return Fail(o, NotFound("No URLs matched: " + url));
    }
    if (o.recursive && u->object.empty()) buckets_to_remove.push_back(u->bucket);
    for (const RemoteObject& obj : e->objects) {
      std::string what = "gs://" + e->bucket + "/" + obj.name;
      jobs.push_back({[b = e->bucket, name = obj.name, what, &o](ObjectApi& c) {
                        STOKER_RETURN_IF_ERROR(storage::DeleteObject(c, b, name));
                        if (!o.quiet) std::cerr << "Removing " + what + "...\n";
                        return OkStatus();
                      },
                      what});
    }
  }
  int failed = RunJobs(g, jobs);
  for (const std::string& b : buckets_to_remove) {
    auto r =
        (*api)->Stream("DELETE", "/storage/v1/b/" + http::UrlEncode(b), {}, 0, nullptr, nullptr);
    Status s = r.ok() ? (*api)->StatusOf(*r) : r.status();
    if (!s.ok()) {
      std::cerr << "CommandException: gs://" << b << ": " << s.message() << "\n";
      ++failed;
    } else if (!o.quiet) {
      std::cerr << "Removing gs://" << b << "/...\n";
    }
  }
  if (failed > 0)
    return o.gsutil ? 1 : Report(Internal(std::to_string(failed) + " removals failed"));
  return 0;
}

int Cat(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto api = OpenApi(g);
  if (!api.ok()) return Fail(o, api.status());
  for (const std::string& url : urls) {
    auto e = storage::ExpandGs(**api, url, false);
    if (!e.ok()) return Fail(o, e.status());
    if (e->objects.empty() || e->is_prefix) return Fail(o, NotFound("No URLs matched: " + url));
    for (const RemoteObject& obj : e->objects) {
      Progress none(false, 0, 0);
      Status s = storage::FetchChecked(**api, e->bucket, obj.name, 1, &none);
      if (!s.ok()) return Fail(o, s);
    }
  }
  return 0;
}

int Du(const Globals& g, const std::vector<std::string>& in, const Opts& o) {
  auto api = OpenApi(g);
  if (!api.ok()) return Fail(o, api.status());
  std::vector<std::string> urls = in;
  if (urls.empty()) {
    auto r = (*api)->Call("GET", "/storage/v1/b");
    if (!r.ok()) return Fail(o, r.status());
    for (const json& b : (*r)["items"]) urls.push_back("gs://" + b["name"].get<std::string>());
  }
  auto size_text = [&](uint64_t n) {
    return o.human ? storage::HumanBytes(static_cast<double>(n)) : std::to_string(n);
  };
  int rc = 0;
  for (const std::string& url : urls) {
    auto u = storage::ParseGsUri(url, "URL");
    if (!u.ok()) return Fail(o, u.status());
    auto e = storage::ExpandGs(**api, url, true);
    if (!e.ok()) return Fail(o, e.status());
    if (e->objects.empty() && !u->object.empty()) {
      rc = Fail(o, NotFound("No URLs matched: " + url));
      continue;
    }
    uint64_t sum = 0;
    for (const RemoteObject& obj : e->objects) {
      sum += obj.size;
      if (!o.summarize) {
        std::cout << size_text(obj.size) << "  gs://" << e->bucket << "/" << obj.name << "\n";
      }
    }
    if (o.summarize) std::cout << size_text(sum) << "  " << url << "\n";
  }
  return rc;
}

// rsync SRC DST: copies what is missing or different (size, then md5) from
// SRC to DST; with -d, deletes what DST has that SRC lacks.
int Rsync(const Globals& g, const std::string& src, const std::string& dst, const Opts& o) {
  auto api = OpenApi(g);
  if (!api.ok()) return Fail(o, api.status());
  if (IsGs(src) == IsGs(dst)) {
    return Fail(o, InvalidArgument("rsync syncs a local directory with a gs:// URL (either way)"));
  }
  const bool up = !IsGs(src);
  fs::path local_root(up ? src : dst);
  auto u = storage::ParseGsUri(up ? dst : src, "URL");
  if (!u.ok()) return Fail(o, u.status());
  std::string prefix = u->object.empty() || u->object.back() == '/' ? u->object : u->object + "/";
  auto listing = storage::ListObjects(**api, u->bucket, prefix);
  if (!listing.ok()) return Fail(o, listing.status());
  auto remote = storage::RemoteObjectsByName(std::move(*listing), prefix, o.recursive);
  std::error_code ec;
  if (up && !fs::is_directory(local_root, ec)) return Fail(o, NotFound("No URLs matched: " + src));
  auto local = storage::LocalFilesByName(local_root, o.recursive);
  std::vector<storage::SyncStep> steps = storage::PlanRsync(local, remote, local_root, prefix, up,
                                                            o.delete_extra, storage::SameContent);
  std::vector<TransferJob> jobs;
  uint64_t total = 0;
  auto progress = std::make_shared<Progress*>(nullptr);
  for (const storage::SyncStep& step : steps) {
    total += step.bytes;
    const std::string gs_url = "gs://" + u->bucket + "/" + step.object;
    switch (step.action) {
      case storage::SyncAction::kUpload:
        jobs.push_back({[progress, p = step.local.string(), object = step.object,
                         b = u->bucket](ObjectApi& c) {
                          uint64_t n = 0;
                          return storage::Upload(c, p, b, object, *progress, &n).status();
                        },
                        "Copying file://" + step.local.string()});
        break;
      case storage::SyncAction::kDownload:
        jobs.push_back({[progress, b = u->bucket, name = step.object, out = step.local](
                            ObjectApi& c) { return storage::Download(c, b, name, out, *progress); },
                        "Copying " + gs_url});
        break;
      case storage::SyncAction::kDeleteLocal:
        jobs.push_back({[p = step.local](ObjectApi&) {
                          std::error_code e;
                          fs::remove(p, e);
                          return e ? Internal("cannot remove " + p.string()) : OkStatus();
                        },
                        "Removing file://" + step.local.string()});
        break;
      case storage::SyncAction::kDeleteRemote:
        jobs.push_back({[b = u->bucket, name = step.object](ObjectApi& c) {
                          return storage::DeleteObject(c, b, name);
                        },
                        "Removing " + gs_url});
        break;
    }
  }
  if (!o.quiet) {
    std::cerr << "Building synchronization state...\nStarting synchronization...\n";
    for (const TransferJob& j : jobs) std::cerr << j.what << "\n";
  }
  Progress shown(!o.quiet && !g.quiet, total, jobs.size());
  *progress = &shown;
  int failed = RunJobs(g, jobs);
  shown.Stop();
  if (failed > 0)
    return o.gsutil ? 1 : Report(Internal(std::to_string(failed) + " transfers failed"));
  return 0;
}

// Adds the verbs to `group` (`storage` or `gsutil`).
void AddVerbs(CLI::App* group, const Globals& g, int& rc, bool gsutil, std::shared_ptr<Opts> top) {
  struct Args {
    std::vector<std::string> urls;
    Opts o;
  };
  auto setup = [&](CLI::App* cmd, std::shared_ptr<Args> a) {
    cmd->allow_extras(false);
    cmd->add_flag("-r,-R,--recursive", a->o.recursive, "Recurse into directories / prefixes");
    cmd->add_flag("-m", a->o.parallel, "Parallel transfers (always on: 8 connections)");
    cmd->add_flag("-q,--quiet", a->o.quiet, "No progress or per-file messages");
  };
  auto finish = [top, gsutil](const Args& a) {
    Opts o = a.o;
    o.gsutil = gsutil;
    o.quiet = o.quiet || top->quiet;
    o.parallel = o.parallel || top->parallel;
    return o;
  };
  {
    auto a = std::make_shared<Args>();
    auto* cp = group->add_subcommand(
        "cp", "Copy files and objects (cp [-r] SRC... DST; - is stdin/stdout)");
    setup(cp, a);
    cp->add_option("URLS", a->urls, "Sources, then the destination")->required()->expected(-1);
    cp->callback([&g, &rc, a, finish, gsutil] {
      Opts o = finish(*a);
      // `storage cp DIR gs://...` always copied directories whole.
      if (!gsutil) o.recursive = true;
      rc = Cp(g, a->urls, o);
    });
  }
  {
    auto a = std::make_shared<Args>();
    auto* ls = group->add_subcommand("ls", "List buckets, or objects under gs://BUCKET/PREFIX");
    setup(ls, a);
    ls->add_flag("-l", a->o.long_list, "Long listing: size, time, and a total");
    ls->add_option("URLS", a->urls);
    ls->callback([&g, &rc, a, finish, gsutil] {
      Opts o = finish(*a);
      // `storage ls gs://b/prefix` always listed every object below.
      if (!gsutil) o.recursive = true;
      rc = Ls(g, a->urls, o);
    });
  }
  {
    auto a = std::make_shared<Args>();
    auto* mb = group->add_subcommand("mb", "Make buckets");
    setup(mb, a);
    mb->add_option("URLS", a->urls)->required()->expected(-1);
    mb->callback([&g, &rc, a, finish] { rc = Mb(g, a->urls, finish(*a)); });
    if (!gsutil) {
      // gcloud storage buckets create gs://B
      auto* buckets = group->add_subcommand("buckets", "Buckets (gcloud storage buckets ...)");
      buckets->require_subcommand(1);
      auto b = std::make_shared<Args>();
      auto* create = buckets->add_subcommand("create", "Make buckets");
      create->add_option("URLS", b->urls)->required()->expected(-1);
      create->callback([&g, &rc, b, finish] { rc = Mb(g, b->urls, finish(*b)); });
      auto* list = buckets->add_subcommand("list", "List buckets");
      list->callback([&g, &rc, b, finish] { rc = Ls(g, {}, finish(*b)); });
    }
  }
  {
    auto a = std::make_shared<Args>();
    auto* rm = group->add_subcommand("rm", "Remove objects (rm -r gs://B removes the bucket too)");
    setup(rm, a);
    rm->add_flag("-f", a->o.force, "Go on when a URL matches nothing");
    rm->add_option("URLS", a->urls)->required()->expected(-1);
    rm->callback([&g, &rc, a, finish] { rc = Rm(g, a->urls, finish(*a)); });
  }
  {
    auto a = std::make_shared<Args>();
    auto* cat = group->add_subcommand("cat", "Write objects to stdout");
    setup(cat, a);
    cat->add_option("URLS", a->urls)->required()->expected(-1);
    cat->callback([&g, &rc, a, finish] { rc = Cat(g, a->urls, finish(*a)); });
  }
  {
    auto a = std::make_shared<Args>();
    auto* du = group->add_subcommand("du", "Object sizes (du [-s] [-h] URL...)");
    du->set_help_flag("--help", "Print this help message and exit");  // -h is gsutil's
    setup(du, a);
    du->add_flag("-s", a->o.summarize, "One total per URL");
    du->add_flag("-h", a->o.human, "Sizes in KiB, MiB, GiB");
    du->add_option("URLS", a->urls);
    du->callback([&g, &rc, a, finish] { rc = Du(g, a->urls, finish(*a)); });
  }
  {
    auto a = std::make_shared<Args>();
    auto* rs = group->add_subcommand("rsync", "Make DST like SRC (rsync [-r] [-d] SRC DST)");
    setup(rs, a);
    rs->add_flag("-d,--delete-unmatched-destination-objects", a->o.delete_extra,
                 "Delete what DST has and SRC lacks");
    rs->add_option("URLS", a->urls)->required()->expected(2);
    rs->callback([&g, &rc, a, finish] { rc = Rsync(g, a->urls[0], a->urls[1], finish(*a)); });
  }
}

}  // namespace

int StorageCp(const Globals& g, const std::string& src, const std::string& dst) {
  Opts o;
  o.recursive = true;
  return Cp(g, {src, dst}, o);
}

int StorageLs(const Globals& g, const std::string& uri) {
  Opts o;
  o.recursive = true;
  return Ls(g, uri.empty() ? std::vector<std::string>{} : std::vector<std::string>{uri}, o);
}

int StorageMb(const Globals& g, const std::string& uri) { return Mb(g, {uri}, Opts{}); }

void RegisterStorageCommands(CLI::App& app, Globals& g, int& rc) {
  auto storage_top = std::make_shared<Opts>();
  auto* st = app.add_subcommand("storage", "Local buckets behind gs:// URIs (gcloud storage)");
  st->require_subcommand(1);
  AddVerbs(st, g, rc, /*gsutil=*/false, storage_top);

  auto gsutil_top = std::make_shared<Opts>();
  auto* gs = app.add_subcommand(
      "gsutil",
      "gsutil's command lines against the local buckets (cp, ls, mb, rm, cat, du, rsync)");
  gs->require_subcommand(1);
  gs->add_flag("-m", gsutil_top->parallel, "Parallel transfers (always on: 8 connections)");
  gs->add_flag("-q", gsutil_top->quiet, "Quiet: no progress or per-file messages");
  AddVerbs(gs, g, rc, /*gsutil=*/true, gsutil_top);
}

}  // namespace stoker::cli
