#include "exec/image_catalog.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "exec/image_engine.h"

namespace stoker::exec {
namespace {

ImageReference Ref(const std::string& name) { return ParseImageReference(name, "test").value(); }

// An engine whose store the test sets, and whose event stream the test
// feeds: Watch calls on_event once per PushEvent, until Cancel.
class FakeContainerEngine : public ImageEngine {
 public:
  explicit FakeContainerEngine(std::string kind = "podman") : kind_(std::move(kind)) {}

  void SetImages(std::vector<ListedImage> images) {
    std::lock_guard<std::mutex> lock(mu_);
    images_ = std::move(images);
    fails_ = false;
  }
  void Fail() {
    std::lock_guard<std::mutex> lock(mu_);
    fails_ = true;
  }
  void PushEvent() {
    std::lock_guard<std::mutex> lock(mu_);
    ++events_;
    cv_.notify_all();
  }
  int lists() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lists_;
  }

  std::string Kind() const override { return kind_; }
  Result<std::vector<ListedImage>> List() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++lists_;
    if (fails_) return FailedPrecondition("the engine does not answer");
    return images_;
  }
  Status Watch(const std::function<void()>& on_event) override {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return cancelled_ || events_ > 0; });
      if (cancelled_) return Status();
      --events_;
      lock.unlock();
      on_event();
      lock.lock();
    }
  }
  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  const std::string kind_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ListedImage> images_;
  bool fails_ = false;
  bool cancelled_ = false;
  int events_ = 0;
  int lists_ = 0;
};

using Presence = ImageCatalog::Presence;

TEST(NormalImageNameTest, WritesTheEnginesFullName) {
  EXPECT_EQ(NormalImageName(Ref("busybox")), "docker.io/library/busybox:latest");
  EXPECT_EQ(NormalImageName(Ref("docker.io/busybox:1")), "docker.io/library/busybox:1");
  EXPECT_EQ(NormalImageName(Ref("docker.io/library/busybox")), "docker.io/library/busybox:latest");
  EXPECT_EQ(NormalImageName(Ref("me/trainer:v1")), "docker.io/me/trainer:v1");
  EXPECT_EQ(NormalImageName(Ref("localhost/x")), "localhost/x:latest");
  EXPECT_EQ(NormalImageName(Ref("localhost:5000/a/b:2")), "localhost:5000/a/b:2");
  EXPECT_EQ(NormalImageName(Ref("us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310")),
            "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest");
  const std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(NormalImageName(Ref("x@" + digest)), "docker.io/library/x@" + digest);
  EXPECT_EQ(NormalImageName(Ref("quay.io/x:1@" + digest)), "quay.io/x@" + digest);
}

TEST(ParseImageListLineTest, GivesTagAndDigestNames) {
  const std::string digest = "sha256:" + std::string(64, 'b');
  auto names = ParseImageListLine("sha256:1 localhost/stoker-base bookworm " + digest);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].name, "localhost/stoker-base:bookworm");
  EXPECT_EQ(names[0].id, "sha256:1");
  EXPECT_EQ(names[1].name, "localhost/stoker-base@" + digest);
  EXPECT_TRUE(ParseImageListLine("sha256:2 <none> <none> <none>").empty());
  EXPECT_EQ(ParseImageListLine("sha256:3 busybox latest <none>").size(), 1u);
}

TEST(ImageCatalogTest, UnknownUntilTheFirstListIsRead) {
  auto engine = std::make_unique<FakeContainerEngine>();
  engine->SetImages({{"localhost/x:1", "id1"}});
  ImageCatalog catalog(std::move(engine));
  EXPECT_EQ(catalog.Lookup(Ref("localhost/x:1")), Presence::kUnknown);
  EXPECT_EQ(catalog.Lookup(Ref("localhost/y:1")), Presence::kUnknown);
  ASSERT_TRUE(catalog.Refresh().ok());
  EXPECT_EQ(catalog.Lookup(Ref("localhost/x:1")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("localhost/y:1")), Presence::kAbsent);
}

