// Golden corpus of job inputs (tests/corpus/): every case runs through the
// real parser of its directory and must give the committed expectation.
//
//   tests/corpus/<kind>/NAME.input.yaml|json  or  NAME.flags
//   tests/corpus/<kind>/NAME.expected.json        canonical JSON (spec::ToJson)
//   tests/corpus/<kind>/NAME.expected_error.txt   substrings of the error, one a line
//
// <kind> picks the parser:
//   vertex/      ParseYamlOrJson -> ParseCustomJob (a bare spec gets the
//                displayName "corpus", as the CLI's --display-name) -> Validate
//   gcloud/      NAME.flags, one --worker-pool-spec value a line (an empty
//                line is an empty pool; '#' starts a comment line; lines
//                starting --args= / --command= / --python-package-uris= are
//                those flags, split by SplitGcloudList) -> ParseWorkerPoolSpecFlags
//                -> MergeGcloudFlags -> ParseCustomJob -> Validate
//   aiplatform/  ParseYamlOrJson -> FromLegacyJob (a document with jobId) or
//                FromTrainingInput("corpus_job", ...) -> ToJson of the CustomJob
//   study/       ParseYamlOrJson -> ParseHyperparameterTuningJob -> ToJson
//
// STOKER_CORPUS_REGENERATE=1 writes the expected files from what the parsers
// do now; read every one before committing it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_yaml.h"
#include "spec/ai_platform.h"
#include "spec/custom_job.h"
#include "spec/gcloud_flags.h"
#include "spec/study.h"

