#include "cli/output_format.h"

#include <gtest/gtest.h>

namespace stoker::cli {
namespace {

using nlohmann::json;

// A CustomJob as `GET .../customJobs/ID` returns it.
json Job(const std::string& id, const std::string& display, const std::string& state,
         const std::string& created, const std::string& team = "") {
  json j = json::parse(R"({
    "name": "projects/local/locations/local/customJobs/)" +
                       id + R"(",
    "displayName": ")" +
                       display + R"(",
    "jobSpec": {
      "workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                         "acceleratorCount": 1},
         "replicaCount": "1",
         "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest",
                               "packageUris": ["gs://b/trainer-0.1.tar.gz"],
                               "pythonModule": "trainer.task",
                               "args": ["--epochs=10", "--lr=0.01"]}},
        {"machineSpec": {"machineType": "n1-highmem-8"}, "replicaCount": "2",
         "containerSpec": {"imageUri": "gcr.io/p/worker:1"}}
      ],
      "baseOutputDirectory": {"outputUriPrefix": "gs://b/out"}
    },
    "state": ")" + state +
                       R"(",
    "createTime": ")" + created +
                       R"("
  })");
  if (!team.empty()) j["labels"] = {{"team", team}, {"env", "dev"}};
  return j;
}

std::vector<json> Jobs() {
  return {Job("101", "train-resnet", "JOB_STATE_SUCCEEDED", "2024-05-18T10:00:00Z", "ml"),
          Job("102", "eval-bert", "JOB_STATE_FAILED", "2024-05-19T09:30:00.5Z", "nlp"),
          Job("103", "train-bert", "JOB_STATE_RUNNING", "2024-05-17T08:00:00Z"),
          Job("104", "my-job-2", "JOB_STATE_SUCCEEDED", "2024-05-20T00:00:00Z", "ml")};
}

OutputFormat Fmt(const std::string& text) {
  auto f = ParseFormat(text);
  EXPECT_TRUE(f.ok()) << text << ": " << f.status().ToString();
  return f.ok() ? *f : OutputFormat{};
}

std::string Error(const Status& s) { return s.ok() ? "ok" : s.message(); }

std::vector<std::string> Ids(const std::vector<json>& items) {
  std::vector<std::string> out;
  for (const json& j : items) {
    std::string n = j["name"];
    out.push_back(n.substr(n.rfind('/') + 1));
  }
  return out;
}

std::vector<std::string> Filtered(const std::string& filter) {
  ListFlags f;
  f.filter = filter;
  auto r = ApplyListFlags(Jobs(), f);
  EXPECT_TRUE(r.ok()) << filter << ": " << r.status().ToString();
  return r.ok() ? Ids(*r) : std::vector<std::string>{"error"};
}

std::string FilterError(const std::string& filter) {
  auto r = ParseResourceFilter(filter);
  return r.ok() ? "ok" : r.status().message();
}

// ------------------------------------------------------------ keys

TEST(OutputFormatTest, LooksUpDottedPathsWithListIndexes) {
  json j = Jobs()[0];
  EXPECT_EQ(LookupKey(j, "jobSpec.workerPoolSpecs[0].machineSpec.machineType"),
            json("n1-standard-4"));
  EXPECT_EQ(LookupKey(j, "jobSpec.workerPoolSpecs[-1].replicaCount"), json("2"));
  EXPECT_EQ(LookupKey(j, "jobSpec.workerPoolSpecs[].machineSpec.machineType"),
            json({"n1-standard-4", "n1-highmem-8"}));
  EXPECT_EQ(LookupKey(j, "jobSpec.workerPoolSpecs[5]"), std::nullopt);
  EXPECT_EQ(LookupKey(j, "nope.deeper"), std::nullopt);
  EXPECT_EQ(LookupKey(j, "a..b"), std::nullopt);
}

TEST(OutputFormatTest, SnakeCaseAndCamelCaseKeysAreTheSameName) {
  json j = Jobs()[0];
  EXPECT_EQ(LookupKey(j, "create_time"), json("2024-05-18T10:00:00Z"));
  EXPECT_EQ(LookupKey(j, "display_name"), json("train-resnet"));
  EXPECT_EQ(LookupKey(j, "job_spec.worker_pool_specs[0].machine_spec.machine_type"),
            json("n1-standard-4"));
  json snake = {{"create_time", "x"}};
  EXPECT_EQ(LookupKey(snake, "createTime"), json("x"));
}

// ------------------------------------------------------------ --format parsing

