#include "migration.hpp"

#include "libvirt.hpp"

namespace pvc::hv {

namespace {
void replace_all(std::string& s, const std::string& what, const std::string& with) {
    for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + with.size()))
        s.replace(pos, what.size(), with);
}
}  // namespace

std::string destination_uri(const Settings& settings, const std::string& target_node) {
    std::string uri = settings.migration_uri;
    replace_all(uri, "{node}", target_node);
    replace_all(uri, "{cluster_domain}", settings.cluster_domain);
    return uri;
}

std::string migration_data_uri(const std::string& dest_uri) {
    // scheme://[user@]host[:port]/path -> host
    auto start = dest_uri.find("://");
    if (start == std::string::npos) return {};
    start += 3;
    auto end = dest_uri.find('/', start);
    std::string authority = dest_uri.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (auto at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
    if (!authority.empty() && authority.front() != '[') {
        if (auto colon = authority.find(':'); colon != std::string::npos) authority = authority.substr(0, colon);
    }
    if (authority.empty()) return {};
    return "tcp://" + authority;
}

std::optional<std::string> migrate_live(virDomainPtr dom, const std::string& dest_uri) {
    ConnectHandle dest(virConnectOpen(dest_uri.c_str()));
    if (!dest) return "Failed to open destination " + dest_uri + ": " + last_error();
    std::string data_uri = migration_data_uri(dest_uri);
    DomainHandle migrated(virDomainMigrate(dom, dest.get(), VIR_MIGRATE_LIVE, nullptr,
                                           data_uri.empty() ? nullptr : data_uri.c_str(), 0));
    if (!migrated) return last_error();
    return std::nullopt;
}

}  // namespace pvc::hv
