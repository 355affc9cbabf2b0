// AI Platform Training (ml.googleapis.com/v1) routes. To be completed.
#include "api/routes.h"

namespace stoker::api {

std::optional<http::Response> HandleLegacyRoutes(const ApiDeps&, const http::Request&) {
  return std::nullopt;
}

}  // namespace stoker::api
