// Route tests: the real handler, store, buckets and admission on a temp
// directory, with a fake control plane in place of the control loop. They
// check what a client sees (status, body) and what a route leaves behind
// (rows in the store, notifications to the control plane).
#include "api/api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "api/control_plane.h"
#include "tfevents/crc32c.h"

namespace stoker::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Records what the API told it; serves a queue the test sets.
class FakeControlPlane final : public ControlPlane {
 public:
  void Submitted(const store::JobRecord& job) override { submitted.push_back(job.id); }
  void SubmitFailed(int64_t job_id) override { failed.push_back(job_id); }
  void CancelRequested(int64_t job_id) override { cancelled.push_back(job_id); }
  void StudySubmitted(int64_t study_id) override { studies.push_back(study_id); }
  void StudyCancelRequested(int64_t study_id) override { studies_cancelled.push_back(study_id); }
  std::vector<QueueEntry> Queue() const override { return queue; }
  json Nodes() const override { return {{"nodes", json::array()}}; }
  void NoteJobEvent(int64_t job_id, const std::string& note) override {
    notes.push_back(std::to_string(job_id) + " " + note);
  }

  std::vector<std::string> notes;
  std::vector<int64_t> submitted, failed, cancelled, studies, studies_cancelled;
  std::vector<QueueEntry> queue;
};

constexpr char kJobs[] = "/v1/projects/p/locations/l/customJobs";

json ContainerJob(const std::string& command) {
  return {{"displayName", "j"},
          {"jobSpec",
           {{"workerPoolSpecs",
             {{{"machineSpec", {{"machineType", "e2-standard-4"}}},
               {"replicaCount", "1"},
               {"containerSpec",
                {{"imageUri", "local/sh"}, {"command", {"/bin/sh", "-c", command}}}}}}}}}};
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_ = std::move(store::Store::Open(dir_)).value();
    auth_ = std::move(auth::AuthStore::Open(dir_ / "stoker.db")).value();
    node_.name = "n";
    node_.cpus = 8;
    node_.memory_bytes = 32ull << 30;
    ASSERT_TRUE(buckets_.Create("data").ok());
    admission_ = std::make_unique<admission::Admission>(admission::AdmissionDeps{
        .buckets = &buckets_, .environments = &environments_, .node = &node_});
    handler_ = MakeHandler({store_.get(), &buckets_, admission_.get(), /*files=*/nullptr, &control_,
                            auth_.get(), "push-secret"});
    ASSERT_TRUE(auth_->AddUser({"ada", auth::Role::kUser, "", 0}).ok());
    ASSERT_TRUE(auth_->AddUser({"val", auth::Role::kViewer, "", 0}).ok());
    ada_ = auth_->IssueToken("ada")->token;
    val_ = auth_->IssueToken("val")->token;
  }
  void TearDown() override { fs::remove_all(dir_); }

  http::Response Call(const std::string& method, const std::string& path, const json& body,
                      const std::string& token) {
    http::Request r;
    r.method = method;
    r.path = path;
    r.target = path;
    if (!body.is_null()) r.body = body.dump();
    if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
    return handler_(r);
  }
  static json Body(const http::Response& r) { return json::parse(r.body); }
  size_t StoredJobs() { return store_->ListJobs({})->size(); }

  fs::path dir_ = fs::temp_directory_path() / ("api_test_" + std::to_string(getpid()));
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<auth::AuthStore> auth_;
  storage::Buckets buckets_{dir_, {}};
  exec::Environments environments_{
      {{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "config.yaml"};
  resources::Node node_;
  std::unique_ptr<admission::Admission> admission_;
  FakeControlPlane control_;
  http::Handler handler_;
  std::string ada_, val_;
};

TEST_F(ApiTest, TrainingMetricsAreTheOwnersAndABrokenFileIsNotedForTheControlLoop) {
  http::Response r = Call("POST", kJobs, ContainerJob("true"), ada_);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string name = Body(r)["name"];
  std::string id = name.substr(name.rfind('/') + 1);
  // The job has no baseOutputDirectory: its TensorBoard dir is gs://stoker-outputs/<id>/logs.
  fs::path logs = dir_ / "buckets" / "stoker-outputs" / id / "logs";
  fs::create_directories(logs);
  // One record: length 3 with its masked CRC-32C, then bytes whose data CRC is wrong.
  std::string length("\x03\0\0\0\0\0\0\0", 8);
  auto le32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  uint32_t crc = tfevents::Crc32c(length);
  std::ofstream(logs / "events.out.tfevents.bad")
      << length << le32(tfevents::MaskCrc(crc)) << "abc" << le32(0);
  const std::string path = std::string(kJobs) + "/" + id + "/trainingMetrics";

  http::Response got = Call("GET", path, nullptr, ada_);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Body(got)["series"], json::array());
  EXPECT_EQ(Body(got)["skipped"], json::parse(R"([{"file": "logs/events.out.tfevents.bad",
                             "reason": "record 1 (byte 0): data CRC mismatch"}])"));
  ASSERT_EQ(control_.notes.size(), 1u);
  EXPECT_EQ(control_.notes[0], id + " training metrics: skipped logs/events.out.tfevents.bad: "
                                    "record 1 (byte 0): data CRC mismatch");

  EXPECT_EQ(Call("GET", path, nullptr, val_).status, 200);  // viewers read everything
  ASSERT_TRUE(auth_->AddUser({"bob", auth::Role::kUser, "", 0}).ok());
  http::Response other = Call("GET", path, nullptr, auth_->IssueToken("bob")->token);
  EXPECT_EQ(other.status, 404) << other.body;  // as for a job that does not exist
  http::Request bad_points;
  bad_points.method = "GET";
  bad_points.path = path;
  bad_points.query["maxPoints"] = "1";
  bad_points.headers["authorization"] = "Bearer " + ada_;
  EXPECT_EQ(handler_(bad_points).status, 400);
  EXPECT_EQ(Call("POST", path, json::object(), ada_).status, 400);
}

