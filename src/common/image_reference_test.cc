#include "common/image_reference.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stoker {
namespace {

const std::string kHex(64, 'a');

TEST(ImageReferenceTest, AcceptsNamesAsWrittenAndRebuildsThemUnchanged) {
  for (const std::string& name : std::vector<std::string>{
           "trainer:v1",
           "ubuntu",
           "library/ubuntu:22.04",
           "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.1-13.py310:latest",
           "gcr.io/cloud-ml-algos/image_classification:latest",
           "localhost/stoker-base:1",
           "localhost:5000/a/b:1",
           "127.0.0.1:5000/team/trainer",
           "[::1]:5000/x",
           "[fe80::1]/x:y",
           "Registry.Example.COM/a/b",
           "a__b/c---d/e.f_g:Tag_1.-x",
           "x@sha256:" + kHex,
           "gcr.io/p/t:1@sha256:" + kHex,
           "my-registry.local:443/ns/img:" + std::string(128, 'x'),
           std::string(255, 'a'),
       }) {
    SCOPED_TRACE(name);
    Result<ImageReference> r = ParseImageReference(name, "f");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->ToString(), name);
  }
}

TEST(ImageReferenceTest, SplitsRegistryPathTagAndDigest) {
  ImageReference r = ParseImageReference("localhost:5000/a/b:1@sha256:" + kHex, "f").value();
  EXPECT_EQ(r.registry, "localhost:5000");
  EXPECT_EQ(r.host, "localhost");
  EXPECT_EQ(r.port, 5000);
  EXPECT_EQ(r.path, "a/b");
  EXPECT_EQ(r.tag, "1");
  EXPECT_EQ(r.digest, "sha256:" + kHex);
  EXPECT_EQ(r.Registry(), "localhost:5000");
  EXPECT_EQ(r.ConnectHost(), "localhost");
  EXPECT_EQ(r.ConnectPort(), 5000);

  ImageReference v6 = ParseImageReference("[::1]:5000/x", "f").value();
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 5000);
  EXPECT_EQ(v6.Registry(), "[::1]:5000");
}

TEST(ImageReferenceTest, ImpliesDockerHubOnlyWhenTheFirstComponentIsNoHost) {
  for (const std::string name : {"ubuntu", "library/ubuntu:1", "team/img"}) {
    ImageReference r = ParseImageReference(name, "f").value();
    EXPECT_EQ(r.registry, "") << name;
    EXPECT_EQ(r.Registry(), "docker.io") << name;
    EXPECT_EQ(r.ConnectHost(), "registry-1.docker.io") << name;
    EXPECT_EQ(r.ConnectPort(), 443) << name;
  }
  EXPECT_EQ(ParseImageReference("gcr.io/p/t:1", "f")->Registry(), "gcr.io");
  EXPECT_EQ(ParseImageReference("gcr.io/p/t:1", "f")->ConnectHost(), "gcr.io");
  EXPECT_EQ(ParseImageReference("localhost/x", "f")->Registry(), "localhost");
  EXPECT_EQ(ParseImageReference("docker.io/library/x", "f")->ConnectHost(), "registry-1.docker.io");
}

TEST(ImageReferenceTest, RefusesTransportsOptionsAndMalformedNames) {
  for (const std::string& name : std::vector<std::string>{
           "",
           "containers-storage:[overlay@/tmp/x+/tmp/xrun]localhost/name:1",
           "containers-storage:localhost/name:1",
           "containers-storage:x",
           "docker://ubuntu",
           "docker://localhost:5000/x:1",
           "docker-archive:/tmp/x.tar",
           "docker-daemon:ubuntu:latest",
           "oci:/tmp/layout",
           "oci:x",
           "OCI:x",
           "oci-archive:/tmp/x",
           "dir:/tmp/x",
           "dir:5000/x",
           "sif:/tmp/x.sif",
           "tarball:/tmp/x.tar",
           "ostree:x@/ostree/repo",
           "-x",
           "--rm",
           "-v",
           "a b",
           "a\tb",
           "a\nb",
           "x:1\n",
           "A/b",
           "Ubuntu",
           "..",
           "a/../b",
           "./a",
           "a//b",
           "a/",
           "/a",
           "a..b",
           "a___b",
           "a.-b",
           "-a/b",
           "a-",
           std::string(256, 'a'),
           "gcr.io/" + std::string(249, 'a'),
           "name:tag:tag",
           "name:",
           "name:-tag",
           "name:" + std::string(129, 'x'),
           "name@sha256:short",
           "name@sha256:" + std::string(64, 'A'),
           "name@sha512:" + std::string(128, 'a'),
           "name@" + kHex,
           "name@sha256:" + kHex + "@sha256:" + kHex,
           "localhost:0/x",
           "localhost:65536/x",
           "localhost:/x",
           "localhost:5x/x",
           "-host.io/x",
           "host-.io/x",
           "ho_st.io/x",
           "[::1/x",
           "[zz::1]:5000/x",
           "[::1]5000/x",
           "caf\xc3\xa9/x",
       }) {
    SCOPED_TRACE(name);
    Result<ImageReference> r = ParseImageReference(name, "f");
    ASSERT_FALSE(r.ok()) << r->ToString();
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
}

TEST(ImageReferenceTest, ErrorsNameTheFieldTheReasonAndTheGrammar) {
  Result<ImageReference> r =
      ParseImageReference("containers-storage:[overlay@/tmp/x+/tmp/xrun]localhost/x:1",
                          "workerPoolSpecs[0].containerSpec.imageUri");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_EQ(m.rfind("workerPoolSpecs[0].containerSpec.imageUri: "
                    "'containers-storage:[overlay@/tmp/x+/tmp/xrun]localhost/x:1' is not an image "
                    "reference (",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("names a transport"), std::string::npos) << m;
  EXPECT_NE(m.find("expected [HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST]"), std::string::npos) << m;

  std::string upper = ParseImageReference("A/b", "--image").status().message();
  EXPECT_NE(upper.find("--image: 'A/b'"), std::string::npos) << upper;
  EXPECT_NE(upper.find("upper-case"), std::string::npos) << upper;

  std::string sha512 =
      ParseImageReference("x@sha512:" + std::string(128, 'a'), "f").status().message();
  EXPECT_NE(sha512.find("only sha256"), std::string::npos) << sha512;
}

TEST(ImageReferenceTest, EscapesControlCharactersInTheMessage) {
  std::string m = ParseImageReference("a\nb", "f").status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find("'a\\x0ab'"), std::string::npos) << m;
}

}  // namespace
}  // namespace stoker
