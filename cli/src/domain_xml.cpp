#include "domain_xml.hpp"

#include <algorithm>
#include <cctype>
#include <iostream>

#include "common.hpp"

namespace pvc::cli {
namespace {

std::vector<VmXml::Omission> omissions_of(const DomainXml& d) {
    const std::string info_fails = "a reference PVC client cannot show this VM (vm info, vm list fail on it)";
    std::vector<VmXml::Omission> out;
    if (!d.uuid) out.push_back({"<uuid>", "a reference PVC client refuses to define such XML"});
    if (d.arch.empty()) out.push_back({"<os><type arch=...>", info_fails});
    if (d.machine.empty()) out.push_back({"<os><type machine=...>", info_fails});
    if (d.console_type.empty()) out.push_back({"<devices><console type=...>", info_fails});
    if (d.emulator.empty()) out.push_back({"<devices><emulator>", info_fails});
    return out;
}

}  // namespace

VmXml read_vm_xml(const std::string& text, bool insert_uuid) {
    VmXml out;
    try {
        out.dom = parse_domain_xml(text);
    } catch (const DomainXmlError& e) {
        throw Failure(e.what());
    }
    const DomainXml& d = out.dom;
    if (d.name.empty()) throw Failure("invalid VM XML: no <name> element");
    if (d.name.find('/') != std::string::npos) throw Failure("invalid VM XML: <name> must not contain '/'");
    out.reference_omissions = omissions_of(d);

    out.xml = text;
    if (d.uuid) {
        if (!is_uuid(*d.uuid))
            throw Failure("invalid VM XML: <uuid> '" + *d.uuid + "' is not a UUID (8-4-4-4-12 hex digits)");
        out.uuid = *d.uuid;
        std::transform(out.uuid.begin(), out.uuid.end(), out.uuid.begin(),
                       [](unsigned char c) { return std::tolower(c); });
    } else if (!insert_uuid) {
        throw Failure("invalid VM XML: no <uuid> element");
    } else {
        out.uuid = new_uuid();
        out.uuid_generated = true;
        try {
            out.xml = insert_domain_uuid(text, out.uuid);
        } catch (const DomainXmlError& e) {
            throw Failure(e.what());
        }
    }
    return out;
}

void warn_reference_omissions(const VmXml& x) {
    for (const auto& o : x.reference_omissions) {
        std::cerr << "pvc: warning: the VM XML has no " << o.element;
        if (o.element == "<uuid>" && x.uuid_generated) std::cerr << " (generated " << x.uuid << " and inserted it)";
        std::cerr << ": " << o.consequence << std::endl;
    }
}

}  // namespace pvc::cli