TEST_F(ApiTest, ASubmittedJobIsStoredQueuedAndAnnounced) {
  http::Response r = Call("POST", kJobs, ContainerJob("ls gs://data"), ada_);
  ASSERT_EQ(r.status, 200) << r.body;
  json job = Body(r);
  EXPECT_EQ(job["state"], "JOB_STATE_QUEUED");
  EXPECT_EQ(job["stoker"]["user"], "ada");
  ASSERT_EQ(control_.submitted.size(), 1u);
  auto stored = store_->GetJob(control_.submitted[0]);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->display_name, "j");
}

TEST_F(ApiTest, ARefusedJobIsNeitherStoredNorAnnounced) {
  http::Response r = Call("POST", kJobs, ContainerJob("ls gs://missing/x"), ada_);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Body(r)["error"]["status"], "INVALID_ARGUMENT");
  EXPECT_NE(r.body.find("jobSpec.workerPoolSpecs[0].containerSpec.command[2]"), std::string::npos)
      << r.body;
  EXPECT_EQ(StoredJobs(), 0u);
  EXPECT_TRUE(control_.submitted.empty());
}

TEST_F(ApiTest, ACancelIsRecordedAndAnnouncedButAViewerMayNotCancel) {
  http::Response r = Call("POST", kJobs, ContainerJob("true"), ada_);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string name = Body(r)["name"];
  std::string id = name.substr(name.rfind('/') + 1);
  std::string path = std::string(kJobs) + "/" + id;

  EXPECT_EQ(Call("GET", path, nullptr, val_).status, 200);
  http::Response denied = Call("POST", path + ":cancel", nullptr, val_);
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_TRUE(control_.cancelled.empty());
  EXPECT_FALSE(store_->GetJob(std::stoll(id))->cancel_requested);

  EXPECT_EQ(Call("POST", path + ":cancel", nullptr, ada_).status, 200);
  EXPECT_EQ(control_.cancelled, std::vector<int64_t>{std::stoll(id)});
  EXPECT_TRUE(store_->GetJob(std::stoll(id))->cancel_requested);
}

TEST_F(ApiTest, EveryRouteButHealthNeedsAToken) {
  EXPECT_EQ(Call("GET", "/healthz", nullptr, "").status, 200);
  http::Response r = Call("GET", kJobs, nullptr, "");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Body(r)["error"]["status"], "UNAUTHENTICATED");
  EXPECT_EQ(Call("GET", kJobs, nullptr, "stk_not-a-token").status, 401);
}

TEST_F(ApiTest, TheQueueIsTheControlPlanesViewWithOthersNamesHidden) {
  ControlPlane::QueueEntry mine{.job_id = 7, .display_name = "mine", .user = "ada"};
  ControlPlane::QueueEntry theirs{.job_id = 8, .display_name = "secret", .user = "bob"};
  control_.queue = {mine, theirs};
  http::Response r = Call("GET", "/v1/stoker/queue", nullptr, ada_);
  ASSERT_EQ(r.status, 200) << r.body;
  json jobs = Body(r)["jobs"];
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0]["jobId"], "7");
  EXPECT_EQ(jobs[0]["displayName"], "mine");
  EXPECT_EQ(jobs[1]["position"], 2);
  EXPECT_FALSE(jobs[1].contains("displayName"));
}

