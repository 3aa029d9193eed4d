// What a route handler gets (Api::Ctx): shared by routes.cpp and the route
// files beside it (routes_storage.cpp).
#pragma once

#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "http_server.hpp"
#include "request.hpp"
#include "routes.hpp"

namespace pvc::api {

struct Api::Ctx {
    const HttpRequest& req;
    std::vector<std::string> args;  // the route's path arguments
    Params params;
    std::stop_token stop;
    // Reads go to ZooKeeper itself, the session synced (Api::handle).
    bool through = false;
    std::optional<std::string> p(std::string_view name) const { return params.get(name); }
    bool flag(std::string_view name) const { return truthy(params.get(name)); }
};

}  // namespace pvc::api
