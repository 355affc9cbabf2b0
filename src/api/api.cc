#include "api/api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "api/console_session.h"
#include "api/list_filter.h"
#include "api/resumable_uploads.h"
#include "api/routes.h"
#include "common/time.h"
#include "spec/custom_job.h"
#include "storage/archive.h"

namespace stoker::api {

using nlohmann::json;
using spec::JobState;

namespace {

constexpr size_t kMaxLogChunk = 1 << 20;

const char* RpcStatusName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kAlreadyExists:
      return "ALREADY_EXISTS";
    case Code::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case Code::kPermissionDenied:
      return "PERMISSION_DENIED";
    case Code::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case Code::kCancelled:
      return "CANCELLED";
    case Code::kInternal:
      return "INTERNAL";
  }
  return "INTERNAL";
}

}  // namespace

http::Response Json(const json& j, int status) {
  http::Response r;
  r.status = status;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

http::Response Error(const Status& s) {
  int code = HttpStatusFor(s.code());
  return Json(
      {{"error", {{"code", code}, {"message", s.message()}, {"status", RpcStatusName(s.code())}}}},
      code);
}

json RenderJob(const store::JobRecord& r) {
  json j = r.spec;
  j["name"] =
      "projects/" + r.project + "/locations/" + r.location + "/customJobs/" + std::to_string(r.id);
  j["state"] = spec::JobStateName(r.state);
  j["createTime"] = FormatRfc3339(r.create_time_us);
  j["updateTime"] = FormatRfc3339(r.update_time_us);
  if (r.start_time_us) j["startTime"] = FormatRfc3339(r.start_time_us);
  if (r.end_time_us) j["endTime"] = FormatRfc3339(r.end_time_us);
  if (r.error_code) j["error"] = {{"code", r.error_code}, {"message", r.error_message}};
  // Stoker's output-only block: who submitted it, which attempt runs, why it waits.
  json stoker = {{"user", r.user}, {"attempt", r.attempt}};
  if (!r.wait_reason.empty()) stoker["waitReason"] = r.wait_reason;
  if (r.preemptions) stoker["preemptions"] = r.preemptions;
  if (!r.restart_reason.empty()) stoker["restartReason"] = r.restart_reason;
  j["stoker"] = stoker;
  return j;
}

namespace {

Result<int64_t> ParseId(const std::string& s) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v <= 0) {
    return NotFound("custom job '" + s +
                    "' does not exist (job ids are numbers, see 'stoker jobs list')");
  }
  return static_cast<int64_t>(v);
}

}  // namespace

// A query parameter that must be a whole number >= 0 (hostile-input bound:
// atoi/strtoull took "-1" and "abc" silently).
static Result<int64_t> QueryCount(const std::string& name, const std::string& text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    return InvalidArgument(name + ": must be a whole number from 0 to " +
                           std::to_string(std::numeric_limits<int64_t>::max()) + ", got '" + text +
                           "'");
  }
  return v;
}

namespace {

// ParseListOptions; `state_filter` false leaves `filter` to the caller.
Result<store::ListOptions> ParseListOptionsImpl(const http::Request& req, bool state_filter) {
  store::ListOptions opts;
  if (auto it = req.query.find("pageSize"); it != req.query.end()) {
    // AIP-158: 0 means the default, larger than the maximum means the maximum.
    STOKER_ASSIGN_OR_RETURN(int64_t size, QueryCount("pageSize", it->second));
    if (size > 0) opts.limit = static_cast<int>(std::min<int64_t>(size, 1000));
  }
  if (auto it = req.query.find("pageToken"); it != req.query.end() && !it->second.empty()) {
    STOKER_ASSIGN_OR_RETURN(opts.after_id, QueryCount("pageToken", it->second));
  }
  // AIP-132 orderBy: creation order (ids grow with it), oldest first by default.
  if (auto it = req.query.find("orderBy"); it != req.query.end() && !it->second.empty()) {
    static const std::regex kOrder(R"re(^\s*(create_time|createTime)(\s+(asc|desc))?\s*$)re");
    std::smatch m;
    if (!std::regex_match(it->second, m, kOrder)) {
      return InvalidArgument(
          "orderBy: only 'create_time' and 'create_time desc' are supported, got '" + it->second +
          "'");
    }
    opts.newest_first = m[3] == "desc";
  }
  if (auto it = req.query.find("filter");
      state_filter && it != req.query.end() && !it->second.empty()) {
    static const std::regex kState(R"re(^\s*state\s*=\s*"?([A-Z_]+)"?\s*$)re");
    std::smatch m;
    if (!std::regex_match(it->second, m, kState) || !spec::ParseJobState(m[1].str())) {
      return InvalidArgument("filter: only state=\"JOB_STATE_...\" is supported yet, got '" +
                             it->second + "'");
    }
    opts.state = spec::ParseJobState(m[1].str());
  }
  return opts;
}

}  // namespace