namespace stoker::spec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The cases are listed when the test binary starts, also by ctest's test
// discovery, which runs it without the tests' environment: so the source
// tree comes from the build (STOKER_CORPUS_DIR, an absolute path; __FILE__
// can be relative, e.g. under ccache's base_dir), and STOKER_SOURCE_DIR
// overrides it.
fs::path CorpusDir() {
  if (const char* src = std::getenv("STOKER_SOURCE_DIR"); src != nullptr && *src != '\0') {
    return fs::path(src) / "tests" / "corpus";
  }
  return STOKER_CORPUS_DIR;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// What a parser made of a case: the canonical JSON, or the error message.
struct Outcome {
  bool ok = false;
  json value;
  std::string error;
};

Outcome Fail(const Status& s) { return {false, nullptr, s.message()}; }

Outcome RunCustomJob(const json& input) {
  auto job = ParseCustomJob(input);
  if (!job.ok()) return Fail(job.status());
  if (job->display_name.empty()) job->display_name = "corpus";
  if (Status v = Validate(*job); !v.ok()) return Fail(v);
  return {true, ToJson(*job), ""};
}

Outcome RunVertex(const std::string& text) {
  auto j = ParseYamlOrJson(text, "input");
  if (!j.ok()) return Fail(j.status());
  return RunCustomJob(*j);
}

Outcome RunGcloud(const std::string& text) {
  std::vector<std::string> values;
  GcloudJobFlags flags;
  for (const std::string& line : Lines(text)) {
    if (!line.empty() && line[0] == '#') continue;
    if (line.rfind("--args=", 0) == 0) {
      flags.args = SplitGcloudList(line.substr(7));
    } else if (line.rfind("--command=", 0) == 0) {
      flags.command = SplitGcloudList(line.substr(10));
    } else if (line.rfind("--python-package-uris=", 0) == 0) {
      flags.python_package_uris = SplitGcloudList(line.substr(22));
    } else {
      values.push_back(line);
    }
  }
  auto pools = ParseWorkerPoolSpecFlags(values);
  if (!pools.ok()) return Fail(pools.status());
  flags.worker_pools = pools->pools;
  auto merged = MergeGcloudFlags(nullptr, flags);
  if (!merged.ok()) return Fail(merged.status());
  return RunCustomJob(*merged);
}

Outcome RunAiPlatform(const std::string& text) {
  auto j = ParseYamlOrJson(text, "input");
  if (!j.ok()) return Fail(j.status());
  // A Job resource (REST body, with jobId), a --config Job (trainingInput
  // without jobId; the job id comes from the command line) or a bare
  // trainingInput.
  Result<LegacyTraining> r = Status(InvalidArgument("unreached"));
  if (j->is_object() && j->contains("jobId")) {
    r = FromLegacyJob(*j);
  } else if (j->is_object() && j->contains("trainingInput")) {
    std::map<std::string, std::string> labels;
    if (j->contains("labels")) labels = (*j)["labels"].get<std::map<std::string, std::string>>();
    r = FromTrainingInput("corpus_job", (*j)["trainingInput"], "trainingInput", labels);
  } else {
    r = FromTrainingInput("corpus_job", *j);
  }
  if (!r.ok()) return Fail(r.status());
  return {true, ToJson(r->job), ""};
}

Outcome RunStudy(const std::string& text) {
  auto j = ParseYamlOrJson(text, "input");
  if (!j.ok()) return Fail(j.status());
  auto r = ParseHyperparameterTuningJob(*j);
  if (!r.ok()) return Fail(r.status());
  return {true, ToJson(*r), ""};
}

struct Case {
  std::string kind;  // vertex, gcloud, aiplatform, study
  std::string name;
  fs::path input;
  fs::path base;  // <dir>/<name>; expectations are base + ".expected..."
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  fs::path root = CorpusDir();
  if (!fs::is_directory(root)) return out;
  for (const char* kind : {"vertex", "gcloud", "aiplatform", "study"}) {
    fs::path dir = root / kind;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::string file = e.path().filename().string();
      for (const char* suffix : {".input.yaml", ".input.json", ".flags"}) {
        std::string s(suffix);
        if (file.size() > s.size() && file.compare(file.size() - s.size(), s.size(), s) == 0) {
          std::string name = file.substr(0, file.size() - s.size());
          out.push_back({kind, name, e.path(), dir / name});
        }
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Case& a, const Case& b) { return a.kind + a.name < b.kind + b.name; });
  return out;
}

Outcome RunCase(const Case& c) {
  std::string text = ReadFile(c.input);
  if (c.kind == "vertex") return RunVertex(text);
  if (c.kind == "gcloud") return RunGcloud(text);
  if (c.kind == "aiplatform") return RunAiPlatform(text);
  return RunStudy(text);
}

class CorpusTest : public ::testing::TestWithParam<Case> {};

TEST_P(CorpusTest, MatchesExpectation) {
  const Case& c = GetParam();
  Outcome got = RunCase(c);
  fs::path expected_json = c.base.string() + ".expected.json";
  fs::path expected_error = c.base.string() + ".expected_error.txt";

  if (const char* regen = std::getenv("STOKER_CORPUS_REGENERATE"); regen && *regen == '1') {
    fs::remove(expected_json);
    fs::remove(expected_error);
    std::ofstream out(got.ok ? expected_json : expected_error, std::ios::binary);
    out << (got.ok ? got.value.dump(2) : got.error) << "\n";
    GTEST_SKIP() << "regenerated";
  }

  bool has_json = fs::exists(expected_json), has_error = fs::exists(expected_error);
  ASSERT_NE(has_json, has_error) << c.name << ": needs exactly one of " << expected_json << " / "
                                 << expected_error;
  if (has_json) {
    ASSERT_TRUE(got.ok) << "expected success, got: " << got.error;
    json want = json::parse(ReadFile(expected_json));
    EXPECT_EQ(got.value, want) << "got:\n" << got.value.dump(2) << "\nwant:\n" << want.dump(2);
    return;
  }
  ASSERT_FALSE(got.ok) << "expected an error, got:\n" << got.value.dump(2);
  for (const std::string& want : Lines(ReadFile(expected_error))) {
    if (want.empty()) continue;
    EXPECT_NE(got.error.find(want), std::string::npos) << "error lacks '" << want << "':\n"
                                                       << got.error;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.kind + "_" + info.param.name;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(CorpusTest, FindsTheCorpus) { EXPECT_GE(Cases().size(), 30u) << CorpusDir(); }

// Hostile sizes, generated here rather than committed: each must be refused
// with a clear message, in well under a second.
template <typename F>
double Seconds(F&& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(CorpusTest, TenMegabyteJobFileIsRefusedFast) {
  // A CustomJob whose one container argument is 10 MB long.
  std::string big(10 * 1024 * 1024, 'a');
  std::string text = R"({"displayName": "big", "jobSpec": {"workerPoolSpecs": [{"machineSpec": )"
                     R"({"machineType": "n1-standard-4"}, "replicaCount": 1, "containerSpec": )"
                     R"({"imageUri": "gcr.io/p/t", "args": [")" +
                     big + R"("]}}]}})";
  Outcome got;
  double s = Seconds([&] { got = RunVertex(text); });
  EXPECT_LT(s, 1.0);
  ASSERT_FALSE(got.ok) << "a 10 MB job file was accepted";
  EXPECT_FALSE(got.error.empty());
}

TEST(CorpusTest, DeeplyNestedJobFileIsRefusedFast) {
  // 10 000 nested arrays in the args of a CustomJob.
  std::string nest = std::string(10000, '[') + std::string(10000, ']');
  std::string text = R"({"displayName": "deep", "jobSpec": {"workerPoolSpecs": [{"machineSpec": )"
                     R"({"machineType": "n1-standard-4"}, "containerSpec": )"
                     R"({"imageUri": "gcr.io/p/t", "args": )" +
                     nest + "}}]}}";
  Outcome got;
  double s = Seconds([&] { got = RunVertex(text); });
  EXPECT_LT(s, 1.0);
  ASSERT_FALSE(got.ok);
  EXPECT_FALSE(got.error.empty());
  RecordProperty("error", got.error.substr(0, 200));
}

}  // namespace
}  // namespace stoker::spec
