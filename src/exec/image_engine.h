// The real ImageEngine (image_catalog.h): runs the container engine's
// client. List is one `image ls` call; Watch follows `<client> events
// --filter type=image` (podman 4.3 and docker both stream by default) from
// just before the last List, so that an image made between the two is
// not missed.
#pragma once

#include <memory>
#include <mutex>

#include "exec/containers.h"
#include "exec/image_catalog.h"

namespace stoker::exec {

// `engine` must be usable (DetectContainerEngine).
std::unique_ptr<ImageEngine> MakeCommandImageEngine(const ContainerEngine& engine);

// One `image ls --format '{{.ID}} {{.Repository}} {{.Tag}} {{.Digest}}'`
// line read into the names it gives: REPO:TAG and REPO@DIGEST, leaving
// out "<none>" parts (an unnamed image gives none). Pure.
std::vector<ListedImage> ParseImageListLine(const std::string& line);

}  // namespace stoker::exec
