// The few facts the daemon reads from domain XML (hypervisor.md §19).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pvc::hv {

struct DiskInfo { std::string name; std::string target_dev; };
struct InterfaceInfo { std::string target_dev; std::string bridge; };

struct DomainXml {
    std::string name;
    std::string uuid;
    long memory_mib = 0;   // per §19: KiB -> /1024, GiB -> *1024, anything else as MiB
    int vcpus = 0;
    std::optional<std::string> graphics;  // "<listen>:<port>" of the first graphics element
    std::vector<DiskInfo> disks;
    std::vector<InterfaceInfo> bridges;
};

// Parses; nullopt when the text is not well-formed XML with a <domain> root.
std::optional<DomainXml> parse_domain_xml(const std::string& xml);

}  // namespace pvc::hv
