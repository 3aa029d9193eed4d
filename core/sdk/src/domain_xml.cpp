#include "pvc/domain_xml.hpp"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <memory>
#include <mutex>

#include "pvc/strings.hpp"
#include "pvc/zk.hpp"

namespace pvc {
namespace {

struct DocFree {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

struct CtxtFree {
    void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};

struct BufFree {
    void operator()(xmlBuffer* b) const { xmlBufferFree(b); }
};

const xmlChar* xml_str(const char* s) { return reinterpret_cast<const xmlChar*>(s); }

bool named(const xmlNode* n, const char* name) {
    return n && n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, xml_str(name)) == 0;
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
    xmlChar* v = xmlGetProp(n, xml_str(name));
    std::string s = v ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    return s;
}

std::optional<long> to_long(const std::string& s) {
    long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

// "0x0000" -> "0000"
std::string hex_field(const std::string& s) { return s.rfind("0x", 0) == 0 ? s.substr(2) : s; }

[[noreturn]] void refuse(const std::string& why) { throw DomainXmlError("invalid VM XML: " + why); }

std::string over(const char* what, std::size_t limit) {
    return std::string(what) + " (the limit is " + std::to_string(limit) + ")";
}

// Where `t` stops being UTF-8 (npos: nowhere). Whatever a document
// declares, it is read as UTF-8: libxml2 would otherwise switch on its own to
// an encoding guessed from the first bytes (UTF-16, UCS-4, EBCDIC) in which
// the first pass, reading ASCII markup, sees no markup at all.
std::size_t first_non_utf8(std::string_view t) {
    for (std::size_t i = 0; i < t.size();) {
        auto c = static_cast<unsigned char>(t[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!len || i + len > t.size()) return i;
        for (std::size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(t[i + k]) & 0xc0) != 0x80) return i;
        auto c1 = static_cast<unsigned char>(t[i + 1]);
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90))
            return i;  // overlong, a surrogate, over U+10FFFF
        i += len;
    }
    return std::string_view::npos;
}

// A document type declaration seen although the first pass refuses them
// (defence in depth): the parser stops before its internal subset.
void stop_at_doctype(void* ctx, const xmlChar*, const xmlChar*, const xmlChar*) {
    xmlStopParser(static_cast<xmlParserCtxtPtr>(ctx));
}

// Parses `text` into a document; the error of this parse (not another
// thread's) names the problem.
Doc read_document(std::string_view text) {
    check_domain_xml_bounds(text);
    // libxml2 must be initialised once before threads use it.
    static std::once_flag init;
    std::call_once(init, [] { xmlInitParser(); });
    std::unique_ptr<xmlParserCtxt, CtxtFree> ctxt(xmlNewParserCtxt());
    if (!ctxt) throw DomainXmlError("invalid VM XML: out of memory");
    if (text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw DomainXmlError("invalid VM XML: too large");
    ctxt->sax->internalSubset = stop_at_doctype;
    // UTF-8 whatever the document declares (the first pass read it so); no
    // network, no entity substitution (XML_PARSE_NOENT), no "huge" mode.
    Doc doc(xmlCtxtReadMemory(ctxt.get(), text.data(), static_cast<int>(text.size()), "domain.xml", "UTF-8",
                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_IGNORE_ENC));
    if (doc && (doc->intSubset || doc->extSubset)) refuse("a document type declaration (<!DOCTYPE>) is not accepted");
    if (!doc) {
        std::string why = "not well-formed";
        if (const xmlError* e = xmlCtxtGetLastError(ctxt.get()); e && e->message) {
            why = trim(e->message);
            if (e->line > 0) why += " at line " + std::to_string(e->line);
        }
        throw DomainXmlError("invalid VM XML: " + why);
    }
    if (!named(xmlDocGetRootElement(doc.get()), "domain"))
        throw DomainXmlError("invalid VM XML: the root element is not <domain>");
    return doc;
}

DomainDisk read_disk(xmlNode* d) {
    DomainDisk disk;
    disk.type = attr(d, "type");
    xmlNode* src = child(d, "source");
    if (disk.type == "network") {
        disk.protocol = attr(src, "protocol");
        disk.source = attr(src, "name");
    } else if (disk.type == "file") {
        disk.source = attr(src, "file");
    } else {
        disk.source = attr(src, "dev");
    }
    disk.target = attr(child(d, "target"), "dev");
    return disk;
}

DomainInterface read_interface(xmlNode* d) {
    DomainInterface nic;
    nic.type = attr(d, "type");
    nic.mac = attr(child(d, "mac"), "address");
    xmlNode* src = child(d, "source");
    if (nic.type == "bridge") {
        nic.source = attr(src, "bridge");
    } else if (nic.type == "direct") {
        nic.source = attr(src, "dev");
    } else if (nic.type == "network") {
        nic.source = attr(src, "network");
    } else if (nic.type == "hostdev") {
        xmlNode* addr = child(src, "address");
        nic.source = hex_field(attr(addr, "domain")) + ":" + hex_field(attr(addr, "bus")) + ":" +
                     hex_field(attr(addr, "slot")) + "." + hex_field(attr(addr, "function"));
        if (xmlNode* dev = child(d, "sriov_device")) nic.sriov_device = trim(text_of(dev));
    }
    nic.target = attr(child(d, "target"), "dev");
    nic.model = attr(child(d, "model"), "type");
    return nic;
}

std::optional<std::uint64_t> memory_of(xmlNode* n) {
    if (!n) return std::nullopt;
    return memory_kib(text_of(n), attr(n, "unit"));
}

}  // namespace

// A document the bounds accept can be stored as one ZooKeeper value.
static_assert(DomainXmlLimits::max_bytes == zk::max_value_bytes);

void check_domain_xml_bounds(std::string_view t) {
    using L = DomainXmlLimits;
    if (t.size() > L::max_bytes)
        refuse("the document is " + std::to_string(t.size()) + " bytes, " + over("too large", L::max_bytes));
    if (t.find('\0') != std::string_view::npos) refuse("a NUL byte (the document must be UTF-8)");
    if (auto bad = first_non_utf8(t); bad != std::string_view::npos)
        refuse("bytes that are not UTF-8 at offset " + std::to_string(bad) + " (the document must be UTF-8)");
    auto text_run = [&](std::size_t from, std::size_t to) {
        if (to - from > L::max_text_bytes) refuse(over("a text of more bytes than allowed", L::max_text_bytes));
    };
    std::size_t depth = 0, elements = 0, i = 0;
    const std::size_t n = t.size();
    while (i < n) {
        std::size_t lt = t.find('<', i);
        if (lt == std::string_view::npos) lt = n;
        text_run(i, lt);
        if (lt == n) break;
        std::string_view at = t.substr(lt);
        // Comments, CDATA sections and processing instructions end at their
        // first terminator, as XML says; an unterminated one is left to libxml2.
        auto skip = [&](std::size_t open, std::string_view close, bool is_text) {
            std::size_t end = t.find(close, lt + open);
            if (end == std::string_view::npos) end = n;
            if (is_text) text_run(lt + open, end);
            i = end == n ? n : end + close.size();
        };
        if (at.substr(0, 4) == "<!--") {
            skip(4, "-->", false);
        } else if (at.substr(0, 9) == "<![CDATA[") {
            skip(9, "]]>", true);
        } else if (at.substr(0, 2) == "<?") {
            skip(2, "?>", false);
        } else if (at.substr(0, 2) == "<!") {
            refuse(at.substr(0, 9) == "<!DOCTYPE" ? "a document type declaration (<!DOCTYPE>) is not accepted"
                                                  : "a markup declaration (<!...>) is not accepted");
        } else if (at.substr(0, 2) == "</") {
            std::size_t end = t.find('>', lt);
            if (depth > 0) --depth;
            i = end == std::string_view::npos ? n : end + 1;
        } else {
            if (++elements > L::max_elements) refuse(over("more elements than allowed", L::max_elements));
            // The start tag, to its '>' outside quotes: each '=' outside
            // quotes is one attribute (in a well-formed tag).
            std::size_t attributes = 0, value_at = 0, j = lt + 1;
            char quote = 0;
            for (; j < n; ++j) {
                char c = t[j];
                if (quote) {
                    if (c != quote) continue;
                    if (j - value_at > L::max_attribute_bytes)
                        refuse(over("an attribute value of more bytes than allowed", L::max_attribute_bytes));
                    quote = 0;
                } else if (c == '"' || c == '\'') {
                    quote = c;
                    value_at = j + 1;
                } else if (c == '=') {
                    if (++attributes > L::max_attributes)
                        refuse(over("more attributes on one element than allowed", L::max_attributes));
                } else if (c == '>') {
                    break;
                }
            }
            if (quote && n - value_at > L::max_attribute_bytes)
                refuse(over("an attribute value of more bytes than allowed", L::max_attribute_bytes));
            if (j >= n) break;  // unterminated: libxml2 says so
            if (t[j - 1] != '/' && ++depth > L::max_depth)
                refuse(over("elements nested deeper than allowed", L::max_depth));
            i = j + 1;
        }
    }
}

std::string DomainInterface::sriov_vf() const {
    if (type == "direct") return source;
    if (type == "hostdev") return sriov_device;
    return "";
}

std::optional<std::uint64_t> memory_kib(std::string_view value, std::string_view unit) {
    std::string v = trim(value);
    std::uint64_t amount = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), amount);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return std::nullopt;

    // libvirt's virScaleInteger: a suffix's first letter is the power of the
    // base, "iB" or nothing after it means 1024, "B" means 1000.
    std::string u = lower(trim(unit));
    std::uint64_t scale = 1;
    if (u.empty()) {
        scale = 1024;  // libvirt's default unit for memory: KiB
    } else if (u == "b" || u == "byte" || u == "bytes") {
        scale = 1;
    } else {
        std::uint64_t base = 0;
        std::string_view rest = std::string_view(u).substr(1);
        if (rest.empty() || rest == "ib") base = 1024;
        else if (rest == "b") base = 1000;
        else return std::nullopt;
        static constexpr std::string_view powers = "kmgtpe";
        auto power = powers.find(u[0]);
        if (power == std::string_view::npos) return std::nullopt;
        for (std::size_t i = 0; i <= power; ++i) scale *= base;
    }
    if (amount > std::numeric_limits<std::uint64_t>::max() / scale) return std::nullopt;
    std::uint64_t bytes = amount * scale;
    return bytes / 1024 + (bytes % 1024 ? 1 : 0);
}

