// pvc vm list | info | define | modify | start | stop | shutdown | restart |
//        disable | migrate | unmigrate | move | remove | log
//
// Every write is the reference client's (docs/wire-contract.md §5.10): the same keys,
// values and transactions, state changes under the kazoo exclusive lock on
// /domains/<uuid>/state held 0.5 s after the write. Input is checked before
// anything is written.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "domain_xml.hpp"
#include "model.hpp"
#include "pvc/client.hpp"
#include "pvc/schema.hpp"
#include "pvc/target.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

using namespace std::chrono_literals;
using schema::path;

struct VmArgs {
    std::string vm, file, node, node_limit, selector, method, profile;
    std::vector<std::string> tags, protected_tags;
    bool autostart = false, no_autostart = false;
    bool wait = false, force = false, live = false, restart = false, yes = false, follow = false, xml = false;
    bool no_resource_check = false;  // define/modify: skip the reference's memory/vCPU admission
    long lines = 100;
    std::string state_filter, node_filter, tag_filter;
    std::string format = "table";  // list, info: --format
    bool json() const { return format == "json"; }
};
// Each vm subcommand binds its own VmArgs, owned by its callback: no value
// is shared between subcommands.
using VmArgsPtr = std::shared_ptr<VmArgs>;

std::string read_file(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw Failure("cannot read file '" + file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// change_state(S) of the reference (pvc/client.hpp): exclusive lock, write, 0.5 s, release.
void change_state(const std::string& uuid, const std::string& state) {
    if (!client::change_vm_state(session(), uuid, state))
        throw Failure("could not write state " + state + " for VM " + uuid);
}

std::string state_of(const std::string& uuid) { return read(path("domain.state", {uuid})); }

bool runs_on(const std::string& uuid, const std::string& node) {
    if (node.empty()) return false;
    for (const auto& d : split(read(path("node.running_domains", {node})), ' '))
        if (d == uuid) return true;
    return false;
}

// Each node named in a comma-separated limit must exist.
std::vector<std::string> checked_limit(const std::string& limit) {
    auto nodes = split(limit, ',');
    for (const auto& n : nodes) require_node(n);
    return nodes;
}

// Memory and vCPU admission of the reference (define, modify).
void check_resources(const DomainXml& x, const std::string& node) {
    auto memory_mib = x.memory_mib();
    if (!memory_mib) throw Failure("invalid VM XML: no valid <memory> element");
    if (!x.vcpus) throw Failure("invalid VM XML: no valid <vcpu> element");
    auto total = to_long(read(path("node.memory.total", {node})));
    if (!total) throw Failure("node " + node + " reports no memory total");
    if (*memory_mib >= *total)
        throw Failure("VM " + x.name + " asks for " + std::to_string(*memory_mib) + " MiB of memory; node " + node +
                      " has " + std::to_string(*total) + " MiB");
    auto st = split(read(path("node.data.static", {node})), ' ');
    auto cpus = st.empty() ? std::nullopt : to_long(st[0]);
    if (!cpus) throw Failure("node " + node + " reports no CPU count");
    if (*cpus - 2 <= *x.vcpus)
        throw Failure("VM " + x.name + " asks for " + std::to_string(*x.vcpus) + " vCPUs; node " + node + " has " +
                      std::to_string(*cpus) + " CPUs (at most " + std::to_string(*cpus - 3) + " vCPUs per VM)");
}

std::optional<std::string> choose_target(const std::optional<std::string>& limit,
                                         const std::optional<std::string>& selector, const std::string& current) {
    target::Request req;
    req.node_limit = limit;
    req.node_selector = selector;
    req.cluster_selector = read(path("base.config.migration_target_selector"));
    req.current_node = current;
    return target::choose(target::read_nodes(*session()), req);
}

// ---- reads ----

void vm_list(const VmArgs& a) {
    std::vector<VmView> vms;
    for (const auto& u : vm_uuids()) {
        VmView v = read_vm(u);
        if (!a.state_filter.empty() && v.state != a.state_filter) continue;
        if (!a.node_filter.empty() && v.node != a.node_filter) continue;
        if (!a.tag_filter.empty()) {
            bool has = false;
            for (const auto& t : v.tags) has = has || t.name == a.tag_filter;
            if (!has) continue;
        }
        if (!a.vm.empty() && v.name.find(a.vm) == std::string::npos && v.uuid.find(a.vm) == std::string::npos) continue;
        vms.push_back(std::move(v));
    }
    std::sort(vms.begin(), vms.end(), [](const VmView& x, const VmView& y) { return x.name < y.name; });
    if (a.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& v : vms) j.push_back(v.to_json());
        print_json(j);
        return;
    }
    Table t({"NAME", "UUID", "STATE", "NODE", "MIGRATED", "VCPUS", "MEMORY", "TAGS"});
    for (const auto& v : vms) {
        std::vector<std::string> tags;
        for (const auto& tag : v.tags) tags.push_back(tag.name);
        t.add({v.name, v.uuid, colour_state(v.state), v.node, v.last_node.empty() ? "no" : "from " + v.last_node,
               v.vcpus ? std::to_string(*v.vcpus) : "?", v.memory_mib ? std::to_string(*v.memory_mib) + " MiB" : "?",
               join(tags, ",")});
    }
    t.print(std::cout);
}

void vm_info(const VmArgs& a) {
    VmView v = read_vm(find_vm(a.vm));
    if (a.json()) {
        print_json(v.to_json(a.xml));
        return;
    }
    std::vector<std::string> tags, nets, disks;
    for (const auto& t : v.tags) tags.push_back(t.name + (t.is_protected ? " (protected)" : ""));
    for (const auto& n : v.interfaces)
        nets.push_back(n["type"].get<std::string>() + ":" + n["source"].get<std::string>() + " " +
                       n["mac"].get<std::string>());
    for (const auto& d : v.disks) disks.push_back(d["target"].get<std::string>() + "=" + d["name"].get<std::string>());
    std::vector<std::pair<std::string, std::string>> f = {
        {"Name", v.name},
        {"UUID", v.uuid},
        {"Description", v.description},
        {"State", colour_state(v.state)},
        {"Node", v.node},
        {"Migrated", v.last_node.empty() ? "no" : "from " + v.last_node},
        {"vCPUs", v.vcpus ? std::to_string(*v.vcpus) : "?"},
        {"Memory", v.memory_mib ? std::to_string(*v.memory_mib) + " MiB" : "?"},
        {"Node limit", v.node_limit.empty() ? "any" : join(v.node_limit, ",")},
        {"Node selector", v.node_selector},
        {"Autostart", v.autostart ? "yes" : "no"},
        {"Migration method", v.migration_method},
        {"Profile", v.profile},
        {"Tags", join(tags, ", ")},
        {"VNC", v.vnc.empty() ? "-" : v.vnc},
        {"Networks", join(nets, ", ")},
        {"Disks", join(disks, ", ")},
    };
    if (!v.failed_reason.empty()) f.insert(f.begin() + 4, {"Failed reason", v.failed_reason});
    print_fields(std::cout, f);
    if (a.xml) std::cout << '\n' << v.xml << (v.xml.empty() || v.xml.back() == '\n' ? "" : "\n");
}

// ---- define / modify / remove ----

void vm_define(const VmArgs& a) {
    VmXml x = read_vm_xml(read_file(a.file), true);
    const std::string& name = x.dom.name;
    if (session()->exists(path("domain.name", {x.uuid})))
        throw Failure("a VM with UUID " + x.uuid + " already exists");
    if (vm_by_name(name)) throw Failure("a VM named '" + name + "' already exists");
    std::vector<std::string> limit = checked_limit(a.node_limit);
    std::string node = a.node;
    if (!node.empty()) {
        require_node(node);
        if (!limit.empty() && std::find(limit.begin(), limit.end(), node) == limit.end())
            throw Failure("node " + node + " is not in the node limit " + join(limit, ","));
    } else {
        auto t = choose_target(limit.empty() ? std::nullopt : std::optional<std::string>(join(limit, ",")),
                               a.selector.empty() ? std::nullopt : std::optional<std::string>(a.selector), "");
        if (!t) throw Failure("no node can take VM " + name + " (no node in run+ready state within the limit); use --node");
        node = *t;
    }
    if (!a.no_resource_check) check_resources(x.dom, node);
    std::string method = a.method.empty() ? "none" : a.method;  // the library makes it shutdown for a hostdev NIC

    client::VmDefinition def;
    def.uuid = x.uuid;
    def.name = name;
    def.xml = x.xml;
    def.node = node;
    if (!a.profile.empty()) def.profile = a.profile;
    def.rbd_list = x.dom.rbd_list();
    def.autostart = a.autostart;
    def.migrate_method = method;
    def.node_limit = join(limit, ",");
    if (!a.selector.empty()) def.node_selector = a.selector;
    for (const auto& t : a.tags) def.tags.emplace_back(t, false);
    for (const auto& t : a.protected_tags) def.tags.emplace_back(t, true);
    try {
        if (!client::define_vm(*session(), def)) throw Failure("could not write VM " + name + " to the cluster");
    } catch (const client::VfInUse& e) {
        throw Failure(std::string(e.what()) + " VM " + name + " was not defined.");
    }
    // Defined all the same: our nodes need none of these; a reference
    // client sharing the cluster does.
    warn_reference_omissions(x);
    const std::string& u = x.uuid;
    std::cout << "Defined VM " << name << " (UUID " << u << (x.uuid_generated ? ", generated" : "") << ") on node "
              << node << "." << std::endl;
}

void vm_modify(const VmArgs& a) {
    std::string u = find_vm(a.vm);
    std::vector<zk::KeyValue> meta;
    if (!a.node_limit.empty()) meta.push_back({path("domain.meta.node_limit", {u}), join(checked_limit(a.node_limit), ",")});
    if (!a.selector.empty()) meta.push_back({path("domain.meta.node_selector", {u}), a.selector});
    if (a.autostart) meta.push_back({path("domain.meta.autostart", {u}), "True"});
    if (a.no_autostart) meta.push_back({path("domain.meta.autostart", {u}), "False"});
    if (!a.profile.empty()) meta.push_back({path("domain.profile", {u}), a.profile});
    if (!a.method.empty()) meta.push_back({path("domain.meta.migrate_method", {u}), a.method});
    if (a.file.empty() && meta.empty())
        throw Failure("nothing to modify: give an XML file and/or metadata options (see --help)", exit_usage);

    std::optional<VmXml> x;
    std::string name = read(path("domain.name", {u}));
    if (!a.file.empty()) {
        x = read_vm_xml(read_file(a.file), false);
        if (x->uuid != u) throw Failure("the XML's <uuid> " + x->uuid + " is not the UUID of VM " + name + " (" + u + ")");
        if (x->dom.name != name)
            throw Failure("the XML renames VM " + name + " to " + x->dom.name + "; renaming is not supported");
        check_resources(x->dom, read(path("domain.node", {u})));
    }
    if (a.restart && x && state_of(u) != "start")
        throw Failure("VM " + name + " is not in state start; cannot restart it (modify without --restart)");
    if (x) {
        try {
            if (!client::write_vm_xml(*session(), u, name, x->dom.rbd_list(), x->xml))
                throw Failure("could not write the new configuration of VM " + name);
        } catch (const client::VfInUse& e) {
            throw Failure(std::string(e.what()) + " VM " + name + " was not modified.");
        }
        std::cout << "Modified the configuration of VM " << name << "." << std::endl;
        warn_reference_omissions(*x);
    }
    if (!meta.empty()) {
        if (!session()->write(meta)) throw Failure("could not write the metadata of VM " + name);
        std::cout << "Modified the metadata of VM " << name << "." << std::endl;
    }
    if (a.restart && x) {
        change_state(u, "restart");
        std::cout << "Restarting VM " << name << "." << std::endl;
    }
}

void vm_remove(const VmArgs& a) {
    std::string u = find_vm(a.vm);
    std::string name = read(path("domain.name", {u}));
    confirm(a.yes, "remove VM " + name, "Remove VM " + name + " (" + u + ") from the cluster?", "not removed");
    std::string rbd = read(path("domain.storage.volumes", {u}));
    if (!client::undefine_vm(session(), u, 1s)) throw Failure("could not remove VM " + name);
    std::cout << "Removed VM " << name << " from the cluster." << std::endl;
    if (!rbd.empty()) std::cout << "Its RBD volumes were left in place: " << rbd << std::endl;
}

// ---- state changes ----

void refuse_if_deleting(const std::string& u, const std::string& state) {
    if (state == "delete") throw Failure("VM " + read(path("domain.name", {u})) + " is being removed");
}

void vm_set_state(const VmArgs& a, const std::string& want) {
    std::string u = find_vm(a.vm);
    std::string name = read(path("domain.name", {u}));
    std::string current = state_of(u);
    refuse_if_deleting(u, current);
    if ((want == "restart" || want == "shutdown") && current != "start")
        throw Failure("VM " + name + " is in state " + current + ", not start; cannot " + want + " it");

    if (want == "disable") {
        if (current == "start") {
            if (a.force) {
                change_state(u, "stop");
                pause(500ms);
            } else {
                change_state(u, "shutdown");
                std::cout << "Shutting down VM " << name << " before disabling it." << std::endl;
                wait_for("VM " + name + " to stop", [&] { return state_of(u) == "stop"; }, 500ms);
            }
        }
        change_state(u, "disable");
        std::cout << "Disabled VM " << name << "." << std::endl;
        return;
    }

    change_state(u, want);
    static const std::map<std::string, std::string> verb = {
        {"start", "Starting"}, {"stop", "Stopping"}, {"shutdown", "Shutting down"}, {"restart", "Restarting"}};
    std::cout << verb.at(want) << " VM " << name << "." << std::endl;
    if (!a.wait) return;

    std::string state;
    if (want == "start") {
        wait_for("VM " + name + " to run", [&] {
            state = state_of(u);
            return state != "start" || runs_on(u, read(path("domain.node", {u})));
        }, 500ms);
        if (state != "start")
            throw Failure("VM " + name + " did not start: state is " + state +
                          (state == "fail" ? " (" + read(path("domain.failed_reason", {u})) + ")" : ""));
        std::cout << "VM " << name << " is running on " << read(path("domain.node", {u})) << "." << std::endl;
    } else if (want == "stop") {
        wait_for("VM " + name + " to stop", [&] {
            state = state_of(u);
            return state != "stop" || !runs_on(u, read(path("domain.node", {u})));
        }, 500ms);
        if (state != "stop") throw Failure("VM " + name + " is now in state " + state + " instead of stop");
        std::cout << "VM " << name << " is stopped." << std::endl;
    } else {
        wait_for("VM " + name + " to leave state " + want, [&] {
            state = state_of(u);
            return state != want;
        }, 500ms);
        std::string expect = want == "restart" ? "start" : "stop";
        if (state != expect) throw Failure("VM " + name + " is now in state " + state + " instead of " + expect);
        std::cout << (want == "restart" ? "Restarted" : "Shut down") << " VM " << name << "." << std::endl;
    }
}

// migrate / move / unmigrate, written as the reference client writes them.
void vm_relocate(const VmArgs& a, const std::string& op) {
    std::string u = find_vm(a.vm);
    std::string name = read(path("domain.name", {u}));
    std::string current = state_of(u);
    refuse_if_deleting(u, current);
    std::string target_state = current != "start" ? current : (a.live ? "migrate-live" : "migrate");
    std::string current_node = read(path("domain.node", {u}));
    std::string last_node = read(path("domain.last_node", {u}));
    std::string target = a.node;
    std::string new_last;

    if (op == "unmigrate") {
        if (last_node.empty()) throw Failure("VM " + name + " has not been migrated; nothing to unmigrate");
        target = last_node;
        new_last = "";
    } else {
        if (op == "migrate" && !last_node.empty() && !a.force)
            throw Failure("VM " + name + " has been migrated already (from " + last_node +
                          "); use --force, unmigrate or move");
        if (!target.empty()) {
            require_node(target);
            std::string limit = read(path("domain.meta.node_limit", {u}));
            auto allowed = split(limit, ',');
            if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), target) == allowed.end())
                throw Failure("node " + target + " is not in the node limit of VM " + name + " (" + limit + ")");
            if (target == current_node) {
                if (op == "move" && !last_node.empty()) {
                    if (!session()->write(path("domain.last_node", {u}), ""))
                        throw Failure("could not write the last node of VM " + name);
                    std::cout << "Made the temporary migration of VM " << name << " permanent." << std::endl;
                    return;
                }
                throw Failure("VM " + name + " is already on node " + current_node);
            }
        } else {
            auto t = target::find_target(*session(), u);
            if (!t) throw Failure("no valid migration target for VM " + name);
            target = *t;
        }
        if (op == "migrate")
            new_last = (!last_node.empty() && a.force) ? last_node : current_node;
        else
            new_last = "";
    }

    try {
        if (!client::relocate_vm(session(), u, target_state, target, new_last))
            throw Failure("could not write the migration of VM " + name);
    } catch (const client::VfInUse& e) {
        throw Failure(std::string(e.what()) + " VM " + name + " was not moved.");
    }
    static const std::map<std::string, std::string> verb = {
        {"migrate", "Migrating"}, {"move", "Permanently migrating"}, {"unmigrate", "Unmigrating"}};
    std::cout << verb.at(op) << " VM " << name << " to node " << target << "." << std::endl;
    if (!a.wait || (target_state != "migrate" && target_state != "migrate-live")) return;
    std::string state;
    wait_for("VM " + name + " to finish migrating", [&] {
        state = state_of(u);
        return state != target_state;
    }, 500ms);
    std::string now_node = read(path("domain.node", {u}));
    // A migration by shutdown passes through `stop` on the target: the
    // source writes it once the VM is off and lets go of the sync lock, then
    // the target starts the VM. The target is given 30 s for that before
    // the result is judged.
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         state == "stop" && now_node == target && std::chrono::steady_clock::now() < until;) {
        pause(500ms);
        state = state_of(u);
        now_node = read(path("domain.node", {u}));
    }
    if (state != "start" || now_node != target)
        throw Failure("migration of VM " + name + " did not complete: state " + state + " on node " + now_node);
    std::cout << "Migrated VM " << name << " to node " << target << "." << std::endl;
}