TEST(ImageCatalogTest, AnEngineThatCannotAnswerMakesItUnknown) {
  auto owned = std::make_unique<FakeContainerEngine>();
  FakeContainerEngine* engine = owned.get();
  engine->SetImages({{"localhost/x:1", "id1"}});
  ImageCatalog catalog(std::move(owned));
  ASSERT_TRUE(catalog.Refresh().ok());
  engine->Fail();
  EXPECT_FALSE(catalog.Refresh().ok());
  EXPECT_EQ(catalog.Lookup(Ref("localhost/x:1")), Presence::kUnknown);
}

TEST(ImageCatalogTest, NamesAreComparedInTheEnginesForm) {
  auto engine = std::make_unique<FakeContainerEngine>("podman");
  engine->SetImages({{"docker.io/library/busybox:latest", "id1"},
                     {"localhost/trainer:v1", "id2"},
                     {"quay.io/team/tool:3", "id3"}});
  ImageCatalog catalog(std::move(engine));
  ASSERT_TRUE(catalog.Refresh().ok());
  EXPECT_EQ(catalog.Lookup(Ref("busybox")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("docker.io/busybox:latest")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("busybox:1")), Presence::kAbsent);
  // Podman's short names: found under any registry.
  EXPECT_EQ(catalog.Lookup(Ref("trainer:v1")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("tool:3")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("team/tool:3")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("ool:3")), Presence::kAbsent);
  // A name with a registry is that registry's only.
  EXPECT_EQ(catalog.Lookup(Ref("docker.io/trainer:v1")), Presence::kAbsent);
  EXPECT_EQ(catalog.Lookup(Ref("localhost/trainer:v2")), Presence::kAbsent);
}

TEST(ImageCatalogTest, DockerFindsAShortNameOnDockerHubOnly) {
  auto engine = std::make_unique<FakeContainerEngine>("docker");
  engine->SetImages({{"busybox:latest", "id1"}, {"localhost/trainer:v1", "id2"}});
  ImageCatalog catalog(std::move(engine));
  ASSERT_TRUE(catalog.Refresh().ok());
  EXPECT_EQ(catalog.Lookup(Ref("docker.io/library/busybox")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("trainer:v1")), Presence::kAbsent);
  EXPECT_EQ(catalog.Lookup(Ref("localhost/trainer:v1")), Presence::kPresent);
}

TEST(ImageCatalogTest, EventsKeepItCurrent) {
  auto owned = std::make_unique<FakeContainerEngine>();
  FakeContainerEngine* engine = owned.get();
  engine->SetImages({{"localhost/x:1", "id1"}});
  // No timer tick within the test: only the first read and events count.
  ImageCatalog catalog(std::move(owned), /*refresh_ms=*/3600 * 1000);
  catalog.Start();
  ASSERT_TRUE(catalog.WaitForReads(1, 30000));
  EXPECT_EQ(catalog.Lookup(Ref("localhost/x:1")), Presence::kPresent);
  EXPECT_EQ(catalog.Lookup(Ref("localhost/new:1")), Presence::kAbsent);

  // An image is built: the next read after its event shows it.
  engine->SetImages({{"localhost/x:1", "id1"}, {"localhost/new:1", "id2"}});
  engine->PushEvent();
  ASSERT_TRUE(catalog.WaitForReads(2, 30000));
  EXPECT_EQ(catalog.Lookup(Ref("localhost/new:1")), Presence::kPresent);

  // One is removed.
  engine->SetImages({{"localhost/new:1", "id2"}});
  engine->PushEvent();
  ASSERT_TRUE(catalog.WaitForReads(3, 30000));
  EXPECT_EQ(catalog.Lookup(Ref("localhost/x:1")), Presence::kAbsent);
  EXPECT_EQ(catalog.Lookup(Ref("localhost/new:1")), Presence::kPresent);
  EXPECT_EQ(engine->lists(), 3);
}

TEST(ImageCatalogTest, StopsWhileFollowingEvents) {
  auto engine = std::make_unique<FakeContainerEngine>();
  auto catalog = std::make_unique<ImageCatalog>(std::move(engine), 3600 * 1000);
  catalog->Start();
  ASSERT_TRUE(catalog->WaitForReads(1, 30000));
  catalog.reset();  // returns: the stream is cancelled, the timer woken
}

}  // namespace
}  // namespace stoker::exec