std::optional<long> DomainXml::memory_mib() const {
    if (!memory_kib) return std::nullopt;
    return static_cast<long>(*memory_kib / 1024);
}

std::vector<std::string> DomainXml::rbd_list() const {
    std::vector<std::string> out;
    for (const auto& d : disks)
        if (d.type == "network" && d.protocol == "rbd" && !d.source.empty()) out.push_back(d.source);
    return out;
}

DomainXml parse_domain_xml(std::string_view text) {
    Doc doc = read_document(text);
    xmlNode* root = xmlDocGetRootElement(doc.get());

    DomainXml out;
    out.name = trim(text_of(child(root, "name")));
    if (xmlNode* uuid = child(root, "uuid")) out.uuid = trim(text_of(uuid));
    out.description = trim(text_of(child(root, "description")));
    out.memory_kib = memory_of(child(root, "memory"));
    out.current_memory_kib = memory_of(child(root, "currentMemory"));
    if (xmlNode* vcpu = child(root, "vcpu")) {
        out.vcpus = to_long(trim(text_of(vcpu)));
        if (std::string current = attr(vcpu, "current"); !current.empty()) out.current_vcpus = to_long(trim(current));
    }

    if (xmlNode* type = child(child(root, "os"), "type")) {
        out.os_type = trim(text_of(type));
        out.arch = attr(type, "arch");
        out.machine = attr(type, "machine");
    }

    if (xmlNode* devices = child(root, "devices")) {
        for (xmlNode* d = devices->children; d; d = d->next) {
            if (named(d, "emulator") && out.emulator.empty()) {
                out.emulator = trim(text_of(d));
            } else if (named(d, "console") && out.console_type.empty()) {
                out.console_type = attr(d, "type");
            } else if (named(d, "disk")) {
                out.disks.push_back(read_disk(d));
            } else if (named(d, "interface")) {
                out.interfaces.push_back(read_interface(d));
            } else if (named(d, "graphics") && !out.graphics) {
                out.graphics = DomainGraphics{attr(d, "type"), attr(d, "listen"), attr(d, "port")};
            }
        }
    }
    return out;
}