CLI::App* vm_sub(CLI::App* vm, const std::string& name, const std::string& help, const std::string& footer) {
    auto* c = vm->add_subcommand(name, help);
    c->footer("Examples:\n" + footer);
    return c;
}

// A new subcommand of `vm` with its own arguments.
VmArgsPtr vm_args() { return std::make_shared<VmArgs>(); }

void add_vm_arg(CLI::App* c, VmArgs& a) { c->add_option("vm", a.vm, "VM name or UUID")->required(); }

const std::vector<std::string> kSelectors = target::vm_selector_choices();
const std::vector<std::string> kMethods = {"live", "shutdown", "none"};

}  // namespace

void add_vm_commands(CLI::App& app) {
    auto* vm = app.add_subcommand("vm", "Define, inspect and manage virtual machines");
    vm->require_subcommand(1);
    vm->footer("Examples:\n  pvc vm define web1.xml --node hv1\n  pvc vm start web1 --wait\n  pvc vm list\n"
               "  pvc vm migrate web1 --live --wait\n  pvc vm log web1 --lines 50");

    auto list_args = vm_args();
    auto* list = vm_sub(vm, "list", "List VMs", "  pvc vm list\n  pvc vm list --state start --node hv1\n"
                                                "  pvc vm list web --format json");
    list->add_option("filter", list_args->vm, "Only VMs whose name or UUID contains this text");
    list->add_option("-s,--state", list_args->state_filter, "Only VMs in this state");
    list->add_option("-n,--node", list_args->node_filter, "Only VMs assigned to this node");
    list->add_option("-t,--tag", list_args->tag_filter, "Only VMs with this tag");
    add_format_option(list, list_args->format);
    list->callback([list_args] { vm_list(*list_args); });

    auto info_args = vm_args();
    auto* info = vm_sub(vm, "info", "Show one VM in detail", "  pvc vm info web1\n  pvc vm info web1 --format json");
    add_vm_arg(info, *info_args);
    info->add_flag("-x,--xml", info_args->xml, "Include the libvirt XML");
    add_format_option(info, info_args->format);
    info->callback([info_args] { vm_info(*info_args); });

    auto define_args = vm_args();
    auto* define = vm_sub(vm, "define", "Add a VM to the cluster from a libvirt domain XML file (state stop)",
                          "  pvc vm define web1.xml\n  pvc vm define web1.xml --node hv1 --autostart\n"
                          "  pvc vm define db1.xml --node-limit hv1,hv2 --node-selector mem --migration-method live");
    define->add_option("xml", define_args->file, "libvirt domain XML file (a <uuid> is generated if it has none)")->required();
    define->add_option("-t,--node,--target", define_args->node, "Node to assign the VM to (default: chosen by the selector)");
    define->add_option("-l,--node-limit", define_args->node_limit, "Comma-separated nodes the VM may run on");
    define->add_option("-s,--node-selector", define_args->selector, "Target selector: mem, memprov, load, vcpus, vms, none")
        ->check(CLI::IsMember(kSelectors));
    define->add_flag("-a,--autostart", define_args->autostart, "Start the VM when its node is next readied");
    define->add_flag("--no-resource-check", define_args->no_resource_check,
                     "Skip the memory and vCPU admission (vCPUs < node CPUs - 2), e.g. on small lab nodes");
    define->add_option("-m,--migration-method", define_args->method, "live, shutdown or none (live, then shutdown)")
        ->check(CLI::IsMember(kMethods));
    define->add_option("-g,--tag", define_args->tags, "Add a tag (repeatable)");
    define->add_option("-G,--protected-tag", define_args->protected_tags, "Add a protected tag (repeatable)");
    define->callback([define_args] { vm_define(*define_args); });

    auto modify_args = vm_args();
    auto* modify = vm_sub(vm, "modify", "Replace a VM's XML and/or change its metadata",
                          "  pvc vm modify web1 web1-new.xml --restart\n  pvc vm modify web1 --node-limit hv1,hv2\n"
                          "  pvc vm modify web1 --no-autostart --migration-method shutdown");
    add_vm_arg(modify, *modify_args);
    modify->add_option("xml", modify_args->file, "New libvirt domain XML (same name and UUID)");
    modify->add_flag("-r,--restart", modify_args->restart, "Restart the VM to apply the new XML");
    modify->add_option("-l,--node-limit", modify_args->node_limit, "Comma-separated nodes the VM may run on");
    modify->add_option("-s,--node-selector", modify_args->selector, "mem, memprov, load, vcpus, vms, none")
        ->check(CLI::IsMember(kSelectors));
    auto* as = modify->add_flag("-a,--autostart", modify_args->autostart, "Set autostart");
    modify->add_flag("-A,--no-autostart", modify_args->no_autostart, "Clear autostart")->excludes(as);
    modify->add_option("-m,--migration-method", modify_args->method, "live, shutdown or none")->check(CLI::IsMember(kMethods));
    modify->add_option("-p,--profile", modify_args->profile, "Provisioner profile name");
    modify->callback([modify_args] { vm_modify(*modify_args); });

    for (auto [name, help] : std::vector<std::pair<std::string, std::string>>{
             {"start", "Start a VM on its node"},
             {"stop", "Stop a VM at once (power off)"},
             {"shutdown", "Shut a running VM down gracefully (ACPI)"},
             {"restart", "Restart a running VM gracefully"}}) {
        auto state_args = vm_args();
        auto* c = vm_sub(vm, name, help, "  pvc vm " + name + " web1\n  pvc vm " + name + " web1 --wait");
        add_vm_arg(c, *state_args);
        c->add_flag("-w,--wait", state_args->wait, "Wait until the node has carried it out");
        c->callback([state_args, name = name] { vm_set_state(*state_args, name); });
    }

    auto disable_args = vm_args();
    auto* disable = vm_sub(vm, "disable", "Shut a VM down (or stop it with --force) and mark it disabled",
                           "  pvc vm disable web1\n  pvc vm disable web1 --force");
    add_vm_arg(disable, *disable_args);
    disable->add_flag("-f,--force", disable_args->force, "Stop instead of shutting down");
    disable->callback([disable_args] { vm_set_state(*disable_args, "disable"); });

    auto migrate_args = vm_args();
    auto* migrate = vm_sub(vm, "migrate", "Migrate a VM temporarily to another node (remembering its home)",
                           "  pvc vm migrate web1\n  pvc vm migrate web1 --node hv2 --live --wait\n"
                           "  pvc vm migrate web1 --node hv3 --force");
    add_vm_arg(migrate, *migrate_args);
    migrate->add_option("-t,--node,--target", migrate_args->node, "Target node (default: chosen by the selector)");
    migrate->add_flag("-f,--force", migrate_args->force, "Migrate even if already migrated (keeps the original home)");
    migrate->add_flag("--live,--force-live", migrate_args->live, "Live migration only, never shut down");
    migrate->add_flag("-w,--wait", migrate_args->wait, "Wait until the migration has finished");
    migrate->callback([migrate_args] { vm_relocate(*migrate_args, "migrate"); });

    auto move_args = vm_args();
    auto* move = vm_sub(vm, "move", "Move a VM permanently to another node",
                        "  pvc vm move web1 --node hv2\n  pvc vm move web1 --node <current node>   (make a migration permanent)");
    add_vm_arg(move, *move_args);
    move->add_option("-t,--node,--target", move_args->node, "Target node (default: chosen by the selector)");
    move->add_flag("--live,--force-live", move_args->live, "Live migration only, never shut down");
    move->add_flag("-w,--wait", move_args->wait, "Wait until the migration has finished");
    move->callback([move_args] { vm_relocate(*move_args, "move"); });

    auto unmigrate_args = vm_args();
    auto* unmigrate = vm_sub(vm, "unmigrate", "Return a migrated VM to its home node",
                             "  pvc vm unmigrate web1 --wait");
    add_vm_arg(unmigrate, *unmigrate_args);
    unmigrate->add_flag("--live,--force-live", unmigrate_args->live, "Live migration only, never shut down");
    unmigrate->add_flag("-w,--wait", unmigrate_args->wait, "Wait until the migration has finished");
    unmigrate->callback([unmigrate_args] { vm_relocate(*unmigrate_args, "unmigrate"); });

    auto remove_args = vm_args();
    auto* remove = vm_sub(vm, "remove", "Stop a VM and delete it from the cluster",
                          "  pvc vm remove web1 --yes");
    remove->alias("undefine");
    add_vm_arg(remove, *remove_args);
    remove->add_flag("-y,--yes", remove_args->yes, "Do not ask for confirmation");
    remove->callback([remove_args] { vm_remove(*remove_args); });

    auto log_args = vm_args();
    auto* log = vm_sub(vm, "log", "Show a VM's serial console log", "  pvc vm log web1\n  pvc vm log web1 --lines 20 --follow");
    add_vm_arg(log, *log_args);
    log->add_option("-l,--lines", log_args->lines, "Number of lines to show (default 100)")->check(CLI::PositiveNumber);
    log->add_flag("-f,--follow", log_args->follow, "Keep printing new lines until interrupted");
    log->callback([log_args] { show_log(path("domain.console.log", {find_vm(log_args->vm)}), log_args->lines, log_args->follow); });
}

}  // namespace pvc::cli