TEST(OutputFormatTest, ParsesTheNamedFormats) {
  EXPECT_EQ(Fmt("json").kind, FormatKind::kJson);
  EXPECT_EQ(Fmt("yaml").kind, FormatKind::kYaml);
  EXPECT_EQ(Fmt("text").kind, FormatKind::kText);
  EXPECT_EQ(Fmt("").kind, FormatKind::kText);
  EXPECT_EQ(Fmt("default").kind, FormatKind::kText);
  EXPECT_EQ(Fmt("list").kind, FormatKind::kList);
  EXPECT_EQ(Fmt("none").kind, FormatKind::kNone);
  EXPECT_EQ(Fmt(" json ").kind, FormatKind::kJson);
}

TEST(OutputFormatTest, ParsesAGcloudTableProjection) {
  OutputFormat f =
      Fmt("table(name.basename():label=ID,displayName,state,createTime.date('%Y-%m-%d'))");
  EXPECT_EQ(f.kind, FormatKind::kTable);
  ASSERT_EQ(f.columns.size(), 4u);
  EXPECT_EQ(f.columns[0].key, "name");
  ASSERT_EQ(f.columns[0].transforms.size(), 1u);
  EXPECT_EQ(f.columns[0].transforms[0].name, "basename");
  EXPECT_EQ(f.columns[0].label, "ID");
  EXPECT_EQ(f.columns[1].key, "displayName");
  EXPECT_EQ(f.columns[3].transforms[0].args, std::vector<std::string>{"%Y-%m-%d"});
}

TEST(OutputFormatTest, ParsesAttributes) {
  OutputFormat f = Fmt("table[box,no-heading,title='Jobs'](name)");
  EXPECT_TRUE(f.box);
  EXPECT_FALSE(f.heading);
  EXPECT_EQ(f.title, "Jobs");
  EXPECT_EQ(Fmt("value[separator=','](name,state)").separator, ",");
  EXPECT_EQ(Fmt("value(name)").separator, "\t");
  EXPECT_EQ(Fmt("csv(name)").separator, ",");
  EXPECT_EQ(Fmt("value[separator='\\n'](name)").separator, "\n");
  EXPECT_EQ(Fmt("csv[no-heading,unknown-attr=3](name)").heading, false);  // unknown: ignored
}

TEST(OutputFormatTest, RefusesAnUnknownFormatNamingTheFlagAndTheFix) {
  auto r = ParseFormat("jsn");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "--format: unknown format 'jsn'; use json, yaml, value(...), table(...), csv(...) or "
            "text (did you mean json?)");
  EXPECT_EQ(
      Error(ParseFormat("tabel(name)").status()).find("did you mean table?") != std::string::npos,
      true);
}

TEST(OutputFormatTest, RefusesBadProjections) {
  EXPECT_EQ(Error(ParseFormat("value").status()),
            "--format: value needs the keys to print, e.g. value(name,displayName,state)");
  EXPECT_EQ(Error(ParseFormat("table(name").status()),
            "--format: at 6: '(' is not closed; add ')' after the keys");
  EXPECT_EQ(Error(ParseFormat("value(name.basenam())").status()),
            "--format: at 7: unknown transform 'basenam()' (did you mean basename()?); use "
            "basename(), date(), len(), yesno(), lower(), upper(), join(), list(), segment() or "
            "firstof()");
  EXPECT_EQ(Error(ParseFormat("value(a..b)").status()),
            "--format: at 7: 'a..b' is not a resource key; write a dotted path such as "
            "jobSpec.workerPoolSpecs[0].machineSpec.machineType");
  EXPECT_EQ(Error(ParseFormat("json extra").status()),
            "--format: at 6: unexpected 'extra' after the format; write NAME[ATTRIBUTES](KEYS)");
  EXPECT_EQ(Error(ParseFormat("table[box(name)").status()).rfind("--format: at ", 0), 0u);
  EXPECT_EQ(Error(ParseFormat("text(name)").status()),
            "--format: text takes no keys; use value(...), table(...) or csv(...) to pick keys");
  EXPECT_EQ(Error(ParseFormat("value(name.date('%Y)").status()),
            "--format: at 17: unterminated string; add the closing '");
}

// ------------------------------------------------------------ printing

TEST(OutputFormatTest, ValuePrintsOneTabSeparatedLineAResource) {
  EXPECT_EQ(FormatList(Jobs(), Fmt("value(name)")),
            "projects/local/locations/local/customJobs/101\n"
            "projects/local/locations/local/customJobs/102\n"
            "projects/local/locations/local/customJobs/103\n"
            "projects/local/locations/local/customJobs/104\n");
  EXPECT_EQ(FormatResource(Jobs()[0], Fmt("value(name.basename(),state,labels.team)")),
            "101\tJOB_STATE_SUCCEEDED\tml\n");
  EXPECT_EQ(FormatResource(Jobs()[2], Fmt("value(name.basename(),labels.team,state)")),
            "103\t\tJOB_STATE_RUNNING\n");
}

