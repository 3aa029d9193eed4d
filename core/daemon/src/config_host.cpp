// The host a configuration is read for: names and node id from the hostname,
// static data from the machine the code runs on.
#include "config_reader.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>

namespace pvc {

namespace {

std::vector<std::string> static_data_of_this_machine() {
    long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u {};
    std::string release, os, machine;
    if (::uname(&u) == 0) {
        release = u.release;
        machine = u.machine;
        // `uname -o` reports the operating system, not the kernel name; on a
        // glibc Linux system that is "GNU/Linux".
        os = std::string(u.sysname) == "Linux" ? "GNU/Linux" : u.sysname;
    }
    return {std::to_string(cpus > 0 ? cpus : 1), release, os, machine};
}

}  // namespace

HostIdentity host_identity(const std::string& fqdn) {
    HostIdentity h;
    h.fqdn = fqdn;
    auto dot = fqdn.find('.');
    h.hostname = fqdn.substr(0, dot);
    h.domain = dot == std::string::npos ? "" : fqdn.substr(dot + 1);
    // Last maximal run of decimal digits in the short hostname.
    h.node_id = "0";
    auto end = h.hostname.find_last_of("0123456789");
    if (end != std::string::npos) {
        auto begin = end;
        while (begin > 0 && h.hostname[begin - 1] >= '0' && h.hostname[begin - 1] <= '9') --begin;
        h.node_id = h.hostname.substr(begin, end - begin + 1);
    }
    // static_data always describes the machine the code runs on.
    h.static_data = static_data_of_this_machine();
    return h;
}

HostIdentity this_host_identity() {
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) buf[0] = '\0';
    return host_identity(buf.data());
}

}  // namespace pvc