TEST_F(ApiTest, ATuningJobIsAdmittedByItsTrialSpecBeforeItIsStored) {
  json study = {
      {"displayName", "s"},
      {"maxTrialCount", 2},
      {"studySpec",
       {{"metrics", {{{"metricId", "m"}, {"goal", "MAXIMIZE"}}}},
        {"parameters",
         {{{"parameterId", "x"}, {"doubleValueSpec", {{"minValue", 0}, {"maxValue", 1}}}}}}}},
      {"trialJobSpec", ContainerJob("ls gs://gone")["jobSpec"]}};
  const std::string path = "/v1/projects/p/locations/l/hyperparameterTuningJobs";
  http::Response refused = Call("POST", path, study, ada_);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("trialJobSpec.workerPoolSpecs[0]"), std::string::npos)
      << refused.body;
  EXPECT_TRUE(control_.studies.empty());

  study["trialJobSpec"] = ContainerJob("ls gs://data")["jobSpec"];
  http::Response ok = Call("POST", path, study, ada_);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(control_.studies.size(), 1u);
}

TEST_F(ApiTest, AnAiPlatformJobKeepsItsOwnWarningsBesideAdmissions) {
  json job = {{"jobId", "legacy_1"},
              {"trainingInput",
               {{"scaleTier", "BASIC"},
                {"masterConfig", {{"imageUri", "local/sh"}, {"containerCommand", {"true"}}}},
                {"region", "us-central1"},
                {"runtimeVersion", "2.11"}}}};
  http::Response r = Call("POST", "/v1/projects/p/jobs", job, ada_);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(control_.submitted.size(), 1u);
  std::string reasons;
  std::vector<store::Event> events = store_->Events(control_.submitted[0]).value();
  for (const store::Event& e : events) {
    reasons += e.reason + "\n";
  }
  EXPECT_NE(reasons.find("trainingInput.runtimeVersion"), std::string::npos) << reasons;
}

// Upload sessions (docs/security.md): only the user who started one, or an
// admin, may act on it; anyone else is told it does not exist.
TEST_F(ApiTest, AnUploadSessionIsCancelledOnlyByItsStarterOrAnAdmin) {
  ASSERT_TRUE(auth_->AddUser({"bob", auth::Role::kUser, "", 0}).ok());
  ASSERT_TRUE(auth_->AddUser({"root", auth::Role::kAdmin, "", 0}).ok());
  const std::string bob = auth_->IssueToken("bob")->token;
  const std::string root = auth_->IssueToken("root")->token;
  auto request = [&](const std::string& method, std::map<std::string, std::string> query,
                     const std::string& token) {
    http::Request r;
    r.method = method;
    r.path = "/upload/storage/v1/b/data/o";
    r.target = r.path;
    r.query = std::move(query);
    r.headers["authorization"] = "Bearer " + token;
    return handler_(r);
  };
  auto start = [&] {
    http::Response r = request("POST", {{"uploadType", "resumable"}, {"name", "x"}}, ada_);
    EXPECT_EQ(r.status, 200) << r.body;
    return Body(r)["uploadId"].get<std::string>();
  };
  const std::string id = start();
  http::Response theirs = request("DELETE", {{"upload_id", id}}, bob);
  EXPECT_EQ(theirs.status, 404) << theirs.body;
  // The same answer as for an id that names nothing.
  http::Response none = request("DELETE", {{"upload_id", std::string(32, '0')}}, bob);
  EXPECT_EQ(Body(theirs)["error"]["message"].get<std::string>().substr(0, 15),
            Body(none)["error"]["message"].get<std::string>().substr(0, 15));
  EXPECT_EQ(request("DELETE", {{"upload_id", id}}, val_).status, 403);  // viewers never write
  // Still there: its starter cancels it, once.
  EXPECT_EQ(request("DELETE", {{"upload_id", id}}, ada_).status, 499);
  EXPECT_EQ(request("DELETE", {{"upload_id", id}}, ada_).status, 404);
  // An admin may.
  EXPECT_EQ(request("DELETE", {{"upload_id", start()}}, root).status, 499);
}