TEST(OutputFormatTest, ValueJoinsListsWithSemicolonsAndHonoursTheSeparator) {
  EXPECT_EQ(
      FormatResource(Jobs()[0], Fmt("value(jobSpec.workerPoolSpecs[0].pythonPackageSpec.args)")),
      "--epochs=10;--lr=0.01\n");
  EXPECT_EQ(FormatResource(Jobs()[0], Fmt("value[separator=','](displayName,"
                                          "jobSpec.workerPoolSpecs[].machineSpec.machineType)")),
            "train-resnet,n1-standard-4;n1-highmem-8\n");
  EXPECT_EQ(FormatResource(Jobs()[0], Fmt("value(labels)")), "env=dev;team=ml\n");
  EXPECT_EQ(FormatResource(json{{"ok", true}, {"n", 3}, {"x", 0.5}}, Fmt("value(ok,n,x,missing)")),
            "True\t3\t0.5\t\n");
}

TEST(OutputFormatTest, ValueWithTheKeysOfAHyperparameterTuningJob) {
  json study = json::parse(R"({
    "name": "projects/local/locations/local/hyperparameterTuningJobs/7",
    "displayName": "lr-sweep", "state": "JOB_STATE_RUNNING",
    "maxTrialCount": 8, "parallelTrialCount": 2,
    "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                  "parameters": [{"parameterId": "lr",
                                  "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
                                  "scaleType": "UNIT_LOG_SCALE"}]},
    "trials": [{"id": "1", "state": "SUCCEEDED",
                "finalMeasurement": {"metrics": [{"metricId": "accuracy", "value": 0.91}]}},
               {"id": "2", "state": "ACTIVE"}]
  })");
  EXPECT_EQ(FormatResource(study, Fmt("value(displayName,studySpec.metrics[0].metricId,"
                                      "trials.len(),trials[].state,"
                                      "trials[0].finalMeasurement.metrics[0].value)")),
            "lr-sweep\taccuracy\t2\tSUCCEEDED;ACTIVE\t0.91\n");
  EXPECT_EQ(FormatResource(study, Fmt("table(name.basename():label=ID,maxTrialCount,"
                                      "study_spec.parameters[0].parameter_id:label=PARAM)")),
            "ID  MAX_TRIAL_COUNT  PARAM\n"
            "7   8                lr\n");
}

TEST(OutputFormatTest, TableAlignsColumnsUnderUpperCaseHeadings) {
  EXPECT_EQ(FormatList(Jobs(), Fmt("table(name.basename():label=ID,displayName,state,"
                                   "createTime.date())")),
            "ID   DISPLAY_NAME  STATE                CREATE_TIME\n"
            "101  train-resnet  JOB_STATE_SUCCEEDED  2024-05-18T10:00:00\n"
            "102  eval-bert     JOB_STATE_FAILED     2024-05-19T09:30:00\n"
            "103  train-bert    JOB_STATE_RUNNING    2024-05-17T08:00:00\n"
            "104  my-job-2      JOB_STATE_SUCCEEDED  2024-05-20T00:00:00\n");
}

TEST(OutputFormatTest, TableLeavesMissingValuesEmptyAndDisambiguatesHeadings) {
  std::vector<json> items = {Jobs()[2], Jobs()[0]};
  EXPECT_EQ(FormatList(items, Fmt("table(labels.team,displayName)")),
            "TEAM  DISPLAY_NAME\n"
            "      train-bert\n"
            "ml    train-resnet\n");
  json person = {{"first", {{"name", "Ada"}}}, {"last", {{"name", "Lovelace"}}}};
  EXPECT_EQ(FormatResource(person, Fmt("table(first.name,last.name)")),
            "NAME  LAST_NAME\n"
            "Ada   Lovelace\n");
}

TEST(OutputFormatTest, TableAttributes) {
  std::vector<json> items = {Jobs()[0], Jobs()[1]};
  EXPECT_EQ(FormatList(items, Fmt("table[no-heading](displayName,state)")),
            "train-resnet  JOB_STATE_SUCCEEDED\n"
            "eval-bert     JOB_STATE_FAILED\n");
  EXPECT_EQ(FormatList(items, Fmt("table[box](displayName,state)")),
            "┌──────────────┬─────────────────────┐\n"
            "│ DISPLAY_NAME │ STATE               │\n"
            "├──────────────┼─────────────────────┤\n"
            "│ train-resnet │ JOB_STATE_SUCCEEDED │\n"
            "│ eval-bert    │ JOB_STATE_FAILED    │\n"
            "└──────────────┴─────────────────────┘\n");
  EXPECT_EQ(FormatList({}, Fmt("table(name)")), "");
}