std::string QueryValue(const http::Request& req, const std::string& key) {
  auto it = req.query.find(key);
  return it == req.query.end() ? "" : it->second;
}

namespace {

// Answers `response` to an upload without taking its body.
class RejectSink : public http::BodySink {
 public:
  explicit RejectSink(http::Response r) : response_(std::move(r)) {}
  bool Write(std::string_view) override { return false; }
  bool Accepting() const override { return false; }
  http::Response Finish() override { return std::move(response_); }

 private:
  http::Response response_;
};

}  // namespace

std::unique_ptr<http::BodySink> RejectBody(http::Response response) {
  return std::make_unique<RejectSink>(std::move(response));
}

Status NotVisible(const std::string& what) {
  return NotFound(what + " does not exist (or belongs to another user)");
}

Result<store::ListOptions> ParseListOptions(const http::Request& req) {
  return ParseListOptionsImpl(req, /*state_filter=*/true);
}

Result<store::JobRecord> CreateCustomJob(const ApiDeps& d, const spec::CustomJob& submitted,
                                         store::NewJob record) {
  spec::CustomJob job = submitted;
  STOKER_ASSIGN_OR_RETURN(std::string lowered, ApplyPriorityCeiling(d, record.user, job.job_spec));
  if (!lowered.empty()) record.warnings.push_back(lowered);
  // An AI Platform job's runtimeVersion image is not held to TensorFlow.
  STOKER_ASSIGN_OR_RETURN(admission::AdmittedJob admitted,
                          d.admission->AdmitJob(job, record.legacy_job_id.empty()));
  STOKER_RETURN_IF_ERROR(
      CheckBudgets(d, record.user, record.project, json(job.labels), &admitted.warnings));
  record.display_name = job.display_name;
  record.spec = std::move(admitted.spec);
  // After any the caller's form added (AI Platform fields it does not act on).
  record.warnings.insert(record.warnings.end(), admitted.warnings.begin(), admitted.warnings.end());
  // The control loop is told before the commit's fsync, so that placing the
  // job overlaps it (decision 0048).
  store::Store::CreateWatcher watcher{
      [&](const store::JobRecord& inserted) { d.control_plane->Submitted(inserted); },
      [&](int64_t id) { d.control_plane->SubmitFailed(id); }};
  return d.store->CreateJob(record, &watcher);
}

