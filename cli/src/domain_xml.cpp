#include "domain_xml.hpp"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "common.hpp"

namespace pvc::cli {
namespace {

struct DocFree {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

struct BufFree {
    void operator()(xmlBuffer* b) const { xmlBufferFree(b); }
};

void silent_errors(void*, const char*, ...) {}

bool named(const xmlNode* n, const char* name) {
    return n && n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}

xmlNode* child(xmlNode* parent, const char* name) {
    if (!parent) return nullptr;
    for (xmlNode* c = parent->children; c; c = c->next)
        if (named(c, name)) return c;
    return nullptr;
}

std::string text_of(xmlNode* n) {
    if (!n) return "";
    xmlChar* t = xmlNodeGetContent(n);
    std::string s = t ? reinterpret_cast<const char*>(t) : "";
    xmlFree(t);
    return s;
}

std::string attr(xmlNode* n, const char* name) {
    if (!n) return "";
    xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
    std::string s = v ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    return s;
}

std::string trim(const std::string& s) {
    auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

// libvirt memory units to MiB (libvirt's default unit is KiB).
std::optional<long> to_mib(const std::string& value, std::string unit) {
    auto v = to_long(trim(value));
    if (!v) return std::nullopt;
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
    if (unit.empty() || unit == "k" || unit == "kib") return *v / 1024;
    if (unit == "b" || unit == "bytes") return *v / (1024 * 1024);
    if (unit == "kb") return *v * 1000 / (1024 * 1024);
    if (unit == "m" || unit == "mib") return *v;
    if (unit == "mb") return *v * 1000 * 1000 / (1024 * 1024);
    if (unit == "g" || unit == "gib") return *v * 1024;
    if (unit == "gb") return *v * 1000 * 1000 * 1000 / (1024 * 1024);
    if (unit == "t" || unit == "tib") return *v * 1024 * 1024;
    return std::nullopt;
}

std::string hex_field(const std::string& s) {
    // "0x0000" -> "0000"
    return s.rfind("0x", 0) == 0 ? s.substr(2) : s;
}

}  // namespace

bool is_uuid(const std::string& s) {
    if (s.size() != 36) return false;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return false;
        } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
            return false;
        }
    }
    return true;
}

std::vector<std::string> DomainXml::rbd_list() const {
    std::vector<std::string> out;
    for (const auto& d : disks)
        if (d.type == "rbd" && !d.name.empty()) out.push_back(d.name);
    return out;
}

DomainXml parse_domain_xml(const std::string& text, bool insert_uuid) {
    xmlSetGenericErrorFunc(nullptr, silent_errors);
    xmlResetLastError();
    Doc doc(xmlReadMemory(text.data(), static_cast<int>(text.size()), "domain.xml", nullptr,
                          XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
    if (!doc) {
        std::string why = "not well-formed";
        if (const xmlError* e = xmlGetLastError(); e && e->message) {
            why = trim(e->message);
            if (e->line > 0) why += " at line " + std::to_string(e->line);
        }
        throw Failure("invalid VM XML: " + why);
    }
    xmlNode* root = xmlDocGetRootElement(doc.get());
    if (!named(root, "domain")) throw Failure("invalid VM XML: the root element is not <domain>");

    DomainXml out;
    xmlNode* name = child(root, "name");
    out.name = trim(text_of(name));
    if (!name || out.name.empty()) throw Failure("invalid VM XML: no <name> element");
    if (out.name.find('/') != std::string::npos) throw Failure("invalid VM XML: <name> must not contain '/'");

    xmlNode* uuid = child(root, "uuid");
    out.xml = text;
    if (uuid) {
        out.uuid = trim(text_of(uuid));
        if (!is_uuid(out.uuid))
            throw Failure("invalid VM XML: <uuid> '" + out.uuid + "' is not a UUID (8-4-4-4-12 hex digits)");
        std::transform(out.uuid.begin(), out.uuid.end(), out.uuid.begin(),
                       [](unsigned char c) { return std::tolower(c); });
    } else if (!insert_uuid) {
        throw Failure("invalid VM XML: no <uuid> element");
    } else {
        out.uuid = new_uuid();
        out.uuid_generated = true;
        xmlNode* node = xmlNewDocNode(doc.get(), root->ns, reinterpret_cast<const xmlChar*>("uuid"),
                                      reinterpret_cast<const xmlChar*>(out.uuid.c_str()));
        xmlNode* after = xmlAddNextSibling(name, node);
        // Keep the indentation of the document: repeat the whitespace before <name>.
        if (name->prev && name->prev->type == XML_TEXT_NODE) {
            std::string ws = text_of(name->prev);
            if (trim(ws).empty()) xmlAddPrevSibling(after, xmlNewDocText(doc.get(), reinterpret_cast<const xmlChar*>(ws.c_str())));
        }
        std::unique_ptr<xmlBuffer, BufFree> buf(xmlBufferCreate());
        xmlNodeDump(buf.get(), doc.get(), root, 0, 0);
        out.xml = std::string(reinterpret_cast<const char*>(xmlBufferContent(buf.get())), xmlBufferLength(buf.get()));
        if (!text.empty() && text.back() == '\n') out.xml += '\n';
    }

    if (xmlNode* mem = child(root, "memory")) out.memory_mib = to_mib(text_of(mem), attr(mem, "unit"));
    if (xmlNode* vcpu = child(root, "vcpu")) out.vcpus = to_long(trim(text_of(vcpu)));
    out.description = trim(text_of(child(root, "description")));

    if (xmlNode* devices = child(root, "devices")) {
        for (xmlNode* d = devices->children; d; d = d->next) {
            if (named(d, "disk")) {
                DomainDisk disk;
                xmlNode* src = child(d, "source");
                std::string type = attr(d, "type");
                if (type == "network") {
                    disk.type = attr(src, "protocol");
                    disk.name = attr(src, "name");
                } else if (type == "file") {
                    disk.type = "file";
                    disk.name = attr(src, "file");
                } else {
                    disk.type = type;
                    disk.name = attr(src, "dev");
                }
                disk.target = attr(child(d, "target"), "dev");
                out.disks.push_back(disk);
            } else if (named(d, "interface")) {
                DomainInterface nic;
                nic.type = attr(d, "type");
                nic.mac = attr(child(d, "mac"), "address");
                xmlNode* src = child(d, "source");
                if (nic.type == "bridge") nic.source = attr(src, "bridge");
                else if (nic.type == "direct") nic.source = attr(src, "dev");
                else if (nic.type == "network") nic.source = attr(src, "network");
                else if (nic.type == "hostdev") {
                    xmlNode* addr = child(src, "address");
                    nic.source = hex_field(attr(addr, "domain")) + ":" + hex_field(attr(addr, "bus")) + ":" +
                                 hex_field(attr(addr, "slot")) + "." + hex_field(attr(addr, "function"));
                }
                nic.model = attr(child(d, "model"), "type");
                out.interfaces.push_back(nic);
            }
        }
    }
    return out;
}

}  // namespace pvc::cli