TEST(OutputFormatTest, TableSortAttributeOrdersRows) {
  EXPECT_EQ(FormatList(Jobs(), Fmt("table(name.basename():label=ID,createTime:sort=1:reverse)")),
            "ID   CREATE_TIME\n"
            "104  2024-05-20T00:00:00Z\n"
            "102  2024-05-19T09:30:00.5Z\n"
            "101  2024-05-18T10:00:00Z\n"
            "103  2024-05-17T08:00:00Z\n");
}

TEST(OutputFormatTest, CsvQuotesAsRfc4180AndHeadsWithTheKeys) {
  std::vector<json> items = {
      {{"name", "a"}, {"displayName", "plain"}},
      {{"name", "b"}, {"displayName", "has,comma"}},
      {{"name", "c"}, {"displayName", "say \"hi\""}},
      {{"name", "d"}, {"displayName", "two\nlines"}},
  };
  EXPECT_EQ(FormatList(items, Fmt("csv(name,displayName:label=title)")),
            "name,title\n"
            "a,plain\n"
            "b,\"has,comma\"\n"
            "c,\"say \"\"hi\"\"\"\n"
            "d,\"two\nlines\"\n");
  EXPECT_EQ(FormatList({items[0]}, Fmt("csv[no-heading](name,displayName)")), "a,plain\n");
  EXPECT_EQ(
      FormatList({Jobs()[0]}, Fmt("csv(name.basename(),jobSpec.workerPoolSpecs[0].machineSpec."
                                  "machineType,state)")),
      "name,jobSpec.workerPoolSpecs[0].machineSpec.machineType,state\n"
      "101,n1-standard-4,JOB_STATE_SUCCEEDED\n");
}

TEST(OutputFormatTest, JsonIndentsByTwoAndListsAreOneArray) {
  json j = {{"name", "x"}, {"n", 1}};
  EXPECT_EQ(FormatResource(j, Fmt("json")), "{\n  \"n\": 1,\n  \"name\": \"x\"\n}\n");
  EXPECT_EQ(FormatList({j}, Fmt("json")), "[\n  {\n    \"n\": 1,\n    \"name\": \"x\"\n  }\n]\n");
  EXPECT_EQ(FormatList({}, Fmt("json")), "[]\n");
  EXPECT_EQ(FormatResource(Jobs()[0], Fmt("json(displayName,jobSpec.baseOutputDirectory)")),
            "{\n  \"displayName\": \"train-resnet\",\n  \"jobSpec\": {\n"
            "    \"baseOutputDirectory\": {\n      \"outputUriPrefix\": \"gs://b/out\"\n    }\n"
            "  }\n}\n");
  EXPECT_EQ(json::parse(FormatResource(Jobs()[1], Fmt("json"))), Jobs()[1]);
}

TEST(OutputFormatTest, YamlIsBlockStyleLikeGcloud) {
  json j = Jobs()[0];
  j["jobSpec"]["workerPoolSpecs"].erase(1);
  EXPECT_EQ(FormatResource(j, Fmt("yaml")),
            "createTime: '2024-05-18T10:00:00Z'\n"
            "displayName: train-resnet\n"
            "jobSpec:\n"
            "  baseOutputDirectory:\n"
            "    outputUriPrefix: gs://b/out\n"
            "  workerPoolSpecs:\n"
            "  - machineSpec:\n"
            "      acceleratorCount: 1\n"
            "      acceleratorType: NVIDIA_TESLA_T4\n"
            "      machineType: n1-standard-4\n"
            "    pythonPackageSpec:\n"
            "      args:\n"
            "      - --epochs=10\n"
            "      - --lr=0.01\n"
            "      executorImageUri: us-docker.pkg.dev/vertex-ai/training/"
            "pytorch-cpu.2-1.py310:latest\n"
            "      packageUris:\n"
            "      - gs://b/trainer-0.1.tar.gz\n"
            "      pythonModule: trainer.task\n"
            "    replicaCount: '1'\n"
            "labels:\n"
            "  env: dev\n"
            "  team: ml\n"
            "name: projects/local/locations/local/customJobs/101\n"
            "state: JOB_STATE_SUCCEEDED\n");
}

TEST(OutputFormatTest, YamlQuotesWhatWouldReadBackAsAnotherType) {
  json j = {{"a", "true"},        {"b", "123"},          {"c", ""},
            {"d", "x: y"},        {"e", "it's"},         {"f", "*"},
            {"g", 1.5},           {"h", nullptr},        {"i", false},
            {"j", json::array()}, {"k", json::object()}, {"l", "tab\there"},
            {"m", "bell\x07"},    {"n", "1e9"}};
  EXPECT_EQ(FormatResource(j, Fmt("yaml")),
            "a: 'true'\n"
            "b: '123'\n"
            "c: ''\n"
            "d: 'x: y'\n"
            "e: it's\n"
            "f: '*'\n"
            "g: 1.5\n"
            "h: null\n"
            "i: false\n"
            "j: []\n"
            "k: {}\n"
            "l: tab\there\n"
            "m: \"bell\\u0007\"\n"
            "n: '1e9'\n");
}

