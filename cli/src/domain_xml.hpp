// A VM's XML as the client defines or modifies it: the shared reading of
// domain XML (pvc/domain_xml.hpp) plus the client's rules.
#pragma once

#include <string>
#include <vector>

#include "pvc/domain_xml.hpp"

namespace pvc::cli {

struct VmXml {
    std::string xml;              // the text to store (the input, or with an inserted <uuid>)
    std::string uuid;             // lowercase
    bool uuid_generated = false;
    DomainXml dom;                // what the XML says
    // What a reference PVC client needs and this XML lacks, each with what
    // the reference does without it: it refuses to define XML without
    // <uuid>, and its VM information (vm info, vm list) fails on a VM
    // without <os><type arch/machine>, <devices><console type> or
    // <devices><emulator>.
    struct Omission {
        std::string element;
        std::string consequence;
    };
    std::vector<Omission> reference_omissions;
};

// Parses `text`; throws Failure naming the problem (not well-formed, root
// not <domain>, no <name>, bad <uuid>). With `insert_uuid`, a missing <uuid>
// is generated and inserted after <name> (and still listed as an omission
// of the input); otherwise it is an error.
VmXml read_vm_xml(const std::string& text, bool insert_uuid);

// One "warning: ..." line on stderr per omission.
void warn_reference_omissions(const VmXml& x);

}  // namespace pvc::cli
