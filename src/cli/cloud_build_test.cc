#include "cli/cloud_build.h"

#include <gtest/gtest.h>

#include "common/json_yaml.h"

namespace stoker::cli {
namespace {

using nlohmann::json;

json Yaml(const std::string& text) { return *ParseYamlOrJson(text, "cloudbuild.yaml"); }

const std::map<std::string, std::string> kVars = {
    {"PROJECT_ID", "p"}, {"LOCATION", "us-central1"}, {"BUILD_ID", "b1"}};

TEST(CloudBuild, DockerBuildAndPushBecomeALocalBuild) {
  // The shape of a Vertex fine-tuning repository's cloudbuild.yaml.
  auto plan = PlanCloudBuild(Yaml(R"(
steps:
- name: 'gcr.io/cloud-builders/docker'
  id: build
  args: ['build', '--network=cloudbuild', '-t', 'us-central1-docker.pkg.dev/$PROJECT_ID/${_REPO}/nlp:$_TAG',
         '-t', 'nlp:latest', '--build-arg', 'BASE=${_BASE}', '-f', 'docker/Dockerfile', '.']
  dir: 'trainer'
- name: 'gcr.io/cloud-builders/docker'
  args: ['push', 'us-central1-docker.pkg.dev/$PROJECT_ID/${_REPO}/nlp:$_TAG']
images: ['us-central1-docker.pkg.dev/$PROJECT_ID/${_REPO}/nlp:$_TAG']
substitutions:
  _REPO: repo
  _TAG: v1
  _BASE: debian
)"),
                             [] {
                               auto v = kVars;
                               v["_TAG"] = "v2";  // --substitutions wins over the file
                               return v;
                             }());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->steps.size(), 2u);
  const CloudBuildStep& b = plan->steps[0];
  EXPECT_EQ(b.kind, CloudBuildStep::Kind::kBuild);
  EXPECT_EQ(b.id, "build");
  EXPECT_EQ(b.tags, (std::vector<std::string>{"us-central1-docker.pkg.dev/p/repo/nlp:v2", "nlp:latest"}));
  EXPECT_EQ(b.file, "trainer/docker/Dockerfile");
  EXPECT_EQ(b.context, "trainer/.");
  EXPECT_EQ(b.build_args, std::vector<std::string>{"BASE=debian"});
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("--network cloudbuild ignored"), std::string::npos);
  EXPECT_EQ(plan->steps[1].kind, CloudBuildStep::Kind::kPush);
  EXPECT_EQ(plan->steps[1].id, "step 2");
  EXPECT_EQ(plan->images, std::vector<std::string>{"us-central1-docker.pkg.dev/p/repo/nlp:v2"});
}

TEST(CloudBuild, OtherStepsAreRefusedAllAtOnceBeforeAnythingRuns) {
  auto plan = PlanCloudBuild(Yaml(R"(
steps:
- name: gcr.io/cloud-builders/docker
  args: [build, -t, x:1, .]
- name: gcr.io/cloud-builders/gcloud
  args: [ai, custom-jobs, create]
- name: python
  entrypoint: bash
  args: [-c, 'pytest']
- name: gcr.io/cloud-builders/docker
  args: [run, x:1]
)"),
                             kVars);
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("steps[1] (step 2): gcr.io/cloud-builders/gcloud"), std::string::npos) << m;
  EXPECT_NE(m.find("steps[2] (step 3): python"), std::string::npos) << m;
  EXPECT_NE(m.find("steps[3] (step 4): docker run"), std::string::npos) << m;
  EXPECT_EQ(m.find("steps[0]"), std::string::npos) << m;
}

TEST(CloudBuild, SubstitutionsAsCloudBuildMakesThem) {
  std::map<std::string, std::string> v = {{"_A", "1"}, {"PROJECT_ID", "p"}};
  EXPECT_EQ(*Substitute("${_A}x$$y-$PROJECT_ID", v, "w"), "1x$y-p");
  EXPECT_EQ(*Substitute("tag-$SHORT_SHA", v, "w"), "tag-");  // no trigger: empty
  auto missing = Substitute("img:$_TAG", v, "steps[0].args");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("steps[0].args: $_TAG has no value; give it with "
                                            "--substitutions=_TAG=VALUE"),
            std::string::npos);
}

TEST(CloudBuild, BadBuildsNameTheStep) {
  for (const auto& [yaml, says] : std::vector<std::pair<std::string, std::string>>{
           {"steps: [{name: docker, args: [build, .]}]", "needs -t IMAGE"},
           {"steps: [{name: docker, args: [build, -t, a, --squash, .]}]", "--squash is not"},
           {"steps: [{name: docker, args: [push, other:1]}]", "no step builds it"},
           {"steps: [{name: docker, args: [build, -t, a, .]}]\nimages: [b]", "images: b is not built"},
           {"{}", "no `steps:`"}}) {
    auto plan = PlanCloudBuild(Yaml(yaml), kVars);
    ASSERT_FALSE(plan.ok()) << yaml;
    EXPECT_NE(plan.status().message().find(says), std::string::npos) << plan.status().message();
  }
}

}  // namespace
}  // namespace stoker::cli