TEST(OutputFormatTest, YamlPrintsMultiLineStringsAsBlockScalars) {
  json j = {{"error", {{"message", "Traceback:\n  File x\nValueError: bad"}}},
            {"log", "one\ntwo\n"},
            {"list", {"a\nb"}}};
  EXPECT_EQ(FormatResource(j, Fmt("yaml")),
            "error:\n"
            "  message: |-\n"
            "    Traceback:\n"
            "      File x\n"
            "    ValueError: bad\n"
            "list:\n"
            "- |-\n"
            "  a\n"
            "  b\n"
            "log: |\n"
            "  one\n"
            "  two\n");
  EXPECT_EQ(FormatResource(json{{"s", "  indented\nnext"}}, Fmt("yaml")),
            "s: |2-\n"
            "    indented\n"
            "  next\n");
}

TEST(OutputFormatTest, YamlListsAreAStreamOfDocuments) {
  std::vector<json> items = {{{"name", "a"}}, {{"name", "b"}}};
  EXPECT_EQ(FormatList(items, Fmt("yaml")), "---\nname: a\n---\nname: b\n");
  EXPECT_EQ(FormatList(items, Fmt("yaml(name)")), "---\nname: a\n---\nname: b\n");
  EXPECT_EQ(FormatList({json::array({json::array({1, 2}), json::object()})}, Fmt("yaml")),
            "---\n- - 1\n  - 2\n- {}\n");
}

TEST(OutputFormatTest, ListFlattenedAndNone) {
  std::vector<json> items = {{{"name", "a"}, {"n", 1}}};
  EXPECT_EQ(FormatList(items, Fmt("list")), " - n=1, name=a\n");
  EXPECT_EQ(FormatList(items, Fmt("list(name)")), " - a\n");
  EXPECT_EQ(FormatResource(json{{"name", "a"}, {"spec", {{"pools", {1, 2}}}}}, Fmt("flattened")),
            "name:          a\n"
            "spec.pools[0]: 1\n"
            "spec.pools[1]: 2\n");
  EXPECT_EQ(FormatList(items, Fmt("none")), "");
}

TEST(OutputFormatTest, Transforms) {
  json j = {{"name", "projects/p/locations/l/customJobs/42"},
            {"createTime", "2024-05-18T10:11:12.345678Z"},
            {"tags", {"a", "b"}},
            {"empty", ""},
            {"on", true},
            {"Word", "MiXed"}};
  auto v = [&](const std::string& key) { return FormatResource(j, Fmt("value(" + key + ")")); };
  EXPECT_EQ(v("name.basename()"), "42\n");
  EXPECT_EQ(v("name.segment(1)"), "p\n");
  EXPECT_EQ(v("createTime.date()"), "2024-05-18T10:11:12\n");
  EXPECT_EQ(v("createTime.date('%Y-%m-%d %H:%M')"), "2024-05-18 10:11\n");
  EXPECT_EQ(v("createTime.date(format='%H:%M:%S.%f')"), "10:11:12.345678\n");
  EXPECT_EQ(v("tags.len()"), "2\n");
  EXPECT_EQ(v("missing.len()"), "0\n");
  EXPECT_EQ(v("on.yesno()"), "True\n");
  EXPECT_EQ(v("on.yesno(yes=Yes)"), "Yes\n");
  EXPECT_EQ(v("empty.yesno()"), "No\n");
  EXPECT_EQ(v("missing.yesno(no='-')"), "-\n");
  EXPECT_EQ(v("tags.join(',')"), "a,b\n");
  EXPECT_EQ(v("tags.list()"), "a,b\n");
  EXPECT_EQ(v("Word.lower()"), "mixed\n");
  EXPECT_EQ(v("Word.upper()"), "MIXED\n");
  EXPECT_EQ(v("missing.basename(undefined='none')"), "none\n");
  EXPECT_EQ(v("firstof(nothing,empty,Word)"), "MiXed\n");
  EXPECT_EQ(v("createTime.date().lower()"), "2024-05-18t10:11:12\n");
}

// ------------------------------------------------------------ --filter

TEST(OutputFormatTest, FilterOnEqualityAndLabels) {
  EXPECT_EQ(Filtered("state=JOB_STATE_SUCCEEDED"), (std::vector<std::string>{"101", "104"}));
  EXPECT_EQ(Filtered("labels.team=ml"), (std::vector<std::string>{"101", "104"}));
  EXPECT_EQ(Filtered("state!=JOB_STATE_SUCCEEDED"), (std::vector<std::string>{"102", "103"}));
  EXPECT_EQ(Filtered("labels.team!=ml"), (std::vector<std::string>{"102", "103"}));
  EXPECT_EQ(Filtered("labels.team:*"), (std::vector<std::string>{"101", "102", "104"}));
  EXPECT_EQ(Filtered("-labels.team:*"), (std::vector<std::string>{"103"}));
  EXPECT_EQ(Filtered("labels:team"), (std::vector<std::string>{"101", "102", "104"}));
  EXPECT_EQ(Filtered(""), (std::vector<std::string>{"101", "102", "103", "104"}));
}

