// Domain XML as a client (POST /vm) or ZooKeeper (/domains/<uuid>/xml)
// gives it (core/sdk/src/domain_xml.cpp): the bounds pass, libxml2's read,
// the facts taken from the document, and the uuid insertion `vm define` does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pvc/domain_xml.hpp"

namespace {
void check(bool ok) {
    if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    bool bounded = true;
    try {
        pvc::check_domain_xml_bounds(text);
    } catch (const pvc::DomainXmlError&) {
        bounded = false;
    }
    auto parsed = pvc::try_parse_domain_xml(text);
    // What the bounds refuse, the reader refuses too.
    if (!bounded) check(!parsed.has_value());
    if (parsed) {
        (void)parsed->memory_mib();
        (void)parsed->rbd_list();
        if (parsed->uuid) (void)pvc::is_uuid(*parsed->uuid);
        try {
            std::string with = pvc::insert_domain_uuid(text, "7b2d2a3c-2c55-4c1e-9f1e-0d3d6a2c9e11");
            auto again = pvc::try_parse_domain_xml(with);
            (void)again;
        } catch (const pvc::DomainXmlError&) {
        }
    }
    // A memory amount with each unit spelling the reader accepts.
    if (size < 64) {
        auto split = text.find(' ');
        if (split != std::string_view::npos) (void)pvc::memory_kib(text.substr(0, split), text.substr(split + 1));
    }
    return 0;
}