std::optional<DomainXml> try_parse_domain_xml(std::string_view text) noexcept {
    try {
        return parse_domain_xml(text);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::string insert_domain_uuid(std::string_view text, const std::string& uuid) {
    Doc doc = read_document(text);
    xmlNode* root = xmlDocGetRootElement(doc.get());
    xmlNode* name = child(root, "name");
    if (!name) throw DomainXmlError("invalid VM XML: no <name> element");
    xmlNode* node = xmlNewDocNode(doc.get(), root->ns, xml_str("uuid"), xml_str(uuid.c_str()));
    xmlNode* after = xmlAddNextSibling(name, node);
    // Keep the indentation of the document: repeat the whitespace before <name>.
    if (name->prev && name->prev->type == XML_TEXT_NODE) {
        std::string ws = text_of(name->prev);
        if (trim(ws).empty()) xmlAddPrevSibling(after, xmlNewDocText(doc.get(), xml_str(ws.c_str())));
    }
    std::unique_ptr<xmlBuffer, BufFree> buf(xmlBufferCreate());
    xmlNodeDump(buf.get(), doc.get(), root, 0, 0);
    std::string out(reinterpret_cast<const char*>(xmlBufferContent(buf.get())), xmlBufferLength(buf.get()));
    if (!text.empty() && text.back() == '\n') out += '\n';
    return out;
}

bool is_uuid(std::string_view s) {
    if (s.size() != 36) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return false;
        } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
            return false;
        }
    }
    return true;
}

}  // namespace pvc