TEST(OutputFormatTest, FilterGcloudDocsExamples) {
  EXPECT_EQ(Filtered("state=JOB_STATE_SUCCEEDED AND displayName:train*"),
            (std::vector<std::string>{"101"}));
  EXPECT_EQ(Filtered("display_name:my-job*"), (std::vector<std::string>{"104"}));
  EXPECT_EQ(Filtered("(state=JOB_STATE_SUCCEEDED AND -labels.team:ml) OR displayName:bert"),
            (std::vector<std::string>{"102", "103"}));
  EXPECT_EQ(Filtered("state=(JOB_STATE_FAILED,JOB_STATE_RUNNING)"),
            (std::vector<std::string>{"102", "103"}));
  EXPECT_EQ(Filtered("displayName:(eval resnet)"), (std::vector<std::string>{"101", "102"}));
  EXPECT_EQ(Filtered("createTime>=2024-05-19"), (std::vector<std::string>{"102", "104"}));
  EXPECT_EQ(Filtered("createTime<\"2024-05-18T10:00:00Z\""), (std::vector<std::string>{"103"}));
  EXPECT_EQ(Filtered("createTime<=2024-05-18T10:00:00Z"), (std::vector<std::string>{"101", "103"}));
  EXPECT_EQ(Filtered("createTime>2024-05-19T09:30:00Z"),
            (std::vector<std::string>{"102", "104"}));  // .5s after; times, not text
}

TEST(OutputFormatTest, FilterHasMatchesWordsWithoutCase) {
  // gcloud's table: abc* ~ abcpdqxyz yes; abc ~ abcpdqxyz no; pdq ~ abc.pdq.xyz yes.
  auto has = [](const std::string& value, const std::string& pattern) {
    auto f = ParseResourceFilter("v:" + pattern);
    EXPECT_TRUE(f.ok()) << pattern;
    return f->Matches(json{{"v", value}});
  };
  EXPECT_TRUE(has("abcpdqxyz", "abc*"));
  EXPECT_FALSE(has("abcpdqxyz", "abc"));
  EXPECT_FALSE(has("abcpdqxyz", "pdq*"));
  EXPECT_TRUE(has("abcpdqxyz", "*"));
  EXPECT_FALSE(has("", "*"));
  EXPECT_TRUE(has("abc.pdq.xyz", "abc"));
  EXPECT_TRUE(has("abc.pdq.xyz", "abc.pdq"));
  EXPECT_TRUE(has("abc.pdq.xyz", "pdq*"));
  EXPECT_TRUE(has("abc.pdq.xyz", "pdq.xyz"));
  EXPECT_FALSE(has("abc.pdq.xyz", "xyz.abc"));
  EXPECT_TRUE(has("Train-ResNet", "resnet"));
  EXPECT_TRUE(has("x", "*"));
}

TEST(OutputFormatTest, FilterMatchesInsideLists) {
  EXPECT_EQ(Filtered("jobSpec.workerPoolSpecs.machineSpec.machineType:n1-highmem-8"),
            std::vector<std::string>{});  // no [] and no index: a list has no keys
  EXPECT_EQ(Filtered("jobSpec.workerPoolSpecs[].machineSpec.machineType=n1-highmem-8").size(), 4u);
  EXPECT_EQ(Filtered("jobSpec.workerPoolSpecs[0].pythonPackageSpec.args:epochs").size(), 4u);
  EXPECT_EQ(Filtered("jobSpec.workerPoolSpecs[0].pythonPackageSpec.args=--lr=0.01").size(), 4u);
  EXPECT_EQ(Filtered("jobSpec.workerPoolSpecs[1].replicaCount>1").size(), 4u);
  EXPECT_EQ(Filtered("jobSpec.workerPoolSpecs[1].replicaCount>=3").size(), 0u);
}

TEST(OutputFormatTest, FilterRegexNumbersAndBooleans) {
  EXPECT_EQ(Filtered("displayName~^train"), (std::vector<std::string>{"101", "103"}));
  EXPECT_EQ(Filtered("displayName!~bert$"), (std::vector<std::string>{"101", "104"}));
  EXPECT_EQ(Filtered("name ~ 10[12]"), (std::vector<std::string>{"101", "102"}));
  auto f = ParseResourceFilter("n>9 AND ok=true AND x<0.5");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->Matches(json{{"n", 10}, {"ok", true}, {"x", 0.25}}));
  EXPECT_FALSE(f->Matches(json{{"n", "8"}, {"ok", true}, {"x", 0.25}}));
  EXPECT_FALSE(f->Matches(json{{"n", 10}, {"ok", false}, {"x", 0.25}}));
  EXPECT_TRUE(ParseResourceFilter("name='10'")->Matches(json{{"name", "10"}}));
}