// Cloud Storage JSON API input that cannot be served gets a 4xx naming
// the field and the fix (the official clients' happy paths are e2e:
// tests/e2e/test_node_clients.py).
TEST_F(ApiTest, StorageRefusesWhatItCannotKeepNamingTheField) {
  ASSERT_EQ(Call("POST", "/storage/v1/b", {{"name", "gcsapi"}}, ada_).status, 200);
  http::Response labels = Call("PATCH", "/storage/v1/b/gcsapi", {{"labels", {{"a", "b"}}}}, ada_);
  EXPECT_EQ(labels.status, 400) << labels.body;
  EXPECT_NE(labels.body.find("labels: bucket settings are not kept"), std::string::npos);
  http::Response empty = Call("PATCH", "/storage/v1/b/gcsapi", json::object(), ada_);
  EXPECT_EQ(empty.status, 200) << empty.body;
  EXPECT_EQ(Body(empty)["kind"], "storage#bucket");
  EXPECT_EQ(Call("POST", "/storage/v1/b", {{"name", "gcsapi"}}, ada_).status, 409);

  auto upload = [&](std::map<std::string, std::string> query, std::string content_type,
                    std::string body) {
    http::Request r;
    r.method = "POST";
    r.path = r.target = "/upload/storage/v1/b/gcsapi/o";
    r.query = std::move(query);
    r.headers["authorization"] = "Bearer " + ada_;
    r.headers["content-type"] = std::move(content_type);
    r.body = std::move(body);
    return handler_(r);
  };
  const std::string part = "--b\r\nContent-Type: application/json\r\n\r\n";
  http::Response ok = upload(
      {{"uploadType", "multipart"}}, "multipart/related; boundary=b",
      part + R"({"name":"m.txt","contentType":"text/plain"})" + "\r\n--b\r\n\r\nhello\r\n--b--");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Body(ok)["contentType"], "text/plain");
  EXPECT_EQ(Body(ok)["size"], "5");
  http::Response no_boundary = upload({{"uploadType", "multipart"}}, "multipart/related", "x");
  EXPECT_EQ(no_boundary.status, 400);
  EXPECT_NE(no_boundary.body.find("Content-Type"), std::string::npos) << no_boundary.body;
  http::Response no_name = upload({{"uploadType", "multipart"}}, "multipart/related; boundary=b",
                                  part + "{}\r\n--b\r\n\r\nhello\r\n--b--");
  EXPECT_EQ(no_name.status, 400);
  EXPECT_NE(no_name.body.find("name: the object name is required"), std::string::npos);
  http::Response bad_type =
      upload({{"uploadType", "multipart"}}, "multipart/related; boundary=b",
             part + R"({"name":"n","contentType":7})" + "\r\n--b\r\n\r\nx\r\n--b--");
  EXPECT_EQ(bad_type.status, 400);
  EXPECT_NE(bad_type.body.find("metadata part.contentType"), std::string::npos) << bad_type.body;
  http::Response cut = upload({{"uploadType", "multipart"}}, "multipart/related; boundary=b",
                              part + R"({"name":"cut"})" + "\r\n--b\r\n\r\nhal");
  EXPECT_EQ(cut.status, 400);
  EXPECT_NE(cut.body.find("closing boundary"), std::string::npos) << cut.body;
  EXPECT_EQ(Call("GET", "/storage/v1/b/gcsapi/o/cut", json(), ada_).status, 404);  // nothing kept

  http::Request list;
  list.method = "GET";
  list.path = list.target = "/storage/v1/b/gcsapi/o";
  list.query = {{"maxResults", "0"}};
  list.headers["authorization"] = "Bearer " + ada_;
  http::Response bad_page = handler_(list);
  EXPECT_EQ(bad_page.status, 400);
  EXPECT_NE(bad_page.body.find("maxResults: '0' is not a number from 1 to 1000"),
            std::string::npos);
  // A non-empty bucket is a conflict, as in Cloud Storage.
  EXPECT_EQ(Call("DELETE", "/storage/v1/b/gcsapi", json(), ada_).status, 409);
}

json WithPriority(json job, int priority) {
  job["jobSpec"]["scheduling"] = {{"priority", priority}};
  return job;
}

int StoredPriority(const store::JobRecord& r) {
  return r.spec["jobSpec"].value("scheduling", json::object()).value("priority", 0);
}

std::string Reasons(store::Store& store, int64_t job) {
  std::string reasons;
  std::vector<store::Event> events = store.Events(job).value();
  for (const store::Event& e : events) reasons += e.reason + "\n";
  return reasons;
}

