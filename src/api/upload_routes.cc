// Object uploads that are not resumable sessions (resumable_uploads.h has
// those): `uploadType=media` (the body is the object; its Content-Type is
// the object's), `uploadType=multipart` (http/multipart_related.h: the
// object's JSON resource, then its bytes) and package staging. Every body
// streams to a temp file and becomes the object by rename when it ends.
#include <nlohmann/json.hpp>

#include "api/gcs_json.h"
#include "api/routes.h"
#include "http/multipart_related.h"

namespace stoker::api {
namespace {

using nlohmann::json;

// Writes one object from a streamed body: opened (with its bucket made when
// missing, and removed again if the upload fails) once the object's name
// and metadata are known, committed at the end.
class ObjectUpload {
 public:
  ObjectUpload(const ApiDeps& d, const http::Request& head, std::string bucket)
      : d_(d), bucket_(std::move(bucket)) {
    head_.method = head.method;
    head_.query = head.query;
  }
  ~ObjectUpload() {
    if (!done_ && made_bucket_) {
      writer_.reset();  // removes the temp file first
      d_.buckets->RemoveIfEmpty(bucket_);
    }
  }

  // Checks the name and the preconditions and opens the writer. On error,
  // the response to send.
  std::optional<http::Response> Open(const std::string& name, storage::ObjectMeta meta) {
    if (name.empty()) {
      return Error(InvalidArgument(
          "name: the object name is required (?name=path/in/bucket, or \"name\" in the "
          "metadata part)"));
    }
    auto parsed = storage::ParseGsUri("gs://" + bucket_ + "/" + name, "name");
    if (!parsed.ok()) return Error(parsed.status());
    object_ = parsed->object;
    if (auto unmet = CheckPreconditions(*d_.buckets, head_, bucket_, object_)) return unmet;
    if (!d_.buckets->Exists(bucket_)) {
      Status s = d_.buckets->Create(bucket_);
      if (!s.ok()) return Error(s);
      made_bucket_ = true;
    }
    auto w = d_.buckets->OpenWriter(bucket_, object_);
    if (!w.ok()) return Error(w.status());
    writer_ = std::move(*w);
    writer_->SetMeta(std::move(meta));
    return std::nullopt;
  }
  Status Append(std::string_view bytes) { return writer_->Append(bytes); }
  // Commits, checking the preconditions again (another upload may have
  // landed meanwhile).
  http::Response Commit() {
    if (auto unmet = CheckPreconditions(*d_.buckets, head_, bucket_, object_)) return *unmet;
    auto info = writer_->Commit();
    if (!info.ok()) return Error(info.status());
    done_ = true;
    return Json(ObjectJson(bucket_, *info));
  }

 private:
  const ApiDeps& d_;
  http::Request head_;  // the method and query (the preconditions)
  std::string bucket_, object_;
  std::unique_ptr<storage::ObjectWriter> writer_;
  bool made_bucket_ = false;
  bool done_ = false;
};

// uploadType=media (or none): the body is the object.
class MediaSink : public http::BodySink {
 public:
  MediaSink(const ApiDeps& d, const http::Request& head, const std::string& bucket)
      : upload_(d, head, bucket) {
    storage::ObjectMeta meta;
    if (auto t = head.headers.find("content-type"); t != head.headers.end() && !t->second.empty()) {
      meta.content_type = t->second;
    }
    refused_ = upload_.Open(QueryValue(head, "name"), std::move(meta));
  }
  bool Accepting() const override { return !refused_; }
  bool Write(std::string_view bytes) override {
    status_ = upload_.Append(bytes);
    return status_.ok();
  }
  http::Response Finish() override {
    if (refused_) return std::move(*refused_);
    if (!status_.ok()) return Error(status_);
    return upload_.Commit();
  }

 private:
  ObjectUpload upload_;
  std::optional<http::Response> refused_;
  Status status_;
};

// uploadType=multipart: the object's resource, then its bytes.
class MultipartSink : public http::BodySink {
 public:
  MultipartSink(const ApiDeps& d, const http::Request& head, const std::string& bucket,
                std::string boundary)
      : upload_(d, head, bucket),
        reader_(
            std::move(boundary),
            [this, query_name = QueryValue(head, "name")](std::string metadata,
                                                          std::string media_type) {
              json resource = json::parse(metadata, nullptr, false);
              if (!resource.is_object()) {
                return InvalidArgument(
                    "multipart upload: the first part is not the object's JSON resource");
              }
              storage::ObjectMeta base;
              if (!media_type.empty()) base.content_type = media_type;
              auto meta = MetaFromJson(resource, "metadata part", base);
              if (!meta.ok()) return meta.status();
              std::string name = query_name;
              if (name.empty() && resource.contains("name") && resource["name"].is_string()) {
                name = resource["name"];
              }
              refused_ = upload_.Open(name, std::move(*meta));
              return refused_ ? Status(Code::kCancelled, "refused") : OkStatus();
            },
            [this](std::string_view bytes) { return upload_.Append(bytes); }) {}
  bool Write(std::string_view bytes) override {
    status_ = reader_.Feed(bytes);
    return status_.ok();
  }
  http::Response Finish() override {
    if (refused_) return std::move(*refused_);
    if (status_.ok()) status_ = reader_.End();
    if (!status_.ok()) return Error(status_);
    return upload_.Commit();
  }

 private:
  ObjectUpload upload_;
  http::MultipartRelatedReader reader_;
  std::optional<http::Response> refused_;
  Status status_;
};

// A staged package: checked and kept under its SHA-256 at the end.
class StagingSink : public http::BodySink {
 public:
  explicit StagingSink(const ApiDeps& d, std::unique_ptr<storage::ObjectWriter> w)
      : d_(d), writer_(std::move(w)) {}
  bool Write(std::string_view bytes) override {
    status_ = writer_->Append(bytes);
    return status_.ok();
  }
  http::Response Finish() override {
    if (!status_.ok()) return Error(status_);
    auto uri = d_.buckets->StageCommit(std::move(writer_));
    if (!uri.ok()) return Error(uri.status());
    return Json({{"uri", *uri}});
  }

 private:
  const ApiDeps& d_;
  std::unique_ptr<storage::ObjectWriter> writer_;
  Status status_;
};

}  // namespace

std::unique_ptr<http::BodySink> OpenStagingUpload(const ApiDeps& d) {
  auto w = d.buckets->StageWriter();
  if (!w.ok()) return RejectBody(Error(w.status()));
  return std::make_unique<StagingSink>(d, std::move(*w));
}

std::unique_ptr<http::BodySink> OpenObjectUpload(const ApiDeps& d, const http::Request& head,
                                                 const std::string& bucket) {
  if (QueryValue(head, "uploadType") != "multipart") {
    return std::make_unique<MediaSink>(d, head, bucket);
  }
  auto type = head.headers.find("content-type");
  auto boundary = http::MultipartRelatedReader::BoundaryOf(
      type == head.headers.end() ? std::string_view() : std::string_view(type->second));
  if (!boundary.ok()) return RejectBody(Error(boundary.status()));
  return std::make_unique<MultipartSink>(d, head, bucket, std::move(*boundary));
}

http::Response UploadCollected(const ApiDeps& d, const http::Request& req,
                               const std::string& bucket) {
  auto sink = OpenObjectUpload(d, req, bucket);
  if (sink->Accepting()) sink->Write(req.body);
  return sink->Finish();
}

}  // namespace stoker::api
