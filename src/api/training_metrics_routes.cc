// Routes being built for issue #15; answers no request yet.
#include "api/routes.h"

namespace stoker::api {

std::optional<http::Response> HandleTrainingMetricsRoutes(const ApiDeps&, const http::Request&,
                                                    const auth::Principal&) {
  return std::nullopt;
}

}  // namespace stoker::api