TEST_F(ApiTest, APriorityAboveTheUsersCeilingIsStoredLoweredWithAWarningEvent) {
  ASSERT_EQ(Call("POST", kJobs, WithPriority(ContainerJob("true"), 1000), ada_).status, 200);
  ASSERT_EQ(control_.submitted.size(), 1u);
  auto lowered = store_->GetJob(control_.submitted[0]);
  EXPECT_EQ(StoredPriority(*lowered), 100);  // the user role's default ceiling
  EXPECT_NE(Reasons(*store_, lowered->id)
                .find("priority 1000 was lowered to 100, the highest user ada may set; an admin "
                      "can raise it with `stoker admin users set-max-priority ada N`"),
            std::string::npos)
      << Reasons(*store_, lowered->id);
  // At or below the ceiling: kept, no warning.
  ASSERT_EQ(Call("POST", kJobs, WithPriority(ContainerJob("true"), 100), ada_).status, 200);
  EXPECT_EQ(StoredPriority(*store_->GetJob(control_.submitted[1])), 100);
  EXPECT_EQ(Reasons(*store_, control_.submitted[1]).find("lowered"), std::string::npos);
  // An admin raised ada's ceiling.
  ASSERT_TRUE(auth_->SetMaxPriority("ada", 1000).ok());
  ASSERT_EQ(Call("POST", kJobs, WithPriority(ContainerJob("true"), 1000), ada_).status, 200);
  EXPECT_EQ(StoredPriority(*store_->GetJob(control_.submitted[2])), 1000);
}

TEST_F(ApiTest, ATuningJobsTrialsAndAnAiPlatformJobAreLoweredToo) {
  json study = {
      {"displayName", "s"},
      {"maxTrialCount", 1},
      {"studySpec",
       {{"metrics", {{{"metricId", "m"}, {"goal", "MAXIMIZE"}}}},
        {"parameters",
         {{{"parameterId", "x"}, {"doubleValueSpec", {{"minValue", 0}, {"maxValue", 1}}}}}}}},
      {"trialJobSpec", WithPriority(ContainerJob("true"), 900)["jobSpec"]}};
  ASSERT_EQ(Call("POST", "/v1/projects/p/locations/l/hyperparameterTuningJobs", study, ada_).status,
            200);
  ASSERT_EQ(control_.studies.size(), 1u);
  json stored = store_->GetStudy(control_.studies[0])->spec;
  EXPECT_EQ(stored["trialJobSpec"]["scheduling"]["priority"], 100) << stored.dump();

  json legacy = {{"jobId", "legacy_p"},
                 {"trainingInput",
                  {{"scaleTier", "BASIC"},
                   {"masterConfig", {{"imageUri", "local/sh"}, {"containerCommand", {"true"}}}},
                   {"region", "us-central1"},
                   {"scheduling", {{"priority", 1000}}}}}};
  http::Response r = Call("POST", "/v1/projects/p/jobs", legacy, ada_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto job = store_->GetJob(control_.submitted.back());
  EXPECT_EQ(StoredPriority(*job), 100);
  EXPECT_NE(Reasons(*store_, job->id).find("priority 1000 was lowered to 100"), std::string::npos);
}

TEST_F(ApiTest, AdminsSetAndClearAUsersCeiling) {
  ASSERT_TRUE(auth_->AddUser({"root", auth::Role::kAdmin, "", 0}).ok());
  const std::string root = auth_->IssueToken("root")->token;
  const std::string path = "/v1/admin/users/ada:setMaxPriority";
  http::Response set = Call("POST", path, {{"maxPriority", 400}}, root);
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Body(set)["maxPriority"], 400);
  EXPECT_EQ(Body(set)["maxPrioritySource"], "user");
  EXPECT_EQ(auth_->GetUser("ada")->max_priority, 400);
  http::Response bad = Call("POST", path, {{"maxPriority", 5000}}, root);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("maxPriority"), std::string::npos);
  EXPECT_EQ(Call("POST", path, {{"maxPriority", 1000}}, ada_).status, 403);  // not ada herself
  http::Response cleared = Call("POST", path, {{"maxPriority", nullptr}}, root);
  EXPECT_EQ(Body(cleared)["maxPriority"], 100);
  EXPECT_EQ(Body(cleared)["maxPrioritySource"], "role");
  EXPECT_EQ(Call("POST", "/v1/admin/users/ghost:setMaxPriority", {{"maxPriority", 1}}, root).status,
            404);
}

}  // namespace
}  // namespace stoker::api