namespace {

// Hostile-input bounds shared by every route (docs/security.md).
constexpr int kMaxJsonDepth = 64;

// The nesting depth of the JSON text `s` (brackets outside strings), or -1
// once it passes `limit`. Copying, printing and comparing nlohmann values
// recurse, so a body nested 100 000 deep would overflow a worker's stack.
int JsonDepth(std::string_view s, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return -1;
      max_depth = std::max(max_depth, depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Project and location ids name stored jobs and come back in resource
// names: keep them to URL-unreserved ASCII (Vertex's are narrower still).
bool IsResourceId(std::string_view s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
  });
}

Status CheckRequestBounds(const http::Request& req) {
  // Bodies of the upload routes are data, not requests: any bytes go.
  bool data_body = req.path.rfind("/upload/", 0) == 0 || req.path == "/v1/stoker/staging";
  if (!data_body && !req.body.empty() && JsonDepth(req.body, kMaxJsonDepth) < 0) {
    return InvalidArgument("request body: JSON nested deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");
  }
  if (req.path.rfind("/v1/projects/", 0) == 0) {
    std::string_view rest(req.path);
    rest.remove_prefix(std::string_view("/v1/projects/").size());
    // The project ends at the next '/' or at a custom method (":getConfig").
    std::string_view project = rest.substr(0, rest.find_first_of("/:"));
    if (!IsResourceId(project)) {
      return InvalidArgument("project '" + std::string(project) +
                             "': use letters, digits, '-', '_', '.' or '~' (at most 128)");
    }
    rest.remove_prefix(project.size());
    if (rest.rfind("/locations/", 0) == 0) {
      rest.remove_prefix(std::string_view("/locations/").size());
      std::string_view location = rest.substr(0, rest.find('/'));
      if (!IsResourceId(location)) {
        return InvalidArgument("location '" + std::string(location) +
                               "': use letters, digits, '-', '_', '.' or '~' (at most 128)");
      }
    }
  }
  return OkStatus();
}

// 401: no credential, or one that does not authenticate.
http::Response Unauthenticated(const std::string& why) {
  http::Response r = Json({{"error",
                            {{"code", 401},
                             {"message", why + ". Send 'Authorization: Bearer <token>'. The CLI "
                                               "reads --token, $STOKER_TOKEN or $STOKER_HOME/token "
                                               "(the local admin's token, which stokerd writes "
                                               "into its data dir); an admin issues tokens with "
                                               "'stoker admin users token NAME'"},
                             {"status", "UNAUTHENTICATED"}}}},
                          401);
  r.headers["WWW-Authenticate"] = "Bearer realm=\"stoker\"";
  return r;
}

auth::Action ActionOf(const http::Request& req) {
  if (req.path.rfind("/v1/admin/", 0) == 0) return auth::Action::kManage;
  if (req.path == kSignInLinkPath) return auth::Action::kRead;  // changes nothing
  if (req.method == "GET" || req.method == "HEAD") return auth::Action::kRead;
  return auth::Action::kWrite;
}

class Api {
 public:
  explicit Api(ApiDeps deps) : d_(deps), uploads_(deps.buckets, deps.tls) {}

  // Authentication and the role check, then the routes.
  http::Response Handle(const http::Request& req) {
    auth::Principal caller;
    if (auto r = Authenticate(req, &caller)) return *r;
    return Route(req, caller);
  }

  // The stream router (http::StreamRouter): object uploads, resumable
  // chunks and package staging stream their bodies to disk; every other
  // request is collected and goes to Handle.
  std::unique_ptr<http::BodySink> StreamRoute(const http::Request& head) {
    static const std::regex kUpload(R"(^/upload/storage/v1/b/([^/]+)/o$)");
    std::smatch m;
    const bool staging = head.path == "/v1/stoker/staging" && head.method == "POST";
    const bool upload = std::regex_match(head.path, m, kUpload);
    const bool chunk =
        upload && (head.method == "PUT" || head.method == "POST") && head.query.count("upload_id");
    const bool media =
        upload && head.method == "POST" && !chunk && QueryValue(head, "uploadType") != "resumable";
    if (!staging && !chunk && !media) return nullptr;
    auth::Principal caller;
    if (auto r = Authenticate(head, &caller)) return RejectBody(std::move(*r));
    if (Status s = CheckRequestBounds(head); !s.ok()) return RejectBody(Error(s));
    if (Status s = CheckRoomFor(head); !s.ok()) return RejectBody(Error(s));
    if (staging) return OpenStagingUpload(d_);
    const std::string bucket = m[1];
    if (chunk) return uploads_.OpenChunk(head, caller);
    return OpenObjectUpload(d_, head, bucket);
  }

 private:
  // A declared body that the data directory's disk cannot hold is refused
  // before a byte of it is read (a chunked one ends when the disk is full).
  Status CheckRoomFor(const http::Request& head) const {
    auto cl = head.headers.find("content-length");
    if (cl == head.headers.end()) return OkStatus();
    uint64_t length = std::strtoull(cl->second.c_str(), nullptr, 10);
    std::error_code ec;
    std::filesystem::space_info space = std::filesystem::space(d_.buckets->DataDir(), ec);
    if (ec || length <= space.available) return OkStatus();
    return ResourceExhausted("request body of " + cl->second +
                             " bytes is larger than the free space of the data disk (" +
                             std::to_string(space.available) +
                             " bytes); free some space or "
                             "send less");
  }

