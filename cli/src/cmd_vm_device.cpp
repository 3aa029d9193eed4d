// pvc vm network add|remove and pvc vm volume add|remove: a NIC or a disk
// added to (removed from) a VM's stored XML, as the reference client does,
// and with --live (the default) hot-plugged into (out of) the running VM by
// the task vm.device_attach (vm.device_detach) on the VM's node, which this
// command follows to its end (the reference's client did not wait).
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "model.hpp"
#include "pvc/client.hpp"
#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"

namespace pvc::cli {
namespace {

using schema::path;
using namespace std::chrono_literals;

struct DocFree {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

std::string attr(xmlNode* n, const char* name) {
    if (!n) return "";
    xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
    if (!v) return "";
    std::string s(reinterpret_cast<const char*>(v));
    xmlFree(v);
    return s;
}
bool named(xmlNode* n, const char* name) {
    return n && n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}
xmlNode* child(xmlNode* n, const char* name) {
    for (xmlNode* c = n ? n->children : nullptr; c; c = c->next)
        if (named(c, name)) return c;
    return nullptr;
}
std::vector<xmlNode*> children_named(xmlNode* n, const char* name) {
    std::vector<xmlNode*> out;
    for (xmlNode* c = n ? n->children : nullptr; c; c = c->next)
        if (named(c, name)) out.push_back(c);
    return out;
}
std::string dump(xmlDoc* doc, xmlNode* n) {
    xmlBuffer* b = xmlBufferCreate();
    xmlNodeDump(b, doc, n, 0, 0);
    std::string s(reinterpret_cast<const char*>(xmlBufferContent(b)), static_cast<size_t>(xmlBufferLength(b)));
    xmlBufferFree(b);
    return s;
}
std::string dump(xmlDoc* doc) {
    xmlChar* out = nullptr;
    int n = 0;
    xmlDocDumpMemoryEnc(doc, &out, &n, "UTF-8");  // non-ASCII text stays as it was, not character references
    std::string s(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    xmlFree(out);
    // The stored XML has no declaration (as a client defines it).
    if (s.rfind("<?xml", 0) == 0) s.erase(0, s.find('\n') + 1);
    return s;
}

// A VM whose XML is edited here: its UUID, name, state, node and document.
struct Vm {
    std::string given, uuid, name, state, node;
    Doc doc;
    xmlNode* devices = nullptr;

    explicit Vm(const std::string& vm) : given(vm) {
        uuid = find_vm(vm);
        name = read(path("domain.name", {uuid}));
        state = read(path("domain.state", {uuid}));
        node = read(path("domain.node", {uuid}));
        std::string xml = read(path("domain.xml", {uuid}));
        try {
            parse_domain_xml(xml);  // the bounded check before libxml2 reads it
        } catch (const DomainXmlError& e) {
            throw Failure("the stored XML of VM " + name + " cannot be read: " + e.what());
        }
        doc.reset(xmlReadMemory(xml.data(), static_cast<int>(xml.size()), nullptr, nullptr, XML_PARSE_NONET));
        devices = doc ? child(xmlDocGetRootElement(doc.get()), "devices") : nullptr;
        if (!devices) throw Failure("the stored XML of VM " + name + " has no <devices> element");
    }
    // Parses `text` (made here) into a node of this document.
    xmlNode* make(const std::string& text) {
        xmlNode* list = nullptr;
        if (xmlParseInNodeContext(devices, text.data(), static_cast<int>(text.size()), XML_PARSE_NONET, &list) !=
                XML_ERR_OK ||
            !list)
            throw Failure("internal error: device XML not well-formed: " + text);
        return list;
    }
    // `node` placed after the last device named `kind`, else appended.
    void insert(xmlNode* node, const char* kind) {
        auto same = children_named(devices, kind);
        if (same.empty()) xmlAddChild(devices, node);
        else xmlAddNextSibling(same.back(), node);
    }
    // The modified configuration written back (the VM's keys in one transaction).
    void store() {
        std::string xml = dump(doc.get());
        DomainXml dom;
        try {
            dom = parse_domain_xml(xml);
        } catch (const DomainXmlError& e) {
            throw Failure("the new XML of VM " + name + " is not valid: " + e.what());
        }
        try {
            if (!client::write_vm_xml(*session(), uuid, name, dom.rbd_list(), xml))
                throw Failure("could not write the new configuration of VM " + name);
        } catch (const client::VfInUse& e) {
            throw Failure(std::string(e.what()) + " VM " + name + " was not modified.");
        }
    }
};

// Follows task `id` to its end; its final progress.
tasks::Progress follow(const std::string& id) {
    tasks::Progress p;
    wait_for("task " + id, [&] {
        p = tasks::progress(*session(), id);
        return p.state == tasks::success || p.state == tasks::failure;
    }, 200ms);
    return p;
}

// After the stored XML changed: --live hot-plugs `device` into (out of) the
// VM when it runs; --restart restarts it. Returns the text to print.
std::string apply(Vm& vm, const std::string& device, bool attach, bool live, bool restart, const std::string& what) {
    std::string done = what + (attach ? " added to" : " removed from") + " VM " + vm.name + "'s configuration";
    if (restart) {
        if (vm.state != "start") return done + "; VM " + vm.name + " is not running, so it is not restarted.";
        if (!client::change_vm_state(session(), vm.uuid, "restart"))
            throw Failure(done + ", but the restart could not be written; restart VM " + vm.name + " yourself");
        return done + "; restarting VM " + vm.name + ".";
    }
    if (!live) return done + "; it applies at the VM's next start.";
    if (vm.state != "start") return done + "; VM " + vm.name + " is not running (state " + vm.state + "), nothing to hot-plug.";
    const std::string task = attach ? "vm.device_attach" : "vm.device_detach";
    tasks::Queued q;
    try {
        q = tasks::submit(*session(), task, vm.node, {{"domain", vm.given}, {"xml", device}});
    } catch (const tasks::SubmitError& e) {
        throw Failure(done + ", but the hot-plug could not be queued: " + e.what());
    }
    auto p = follow(q.id);
    if (p.state != tasks::success)
        throw Failure(done + ", but hot-" + (attach ? "attaching" : "detaching") + " it failed (task " + q.id +
                      " on " + q.run_on + "): " + p.status + "; it applies at the VM's next start.");
    return done + " and hot-" + (attach ? "attached to" : "detached from") + " the running VM (task " + q.id + ").";
}

std::string random_mac() {
    std::random_device rd;
    std::uniform_int_distribution<int> octet(16, 238);  // the reference's range
    return fmt::format("52:54:00:{:02x}:{:02x}:{:02x}", octet(rd), octet(rd), octet(rd));
}

bool valid_mac(const std::string& m) {
    if (m.size() != 17) return false;
    for (size_t i = 0; i < m.size(); ++i)
        if (i % 3 == 2 ? m[i] != ':' : !std::isxdigit(static_cast<unsigned char>(m[i]))) return false;
    return true;
}

// The VNI (or upstream/cluster/storage) an interface's bridge serves: vmbr<vni>, br<name>.
std::string bridge_network(const std::string& bridge) {
    if (bridge.rfind("vmbr", 0) == 0) return bridge.substr(4);
    if (bridge.rfind("br", 0) == 0) return bridge.substr(2);
    return "";
}

bool cluster_network(const std::string& net) { return net == "upstream" || net == "cluster" || net == "storage"; }

struct Args {
    std::string vm, target, mac, model = "virtio", disk_id, bus = "scsi", type = "rbd";
    bool live = true, restart = false;
};

void network_add(const Args& a) {
    if (!cluster_network(a.target) && !session()->exists(path("network.vni", {a.target})))
        throw Failure("Network " + a.target + " is not present in the cluster.");
    if (!a.mac.empty() && !valid_mac(a.mac))
        throw Failure("'" + a.mac + "' is not a MAC address (six colon-separated hexadecimal octets)", exit_usage);
    Vm vm(a.vm);
    for (xmlNode* i : children_named(vm.devices, "interface"))
        if (attr(i, "type") == "bridge" && bridge_network(attr(child(i, "source"), "bridge")) == a.target)
            throw Failure("Network '" + a.target + "' is already configured for VM '" + a.vm + "'.");
    std::string mac = a.mac.empty() ? random_mac() : a.mac;
    std::string bridge = (cluster_network(a.target) ? "br" : "vmbr") + a.target;
    std::string device = "<interface type=\"bridge\"><mac address=\"" + mac + "\"/><source bridge=\"" + bridge +
                         "\"/><model type=\"" + a.model + "\"/></interface>";
    vm.insert(vm.make(device), "interface");
    vm.store();
    std::cout << apply(vm, device, true, a.live, a.restart, "Network " + a.target + " (MAC " + mac + ")") << std::endl;
}

void network_remove(const Args& a) {
    if (a.target.empty() && a.mac.empty()) throw Failure("give a network (VNI) or --macaddr", exit_usage);
    Vm vm(a.vm);
    xmlNode* found = nullptr;
    for (xmlNode* i : children_named(vm.devices, "interface")) {
        bool by_mac = !a.mac.empty() && attr(child(i, "mac"), "address") == a.mac;
        bool by_net = a.mac.empty() && attr(i, "type") == "bridge" &&
                      bridge_network(attr(child(i, "source"), "bridge")) == a.target;
        if (by_mac || by_net) {
            found = i;
            break;
        }
    }
    std::string what = a.mac.empty() ? "Network " + a.target : "The NIC with MAC " + a.mac;
    if (!found) throw Failure(what + " is not configured for VM '" + a.vm + "'.");
    std::string device = dump(vm.doc.get(), found);
    xmlUnlinkNode(found);
    xmlFreeNode(found);
    vm.store();
    std::cout << apply(vm, device, false, a.live, a.restart, what) << std::endl;
}

void volume_add(const Args& a) {
    if (a.type != "rbd" && a.type != "file") throw Failure("--type must be rbd or file", exit_usage);
    if (a.type == "rbd") {
        auto slash = a.target.find('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == a.target.size())
            throw Failure("an RBD volume is named POOL/VOLUME, not '" + a.target + "'", exit_usage);
        if (!session()->exists(path("volume.name", {a.target.substr(0, slash), a.target.substr(slash + 1)})))
            throw Failure("Volume " + a.target + " is not present in the cluster.");
    }
    Vm vm(a.vm);
    std::vector<std::string> ids;
    xmlNode* example = nullptr;  // the last disk of the same type: an RBD disk's hosts and auth are copied
    for (xmlNode* d : children_named(vm.devices, "disk")) {
        ids.push_back(attr(child(d, "target"), "dev"));
        xmlNode* src = child(d, "source");
        bool same = a.type == "rbd" ? attr(src, "protocol") == "rbd" : attr(d, "type") == "file";
        if (!same) continue;
        if ((a.type == "rbd" ? attr(src, "name") : attr(src, "file")) == a.target)
            throw Failure("Volume " + a.target + " is already configured for VM " + a.vm + ".");
        example = d;
    }
    std::string dev = a.disk_id;
    if (!dev.empty() && std::find(ids.begin(), ids.end(), dev) != ids.end())
        throw Failure("Manually specified disk ID " + dev + " is already in use for VM " + a.vm + ".");
    if (dev.empty()) {
        // The next free letter after the first disk's prefix (sd, vd ...); sd for a VM without disks.
        std::string prefix = ids.empty() || ids.front().size() < 2 ? (a.bus == "virtio" ? "vd" : "sd")
                                                                   : ids.front().substr(0, ids.front().size() - 1);
        for (char c = 'a'; c <= 'z' && dev.empty(); ++c)
            if (std::find(ids.begin(), ids.end(), prefix + c) == ids.end()) dev = prefix + c;
        if (dev.empty())
            throw Failure("Failed to find a valid disk_id and none specified; too many disks for VM " + a.vm + "?");
    }
    xmlNode* disk = nullptr;
    if (a.type == "rbd") {
        if (!example)
            throw Failure("There are no existing RBD volumes attached to VM " + a.vm +
                          " (its Ceph hosts and secret are copied from one); add the first in its XML (pvc vm modify).");
        disk = xmlCopyNode(example, 1);
        xmlSetProp(child(disk, "source"), BAD_CAST "name", BAD_CAST a.target.c_str());
    } else {
        disk = vm.make("<disk type=\"file\" device=\"disk\"><driver name=\"qemu\" type=\"raw\"/><source file=\"\"/>"
                       "<target dev=\"\" bus=\"\"/></disk>");
        xmlSetProp(child(disk, "source"), BAD_CAST "file", BAD_CAST a.target.c_str());
    }
    xmlNode* target = child(disk, "target");
    if (!target) target = xmlNewChild(disk, nullptr, BAD_CAST "target", nullptr);
    xmlSetProp(target, BAD_CAST "dev", BAD_CAST dev.c_str());
    xmlSetProp(target, BAD_CAST "bus", BAD_CAST a.bus.c_str());
    // A copied disk's <address> would clash with its example's.
    if (xmlNode* addr = child(disk, "address")) {
        if (xmlNode* space = addr->prev; space && xmlIsBlankNode(space)) {
            xmlUnlinkNode(space);
            xmlFreeNode(space);
        }
        xmlUnlinkNode(addr);
        xmlFreeNode(addr);
    }
    vm.insert(disk, "disk");
    std::string device = dump(vm.doc.get(), disk);
    vm.store();
    std::cout << apply(vm, device, true, a.live, a.restart, "Volume " + a.target + " (" + dev + ")") << std::endl;
}

void volume_remove(const Args& a) {
    Vm vm(a.vm);
    xmlNode* found = nullptr;
    for (xmlNode* d : children_named(vm.devices, "disk")) {
        xmlNode* src = child(d, "source");
        if (attr(src, "name") == a.target || attr(src, "file") == a.target || attr(src, "dev") == a.target) {
            found = d;
            break;
        }
    }
    if (!found) throw Failure("Volume " + a.target + " is not configured for VM " + a.vm + ".");
    std::string device = dump(vm.doc.get(), found);
    xmlUnlinkNode(found);
    xmlFreeNode(found);
    vm.store();
    std::cout << apply(vm, device, false, a.live, a.restart, "Volume " + a.target) << std::endl;
}

void common_flags(CLI::App* c, Args& a) {
    c->add_flag("-l,--live,!-L,!--no-live", a.live,
                "Hot-plug the change into the running VM (default), through a task on its node");
    c->add_flag("-r,--restart", a.restart, "Restart the VM to apply the change (instead of hot-plugging it)");
}

}  // namespace

void add_vm_device_commands(CLI::App& app) {
    auto* vm = app.get_subcommand("vm");
    const std::string live_note =
        "With --live (default) and the VM running, the change is hot-plugged by a task on the VM's node\n"
        "(pvc cluster task shows it); the command waits for it and fails (exit 1) if it fails: the\n"
        "stored configuration has changed all the same and applies at the VM's next start.";

    auto* network = vm->add_subcommand("network", "Add or remove a VM's network interfaces");
    network->require_subcommand(1);
    auto* nadd = network->add_subcommand("add", "Add a NIC on network NET (a VNI, or upstream/cluster/storage)");
    auto na = std::make_shared<Args>();
    nadd->add_option("vm", na->vm, "VM name or UUID")->required();
    nadd->add_option("net", na->target, "Network VNI, or upstream, cluster or storage")->required();
    nadd->add_option("-a,--macaddr", na->mac, "MAC address (default: a random 52:54:00:xx:xx:xx)");
    nadd->add_option("-m,--model", na->model, "libvirt NIC model")->capture_default_str();
    common_flags(nadd, *na);
    nadd->footer("Adds <interface type='bridge'> on bridge vmbr<NET> (br<NET> for the cluster networks).\n" +
                 live_note + "\n\nExamples:\n  pvc vm network add web1 100\n  pvc vm network add web1 100 --no-live");
    nadd->callback([na] { network_add(*na); });

    auto* nremove = network->add_subcommand("remove", "Remove the NIC on network NET (or the one with --macaddr)");
    auto nr = std::make_shared<Args>();
    nremove->add_option("vm", nr->vm, "VM name or UUID")->required();
    nremove->add_option("net", nr->target, "Network VNI, or upstream, cluster or storage");
    nremove->add_option("-a,--macaddr", nr->mac, "The NIC's MAC address (instead of NET)");
    common_flags(nremove, *nr);
    nremove->footer(live_note + "\n\nExamples:\n  pvc vm network remove web1 100\n"
                                "  pvc vm network remove web1 --macaddr 52:54:00:12:34:56");
    nremove->callback([nr] { network_remove(*nr); });

    auto* volume = vm->add_subcommand("volume", "Add or remove a VM's disks");
    volume->require_subcommand(1);
    auto* vadd = volume->add_subcommand("add", "Add VOLUME as a disk (an RBD POOL/VOLUME, or a file path)");
    auto va = std::make_shared<Args>();
    vadd->add_option("vm", va->vm, "VM name or UUID")->required();
    vadd->add_option("volume", va->target, "POOL/VOLUME (type rbd) or a file path (type file)")->required();
    vadd->add_option("-d,--disk-id", va->disk_id, "Target device (default: the next free one, sdb, vdc ...)");
    vadd->add_option("-b,--bus", va->bus, "Target bus")->capture_default_str()->check(
        CLI::IsMember({"scsi", "ide", "usb", "virtio"}));
    vadd->add_option("-t,--type", va->type, "Volume type")->capture_default_str()->check(CLI::IsMember({"rbd", "file"}));
    common_flags(vadd, *va);
    vadd->footer("An RBD disk copies the VM's last RBD disk (Ceph hosts, secret) with the new volume's name.\n" +
                 live_note + "\n\nExamples:\n  pvc vm volume add web1 vms/web1_data\n"
                             "  pvc vm volume add web1 /srv/images/scratch.img --type file --bus virtio");
    vadd->callback([va] { volume_add(*va); });

    auto* vremove = volume->add_subcommand("remove", "Remove the disk of VOLUME (POOL/VOLUME or a file path)");
    auto vr = std::make_shared<Args>();
    vremove->add_option("vm", vr->vm, "VM name or UUID")->required();
    vremove->add_option("volume", vr->target, "POOL/VOLUME or a file path")->required();
    common_flags(vremove, *vr);
    vremove->footer(live_note + "\n\nExamples:\n  pvc vm volume remove web1 vms/web1_data");
    vremove->callback([vr] { volume_remove(*vr); });
}

}  // namespace pvc::cli
