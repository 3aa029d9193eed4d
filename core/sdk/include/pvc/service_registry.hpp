// Services between modules, through the core (docs/sdk-guide.md §4): one
// module provides an interface, others get it; modules never include each
// other. An interface is an SDK header (pvc/services/...) declaring
//
//   static constexpr std::string_view service_name = "pvc.<what>.v<N>";
//
// The registry keys by that name, not by typeid: type identity is not
// reliable across shared objects loaded RTLD_LOCAL, the name is. A new,
// incompatible interface gets a new name (v2), so a module built against the
// old one finds nothing rather than the wrong type.
#pragma once

#include <concepts>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "pvc/export.hpp"

namespace pvc {

template <class T>
concept ServiceInterface = requires {
    { T::service_name } -> std::convertible_to<std::string_view>;
};

class PVC_SDK_API ServiceRegistry {
public:
    // Makes `service` the provider of T (replacing an earlier one).
    template <ServiceInterface T>
    void provide(std::shared_ptr<T> service) {
        std::lock_guard g(m_);
        services_[std::string(T::service_name)] = std::shared_ptr<void>(std::move(service));
    }
    // Withdraws T if `service` still provides it (a module's stop()).
    template <ServiceInterface T>
    void withdraw(const std::shared_ptr<T>& service) {
        std::lock_guard g(m_);
        auto it = services_.find(T::service_name);
        if (it != services_.end() && it->second.get() == static_cast<void*>(service.get())) services_.erase(it);
    }
    // The provider of T, or null when no loaded module provides it. Ask at
    // the time of use: providers may start after their users.
    template <ServiceInterface T>
    std::shared_ptr<T> get() const {
        std::lock_guard g(m_);
        auto it = services_.find(T::service_name);
        return it == services_.end() ? nullptr : std::static_pointer_cast<T>(it->second);
    }

private:
    mutable std::mutex m_;
    std::map<std::string, std::shared_ptr<void>, std::less<>> services_;
};

// The adapter every user of an optional service needs: the registry's
// provider of T, looked up at each use (providers may start after their
// users, and stop before them), else `fallback`, an implementation of T that
// does nothing (and may say so).
template <ServiceInterface T>
class ServiceOr {
public:
    ServiceOr(const ServiceRegistry& registry, std::shared_ptr<T> fallback)
        : registry_(registry), fallback_(std::move(fallback)) {}
    std::shared_ptr<T> get() const {
        if (auto provider = registry_.get<T>()) return provider;
        return fallback_;
    }

private:
    const ServiceRegistry& registry_;
    std::shared_ptr<T> fallback_;
};

}  // namespace pvc