 public:
  // Who is calling: nullopt with `*out` set when the request may go on to
  // the routes, else the response that ends it (401, 403, or a route that
  // needs no token).
  std::optional<http::Response> Authenticate(const http::Request& req, auth::Principal* out) {
    if (req.path == "/healthz") return Json({{"status", "ok"}});
    // The console's files and sign-in: no token (console_routes.cc).
    if (auto r = HandleConsoleRoutes(d_, req)) return *r;
    static const std::regex kMeasure(
        R"(^/v1/projects/[^/]+/locations/[^/]+/studies/(\d{1,19})/trials/(\d{1,19}):addTrialMeasurement$)");
    auto header = req.headers.find("authorization");
    std::optional<console::Session> session;
    if (header == req.headers.end()) {
      // The console's session cookie stands for the user who signed in;
      // with its cross-site checks (console_session.h) it then acts as a
      // bearer token of that user would.
      auto cookie = req.headers.find("cookie");
      if (cookie != req.headers.end()) session = console::SessionFromCookieHeader(cookie->second);
      if (session) {
        Status s = console::CheckCookieRequest(req, console::CsrfValue(d_.push_secret, *session));
        if (!s.ok()) return Error(s);
      }
    }
    if (header == req.headers.end() && !session) {
      // A trainer pushes its trial's measurements with the trial's key (the
      // ?key= of $STOKER_METRICS_URL) instead of a token: no daemon secret
      // reaches a trainer, and the key opens this one trial only.
      std::smatch m;
      if (req.method == "POST" && std::regex_match(req.path, m, kMeasure)) {
        auto key = req.query.find("key");
        if (key == req.query.end() || d_.push_secret.empty() ||
            !auth::ConstantTimeEquals(key->second,
                                      auth::TrialPushKey(d_.push_secret, m[1].str(), m[2].str()))) {
          return Unauthenticated(
              "a measurement push needs its trial's key (POST to $STOKER_METRICS_URL as given, "
              "with its ?key=) or a bearer token");
        }
        if (Status s = CheckRequestBounds(req); !s.ok()) return Error(s);
        auth::Principal trainer{"", auth::Role::kUser, "", ""};
        if (auto r = HandleTuningRoutes(d_, req, trainer)) return *r;
      }
      return Unauthenticated("this request has no bearer token");
    }
    Result<auth::Principal> caller = NotFound("");
    if (session) {
      caller = d_.auth->AuthenticateConsoleSession(session->id);
    } else {
      std::optional<std::string> token = auth::BearerToken(header->second);
      if (!token) return Unauthenticated("the Authorization header is not 'Bearer <token>'");
      caller = d_.auth->Authenticate(*token);
    }
    if (!caller.ok()) {
      if (caller.status().code() == Code::kNotFound) {
        return Unauthenticated(caller.status().message());
      }
      return Error(caller.status());
    }
    auth::Action action = ActionOf(req);
    if (!auth::RoleAllows(caller->role, action)) {
      return Error(PermissionDenied(
          "user '" + caller->user + "' has role " + std::string(auth::RoleName(caller->role)) +
          (action == auth::Action::kManage
               ? ", and only admins manage users, tokens and backups"
               : ", which may read but not submit, cancel or upload; ask an admin for role user "
                 "(stoker admin users add NAME --role user)")));
    }
    *out = *caller;
    return std::nullopt;
  }

