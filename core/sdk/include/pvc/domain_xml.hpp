// Reading a libvirt domain XML: the one reading the CLI and the node daemon
// share, so `pvc vm list` and a node's memprov agree.
// Units follow libvirt, not the reference: a <memory> without `unit` is KiB
// (the reference took it as MiB).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"

namespace pvc {

struct DomainDisk {
    std::string type;      // <disk type>: network, file, block, volume...
    std::string protocol;  // <source protocol> of a network disk: rbd...
    std::string source;    // network: <source name> (rbd: pool/volume); file: <source file>; block: <source dev>
    std::string target;    // <target dev>: vda, sda...
};

struct PVC_SDK_API DomainInterface {
    std::string type;    // <interface type>: bridge, direct, hostdev, network...
    std::string mac;
    std::string source;  // bridge name, direct dev, network name, or a hostdev's PCI address "dddd:bb:ss.f"
    std::string target;  // <target dev> (libvirt sets it in the live XML): the host-side device
    std::string model;
    std::string sriov_device;  // hostdev: the <sriov_device> text PVC writes, the VF's netdev name

    // The SR-IOV VF this NIC uses: a `direct` (macvtap)
    // NIC's source dev, a `hostdev` NIC's <sriov_device>; "" for any other
    // NIC (and a hostdev without <sriov_device>).
    std::string sriov_vf() const;
};

struct DomainGraphics {
    std::string type;    // vnc, spice...
    std::string listen;  // @listen, "" if absent
    std::string port;    // @port as written ("-1" before autoport allocated one)
};

struct PVC_SDK_API DomainXml {
    std::string name;                 // "" if there is no <name>
    std::optional<std::string> uuid;  // <uuid> text as written (trimmed); none without the element
    std::string description;
    std::optional<std::uint64_t> memory_kib;          // <memory>, KiB as libvirt rounds it
    std::optional<std::uint64_t> current_memory_kib;  // <currentMemory>
    std::optional<long> vcpus;                        // <vcpu> text: the maximum vCPU count
    std::optional<long> current_vcpus;                // <vcpu current=...>: the vCPUs online at boot
    std::string os_type;                              // <os><type> text: hvm...
    std::string arch;                                 // <os><type arch>
    std::string machine;                              // <os><type machine>
    std::string emulator;                             // <devices><emulator>, "" if absent
    std::string console_type;                         // the first <devices><console type>, "" if absent
    std::vector<DomainDisk> disks;                    // document order
    std::vector<DomainInterface> interfaces;          // document order
    std::optional<DomainGraphics> graphics;           // the first <graphics>

    // <memory> in MiB, truncated (as the node accounts libvirt's KiB).
    std::optional<long> memory_mib() const;
    // rbd disks as `pool/volume`, in document order (the `rbdlist` key).
    std::vector<std::string> rbd_list() const;
};

class PVC_SDK_API DomainXmlError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// What a domain XML may be. A libvirt domain is a small, shallow document
// with a few attributes per element and no document type declaration; one
// from a client may be hostile, and libxml2 spends more than linear time on
// some shapes (entity expansion: a 50 KB document read as a 10 MB
// description; 100,000 attributes on one element: minutes of CPU). So
// before libxml2 reads anything, one linear pass over the text refuses:
// more than max_bytes (what one ZooKeeper value holds, zk::max_value_bytes),
// a NUL byte (the document is read as UTF-8 only, whatever its encoding
// declaration says), any `<!DOCTYPE` or other markup declaration (no DTD,
// no entities: the only entities are XML's five and character references),
// elements nested deeper than max_depth, more than max_elements elements,
// more than max_attributes attributes on one element, an attribute value
// over max_attribute_bytes or a run of text over max_text_bytes. libxml2
// then reads without network access, entity substitution or its "huge"
// mode. Each refusal is a DomainXmlError naming the bound.
struct DomainXmlLimits {
    static constexpr std::size_t max_bytes = 1024 * 1024 - 8 * 1024;
    static constexpr std::size_t max_depth = 64;
    static constexpr std::size_t max_elements = 20000;
    static constexpr std::size_t max_attributes = 64;
    static constexpr std::size_t max_attribute_bytes = 64 * 1024;
    static constexpr std::size_t max_text_bytes = 512 * 1024;
};

// Throws DomainXmlError naming the problem: over a bound above, not
// well-formed (with its line), or a root element other than <domain>.
// Everything else is optional here; what a caller requires (a name, a uuid)
// it checks itself. Thread-safe.
PVC_SDK_API DomainXml parse_domain_xml(std::string_view text);
// Only the bounds above (the first pass of parse_domain_xml): for a reader
// of its own (the API's objects) that must refuse what this reader refuses.
PVC_SDK_API void check_domain_xml_bounds(std::string_view text);
// The same, none instead of the exception (the daemon reads XML it did not
// write; a bad one counts as no facts).
PVC_SDK_API std::optional<DomainXml> try_parse_domain_xml(std::string_view text) noexcept;

// A libvirt memory amount in KiB: `value` a decimal integer, `unit` one of
// libvirt's scale suffixes, case-insensitive (b/byte/bytes; k/KiB, KB;
// M/MiB, MB; G/GiB, GB; T/TiB, TB; P/PiB, PB; E/EiB, EB; none = KiB),
// rounded up to whole KiB as libvirt does. None if either is invalid or
// the amount overflows.
PVC_SDK_API std::optional<std::uint64_t> memory_kib(std::string_view value, std::string_view unit);

// `text` with <uuid>`uuid`</uuid> inserted right after <name>, indented as
// <name> is. Throws DomainXmlError as parse_domain_xml does, or when the
// document has no <name>.
PVC_SDK_API std::string insert_domain_uuid(std::string_view text, const std::string& uuid);

// True for a canonical 8-4-4-4-12 hex UUID (either case).
PVC_SDK_API bool is_uuid(std::string_view s);

}  // namespace pvc