TEST(OutputFormatTest, FilterPrecedenceAndNegation) {
  // Juxtaposition binds looser than OR: a OR b c == (a OR b) AND c.
  EXPECT_EQ(Filtered("labels.team=nlp OR displayName:train* state=JOB_STATE_SUCCEEDED"),
            (std::vector<std::string>{"101"}));
  EXPECT_EQ(Filtered("NOT state=JOB_STATE_SUCCEEDED NOT labels.team:*"),
            (std::vector<std::string>{"103"}));
  EXPECT_EQ(Filtered("NOT (state=JOB_STATE_SUCCEEDED OR state=JOB_STATE_FAILED)"),
            (std::vector<std::string>{"103"}));
  EXPECT_EQ(Filtered("displayName=\"train-resnet\""), (std::vector<std::string>{"101"}));
  EXPECT_EQ(Filtered("displayName='eval-bert'"), (std::vector<std::string>{"102"}));
}

TEST(OutputFormatTest, BadFiltersNameTheFlagThePositionAndTheFix) {
  EXPECT_EQ(FilterError("state=JOB_STATE_SUCCEEDED AND"),
            "--filter: at 30: expected a term such as state=JOB_STATE_RUNNING or labels.team:*");
  EXPECT_EQ(FilterError("a=1 AND b=2 OR c=3"),
            "--filter: at 13: AND and OR need parentheses to combine; write (a AND b) OR c or a "
            "AND (b OR c)");
  EXPECT_EQ(FilterError("(state=x"), "--filter: at 1: '(' is not closed; add ')'");
  EXPECT_EQ(FilterError("state=x)"),
            "--filter: at 8: unbalanced ')'; remove it or add a '(' before it");
  EXPECT_EQ(FilterError("state JOB_STATE_RUNNING"),
            "--filter: at 7: expected an operator (=, !=, <, <=, >, >=, :, ~ or !~) after 'state', "
            "e.g. state=VALUE or state:*");
  EXPECT_EQ(FilterError("displayName="),
            "--filter: at 13: expected a value after 'displayName=', e.g. displayName=\"some "
            "value\"");
  EXPECT_EQ(FilterError("displayName='abc"),
            "--filter: at 13: unterminated string; add the closing '");
  EXPECT_EQ(FilterError("name~'['").rfind("--filter: at 6: '[' is not a regular expression", 0),
            0u);
  EXPECT_EQ(FilterError("=x"),
            "--filter: at 1: expected a key such as state, displayName or labels.team, got '='");
  EXPECT_EQ(FilterError("a..b=1"),
            "--filter: at 1: 'a..b' is not a resource key; write a dotted path such as "
            "labels.team or jobSpec.workerPoolSpecs[0]");
  EXPECT_EQ(FilterError(std::string(40, '(') + "a=1" + std::string(40, ')')),
            "--filter: at 33: nested deeper than 32; simplify it");
  EXPECT_EQ(FilterError(std::string(5000, 'a')).rfind("--filter: is 5000 characters long", 0), 0u);
}

// ------------------------------------------------------------ sort and limit

TEST(OutputFormatTest, SortByDescendingTimesThenLimit) {
  ListFlags f;
  f.sort_by = "~createTime";
  EXPECT_EQ(Ids(*ApplyListFlags(Jobs(), f)),
            (std::vector<std::string>{"104", "102", "101", "103"}));
  f.sort_by = "create_time";
  EXPECT_EQ(Ids(*ApplyListFlags(Jobs(), f)),
            (std::vector<std::string>{"103", "101", "102", "104"}));
  f.limit = 2;
  EXPECT_EQ(Ids(*ApplyListFlags(Jobs(), f)), (std::vector<std::string>{"103", "101"}));
  f.filter = "labels.team:*";
  EXPECT_EQ(Ids(*ApplyListFlags(Jobs(), f)), (std::vector<std::string>{"101", "102"}));
}

TEST(OutputFormatTest, SortIsStableAcrossSeveralKeysWithAbsentValuesFirst) {
  ListFlags f;
  f.sort_by = "state,~labels.team";
  EXPECT_EQ(Ids(*ApplyListFlags(Jobs(), f)),
            (std::vector<std::string>{"102", "103", "101", "104"}));
  f.sort_by = "labels.team";
  EXPECT_EQ(Ids(*ApplyListFlags(Jobs(), f)),
            (std::vector<std::string>{"103", "101", "104", "102"}));
  std::vector<json> n = {{{"name", "a/1"}, {"r", "10"}}, {{"name", "a/2"}, {"r", "9"}}};
  f.sort_by = "r";  // int64 strings sort as numbers
  EXPECT_EQ(Ids(*ApplyListFlags(n, f)), (std::vector<std::string>{"2", "1"}));
}