 private:
  http::Response Route(const http::Request& req, const auth::Principal& caller) {
    static const std::regex kJobs(R"(^/v1/projects/([^/]+)/locations/([^/]+)/customJobs$)");
    static const std::regex kJob(
        R"(^/v1/projects/([^/]+)/locations/([^/]+)/customJobs/([^/:]+)(:cancel|/events|/logs)?$)");
    static const std::regex kUpload(R"(^/upload/storage/v1/b/([^/]+)/o$)");
    std::smatch m;
    const std::string& path = req.path;
    const std::string& method = req.method;
    if (Status s = CheckRequestBounds(req); !s.ok()) return Error(s);
    if (auto r = HandleAdminRoutes(d_, req, caller)) return *r;
    if (auto r = HandleConsoleLinkRoutes(d_, req, caller)) return *r;
    if (auto r = HandleTelemetryRoutes(d_, req, caller)) return *r;
    if (auto r = HandleTrainingMetricsRoutes(d_, req, caller)) return *r;
    if (auto r = HandleCostRoutes(d_, req, caller)) return *r;
    if (auto r = HandleMetricsRoutes(d_, req, caller)) return *r;
    if (auto r = HandleClusterRoutes(d_, req, caller)) return *r;
    if (auto r = HandleLegacyRoutes(d_, req, caller)) return *r;
    if (auto r = HandleOperationRoutes(d_, req, caller)) return *r;
    if (auto r = HandleTuningRoutes(d_, req, caller)) return *r;
    if (std::regex_match(path, m, kJobs)) {
      if (method == "POST") return SubmitJob(m[1], m[2], req.body, caller);
      if (method == "GET") return ListJobs(req, caller);
      return MethodNotAllowed(req);
    }
    if (std::regex_match(path, m, kJob)) {
      // A job submitted through the AI Platform API may also be named by its jobId.
      auto id = ParseId(m[3]);
      if (!id.ok()) {
        auto legacy = d_.store->GetJobByLegacyId(m[1], m[3]);
        if (!legacy.ok()) return Error(id.status());
        id = legacy->id;
      }
      std::string suffix = m[4];
      auto owned = d_.store->GetJob(*id);
      if (!owned.ok()) return Error(owned.status());
      if (!auth::CanSee(caller, owned->user))
        return Error(NotVisible("custom job '" + m[3].str() + "'"));
      if (suffix.empty() && method == "GET") return GetJob(*id);
      if (suffix == ":cancel" && method == "POST") {
        if (!auth::CanChange(caller, owned->user)) {
          return Error(PermissionDenied("custom job " + std::to_string(*id) + " belongs to '" +
                                        owned->user + "'; only it or an admin may cancel it"));
        }
        return CancelJob(*id);
      }
      if (suffix == "/events" && method == "GET") return JobEvents(*id);
      if (suffix == "/logs" && method == "GET") return JobLogs(*id, req);
      return MethodNotAllowed(req);
    }
    if (path == "/v1/stoker/staging" && method == "POST") {
      // Streamed by StreamRoute; a body that reached here was collected.
      auto uri = d_.buckets->Stage(req.body);
      if (!uri.ok()) return Error(uri.status());
      return Json({{"uri", *uri}});
    }
    if (auto r = HandleBucketRoutes(d_, req)) return *r;
    if (std::regex_match(path, m, kUpload)) {
      std::string bucket = m[1];
      if (method == "POST" && QueryValue(req, "uploadType") == "resumable" &&
          !req.query.count("upload_id")) {
        return uploads_.Start(req, bucket, caller);
      }
      if (method == "DELETE" && req.query.count("upload_id")) return uploads_.Cancel(req, caller);
      if (method == "POST" && !req.query.count("upload_id")) {
        return UploadCollected(d_, req, bucket);  // without the stream router (tests)
      }
      return MethodNotAllowed(req);
    }
    return Error(NotFound("no route for " + method + " " + path));
  }

  http::Response MethodNotAllowed(const http::Request& req) {
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
  }

