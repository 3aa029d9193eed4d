// The parts of a libvirt domain XML the client needs (define, modify, info).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pvc::cli {

struct DomainInterface {
    std::string type;     // bridge, direct, hostdev, network...
    std::string mac;
    std::string source;   // bridge name, direct dev, or the hostdev PCI address "dddd:bb:ss.f"
    std::string model;
};

struct DomainDisk {
    std::string type;     // rbd, file, ...
    std::string name;     // pool/volume for rbd, file path for files
    std::string target;   // vda, sda...
};

struct DomainXml {
    std::string xml;          // the text to store (the input, or with an inserted <uuid>)
    std::string name;
    std::string uuid;         // lowercase
    bool uuid_generated = false;
    std::optional<long> memory_mib;
    std::optional<long> vcpus;
    std::string description;
    std::vector<DomainInterface> interfaces;
    std::vector<DomainDisk> disks;

    // rbd disks as `pool/volume`, in document order (the `rbdlist` key).
    std::vector<std::string> rbd_list() const;
};

// Parses `text`; throws Failure naming the problem (not well-formed, root
// not <domain>, no <name>, bad <uuid>). With `insert_uuid`, a missing <uuid>
// is generated and inserted after <name>; otherwise it is an error.
DomainXml parse_domain_xml(const std::string& text, bool insert_uuid);

// True for a canonical 8-4-4-4-12 hex UUID (either case).
bool is_uuid(const std::string& s);

}  // namespace pvc::cli