TEST(OutputFormatTest, BadListFlagsNameTheFlag) {
  ListFlags f;
  f.limit = 0;
  EXPECT_EQ(Error(ApplyListFlags(Jobs(), f).status()),
            "--limit: must be 1 or more, got 0; leave --limit out for no bound");
  f = {};
  f.page_size = -5;
  EXPECT_EQ(Error(ValidateListFlags(f)),
            "--page-size: must be 1 or more, got -5; leave --page-size out for no bound");
  f = {};
  f.sort_by = "createTime,,name";
  EXPECT_EQ(Error(ValidateListFlags(f)),
            "--sort-by: '' is not a resource key; write --sort-by=createTime or "
            "--sort-by=~createTime,displayName ('~' sorts descending)");
  f = {};
  f.filter = "(";
  EXPECT_EQ(Error(ValidateListFlags(f)).rfind("--filter: at 2", 0), 0u);
  f = {};
  f.page_size = 50;
  f.limit = 3;
  EXPECT_TRUE(ValidateListFlags(f).ok());
}

// ------------------------------------------------------------ argv

TEST(OutputFormatTest, HoistsTheFormatFromAnywhere) {
  auto h = HoistGlobalFlags({"jobs", "describe", "3", "--format", "json"});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->format, "json");
  EXPECT_EQ(h->rest, (std::vector<std::string>{"jobs", "describe", "3"}));
  h = HoistGlobalFlags({"--format=value(name)", "jobs", "list", "--format=yaml", "-q"});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->format, "yaml");  // the last wins
  EXPECT_TRUE(h->quiet);
  EXPECT_EQ(h->rest, (std::vector<std::string>{"jobs", "list"}));
}

TEST(OutputFormatTest, HoistingLeavesOtherFlagsValuesAndWhatFollowsDoubleDash) {
  auto h = HoistGlobalFlags({"jobs", "submit", "--args=--format=json", "--verbosity", "debug", "--",
                             "--format", "x", "-q"});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->format, std::nullopt);
  EXPECT_EQ(h->verbosity, "debug");
  EXPECT_FALSE(h->quiet);
  EXPECT_EQ(h->rest, (std::vector<std::string>{"jobs", "submit", "--args=--format=json", "--",
                                               "--format", "x", "-q"}));
  h = HoistGlobalFlags({"ai", "custom-jobs", "create", "--args", "--format", "--format=json"},
                       {"--args"});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->format, "json");
  EXPECT_EQ(h->rest,
            (std::vector<std::string>{"ai", "custom-jobs", "create", "--args", "--format"}));
}

TEST(OutputFormatTest, HoistingRefusesMissingValuesAndUnknownVerbosity) {
  EXPECT_EQ(Error(HoistGlobalFlags({"jobs", "list", "--format"}).status()),
            "--format: expected a value, e.g. --format=json");
  EXPECT_EQ(Error(HoistGlobalFlags({"--format", "--", "x"}).status()),
            "--format: expected a value, e.g. --format=json");
  EXPECT_EQ(Error(HoistGlobalFlags({"--verbosity=loud"}).status()),
            "--verbosity: unknown level 'loud'; use debug, info, warning, error, critical or none");
  EXPECT_EQ(Error(HoistGlobalFlags({"--verbosity=debgu"}).status()),
            "--verbosity: unknown level 'debgu'; use debug, info, warning, error, critical or none "
            "(did you mean debug?)");
}

// ------------------------------------------------------------ did you mean

TEST(OutputFormatTest, SuggestsTheClosestCandidate) {
  std::vector<std::string> commands = {"list", "describe", "cancel", "logs", "submit", "local-run"};
  EXPECT_EQ(Suggest("lsit", commands), "list");  // a swap is one edit
  EXPECT_EQ(Suggest("descrbe", commands), "describe");
  EXPECT_EQ(Suggest("CANCEL", commands), "cancel");
  EXPECT_EQ(Suggest("sumbit", commands), "submit");
  EXPECT_EQ(Suggest("desc", commands), "describe");  // a unique prefix
  EXPECT_EQ(Suggest("frobnicate", commands), "");
  EXPECT_EQ(Suggest("x", commands), "");
  EXPECT_EQ(Suggest("", commands), "");
  EXPECT_EQ(Suggest("--dispaly-name", {"--display-name", "--config"}), "--display-name");
  EXPECT_EQ(Suggest("lo", {"logs", "local-run"}), "");
}

}  // namespace
}  // namespace stoker::cli