  http::Response SubmitJob(const std::string& project, const std::string& location,
                           const std::string& body, const auth::Principal& caller) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded())
      return Error(InvalidArgument("request body is not valid JSON (send a CustomJob)"));
    if (!j.is_object() || !j.contains("jobSpec")) {
      return Error(InvalidArgument(
          "request body: expected a CustomJob object with 'displayName' and 'jobSpec'"));
    }
    std::vector<std::string> forms;
    for (const std::string& w : spec::AcceptGcloudForms(j)) forms.push_back("warning: " + w);
    auto job = spec::ParseCustomJob(j);
    if (!job.ok()) return Error(job.status());
    store::NewJob record;
    record.project = project;
    record.location = location;
    record.user = caller.user;
    record.warnings = std::move(forms);
    auto rec = CreateCustomJob(d_, *job, record);
    if (!rec.ok()) return Error(rec.status());
    return Json(RenderJob(*rec));
  }

  // The filter (list_filter.h) is evaluated here, over pages of the store:
  // pages are read until pageSize jobs match or the store is exhausted, and
  // nextPageToken is the last id examined.
  http::Response ListJobs(const http::Request& req, const auth::Principal& caller) {
    auto opts = ParseListOptionsImpl(req, /*state_filter=*/false);
    if (!opts.ok()) return Error(opts.status());
    auto it = req.query.find("filter");
    auto filter = ParseFilter(it == req.query.end() ? std::string() : it->second);
    if (!filter.ok()) return Error(filter.status());
    const size_t want = static_cast<size_t>(opts->limit);
    store::ListOptions page = *opts;
    // Others' jobs are skipped like non-matching ones: read larger pages.
    if (!filter->MatchesAll() || caller.role == auth::Role::kUser) {
      page.limit = std::max(opts->limit, 500);
    }
    json out = {{"customJobs", json::array()}};
    size_t matched = 0;
    int64_t last_examined = 0;
    bool more = false;
    while (matched < want) {
      auto jobs = d_.store->ListJobs(page);
      if (!jobs.ok()) return Error(jobs.status());
      for (size_t i = 0; i < jobs->size() && matched < want; ++i) {
        const store::JobRecord& r = (*jobs)[i];
        last_examined = r.id;
        if (auth::CanSee(caller, r.user) && filter->Matches(Subject(r))) {
          out["customJobs"].push_back(RenderJob(r));
          ++matched;
          // Filled mid-page: what is left of this page is still to come.
          if (matched == want && i + 1 < jobs->size()) more = true;
        }
      }
      if (static_cast<int>(jobs->size()) < page.limit) break;  // store exhausted
      if (matched == want) {
        more = true;  // a full page: the store may hold more
        break;
      }
      page.after_id = jobs->back().id;
    }
    if (more) out["nextPageToken"] = std::to_string(last_examined);
    return Json(out);
  }

  static FilterSubject Subject(const store::JobRecord& r) {
    FilterSubject s;
    s.display_name = r.display_name;
    s.user = r.user;
    s.state = std::string(spec::JobStateName(r.state));
    s.create_time_us = r.create_time_us;
    if (auto l = r.spec.find("labels"); l != r.spec.end() && l->is_object()) {
      for (const auto& [k, v] : l->items())
        if (v.is_string()) s.labels[k] = v.get<std::string>();
    }
    return s;
  }

  http::Response GetJob(int64_t id) {
    auto rec = d_.store->GetJob(id);
    if (!rec.ok()) return Error(rec.status());
    json j = RenderJob(*rec);
    AddJobUsage(d_, *rec, j);
    return Json(j);
  }

  http::Response CancelJob(int64_t id) {
    Status s = d_.store->RequestCancel(id);
    if (!s.ok()) return Error(s);
    d_.control_plane->CancelRequested(id);
    return Json(json::object());
  }

  static std::vector<std::string> ReplicaNames(const store::JobRecord& r) {
    std::vector<std::string> names;
    if (r.allocation.is_object()) {
      for (const json& x : r.allocation["replicas"]) names.push_back(x["name"]);
    }
    return names;
  }

  http::Response JobEvents(int64_t id) {
    auto rec = d_.store->GetJob(id);
    if (!rec.ok()) return Error(rec.status());
    auto events = d_.store->Events(id);
    if (!events.ok()) return Error(events.status());
    json out = {{"events", json::array()},
                {"waitReason", rec->wait_reason},
                {"replicas", ReplicaNames(*rec)}};
    for (const store::Event& e : *events) {
      out["events"].push_back({{"time", FormatRfc3339(e.time_us)},
                               {"from", spec::JobStateName(e.from)},
                               {"to", spec::JobStateName(e.to)},
                               {"reason", e.reason}});
    }
    if (rec->allocation.is_object()) out["allocation"] = rec->allocation;
    return Json(out);
  }

  // The notice served instead of a log that the retention policy removed
  // (server/retention.h): the replica directory of an ended job is gone.
  std::optional<std::string> RemovedNotice(const store::JobRecord& rec,
                                           const std::string& replica) const {
    if (!spec::IsTerminal(rec.state) || d_.files->HasJobFiles(rec.id)) return std::nullopt;
    return "stoker: the logs of replica " + replica + " of job " + std::to_string(rec.id) +
           " were removed by the retention policy (stokerd config key 'retention', "
           "replica_dirs_days / max_finished_replica_dirs); the job's outputs in buckets are "
           "kept\n";
  }

  // A replica's log is one stream across its rotated files
  // (runner/log_rotation.h): offsets count from the replica's first byte,
  // the whole log is served oldest file first, and bytes that rotation
  // already deleted are replaced by a line that says so.
  http::Response JobLogs(int64_t id, const http::Request& req) {
    auto rec = d_.store->GetJob(id);
    if (!rec.ok()) return Error(rec.status());
    json out = {{"state", spec::JobStateName(rec->state)}};
    std::vector<std::string> names = ReplicaNames(*rec);
    auto it = req.query.find("replica");
    if (it == req.query.end()) {
      out["replicas"] = json::array();
      for (const std::string& n : names) {
        json r = {{"replica", n}, {"size", 0}};
        if (auto notice = RemovedNotice(*rec, n)) {
          r["size"] = notice->size();
          r["removed"] = *notice;
        } else if (auto stream = d_.files->ReadLog(id, rec->attempt, n,
                                                   std::numeric_limits<uint64_t>::max(), 0);
                   stream.ok()) {
          r["size"] = stream->size;
        }
        out["replicas"].push_back(std::move(r));
      }
      return Json(out);
    }
    if (std::find(names.begin(), names.end(), it->second) == names.end()) {
      return Error(NotFound("replica '" + it->second + "' of job " + std::to_string(id) +
                            " does not exist (yet); replicas: " + nlohmann::json(names).dump()));
    }
    uint64_t offset = 0;
    if (auto o = req.query.find("offset"); o != req.query.end()) {
      auto parsed = QueryCount("offset", o->second);
      if (!parsed.ok()) return Error(parsed.status());
      offset = static_cast<uint64_t>(*parsed);
    }
    out["replica"] = it->second;
    if (auto notice = RemovedNotice(*rec, it->second)) {
      std::string data = offset < notice->size() ? notice->substr(offset) : "";
      out["removed"] = *notice;
      out["nextOffset"] = offset + data.size();
      out["data"] = std::move(data);
      return Json(out);
    }
    auto stream = d_.files->ReadLog(id, rec->attempt, it->second, offset, kMaxLogChunk);
    if (!stream.ok()) return Error(stream.status());
    std::string data = std::move(stream->data);
    if (stream->skipped > 0) {
      data = "stoker: " + std::to_string(stream->skipped) +
             " bytes of older output were deleted by log rotation (stokerd config keys "
             "log_max_bytes, log_max_files)\n" +
             data;
    }
    // times=1: when the lines were written, as [index in data, Unix
    // microseconds] marks; a line's time is the latest mark at or before it.
    if (auto t = req.query.find("times");
        t != req.query.end() && t->second != "0" && t->second != "false" && !data.empty()) {
      size_t notice = data.size() - static_cast<size_t>(stream->next_offset - stream->offset);
      json times = json::array();
      for (const auto& m : stream->marks) {
        uint64_t at = m.offset > stream->offset ? m.offset - stream->offset : 0;
        times.push_back({notice + at, m.time_us});
      }
      out["times"] = std::move(times);
    }
    out["nextOffset"] = stream->next_offset;
    out["data"] = std::move(data);
    return Json(out);
  }

  ApiDeps d_;
  ResumableUploads uploads_;  // resumable upload sessions (resumable_uploads.h)
};

}  // namespace

int HttpStatusFor(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return 400;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
      return 409;
    case Code::kFailedPrecondition:
      return 400;
    case Code::kPermissionDenied:
      return 403;
    case Code::kResourceExhausted:
      return 429;
    case Code::kUnavailable:
      return 503;
    case Code::kDeadlineExceeded:
      return 504;
    case Code::kCancelled:
      return 499;
    case Code::kInternal:
      return 500;
  }
  return 500;
}

ApiHandlers MakeHandlers(ApiDeps deps) {
  auto api = std::make_shared<Api>(deps);
  metrics::DaemonMetrics* metrics = deps.daemon_metrics;
  ApiHandlers out;
  out.handler = [api, metrics](const http::Request& req) {
    http::Response r = api->Handle(req);
    if (metrics) metrics->Responded(r.status);
    if (r.status >= 500) spdlog::error("{} {} -> {}: {}", req.method, req.path, r.status, r.body);
    return r;
  };
  out.stream_router = [api](const http::Request& head) { return api->StreamRoute(head); };
  return out;
}

http::Handler MakeHandler(ApiDeps deps) { return MakeHandlers(std::move(deps)).handler; }

}  // namespace stoker::api
