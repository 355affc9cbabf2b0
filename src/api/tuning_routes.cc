// hyperparameterTuningJobs routes. To be completed.
#include "api/routes.h"

namespace stoker::api {

std::optional<http::Response> HandleTuningRoutes(const ApiDeps&, const http::Request&) {
  return std::nullopt;
}

}  // namespace stoker::api
