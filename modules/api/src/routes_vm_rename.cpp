// POST /vm/<vm>/rename: a stopped VM gets a new name. The reference
// replaced the old name as a regular expression across the whole XML and
// the volume names, then undefined and redefined the VM (a short name
// corrupted both, a failed define lost the VM, `disable` became `stop`, and
// a missing or taken name answered 200 with a body of 400). Ours changes
// the domain XML's <name> element and the VM's name key, with its rbdlist,
// in one transaction; nothing is undefined, the state is kept, and the
// RBD volumes keep their names (they are renamed with `pvc storage volume`
// if wanted; the VM's XML names them, so it stays right either way).
#include <algorithm>

#include "objects.hpp"
#include "pvc/client.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "route_ctx.hpp"
#include "routes.hpp"

namespace pvc::api {

using schema::path;

namespace {

HttpResponse rename_message(unsigned status, const std::string& text) {
    return {status, "application/json", dump(Json{{"message", text}}) + "\n", {}};
}

// Where the domain's own <name> element's text is in `xml` (its first
// <name> child of <domain>, before <devices>); npos when not found.
std::pair<size_t, size_t> name_text(const std::string& xml) {
    size_t devices = xml.find("<devices");
    size_t open = xml.find("<name>");
    if (open == std::string::npos || (devices != std::string::npos && open > devices)) return {std::string::npos, 0};
    size_t start = open + 6;
    size_t close = xml.find("</name>", start);
    if (close == std::string::npos) return {std::string::npos, 0};
    return {start, close - start};
}

}  // namespace

HttpResponse Api::vm_rename(Ctx& c) {
    auto given = c.p("new_name");
    if (!given || given->empty()) return rename_message(400, "A new VM name must be specified");
    const std::string& new_name = *given;
    const std::string& vm = c.args[0];
    if (find_vm(c, new_name))
        return rename_message(400, "A VM named '" + new_name + "' is already present in the cluster");
    auto uuid = find_vm(c, vm);
    if (!uuid) return rename_message(400, "ERROR: Could not find VM '" + vm + "' in the cluster!");
    // A name is one znode's data and an XML text: no control characters, no
    // markup, no path separator.
    if (!client::is_safe_name(new_name) || new_name.size() > 255 ||
        std::any_of(new_name.begin(), new_name.end(), [](char ch) { return ch == '<' || ch == '>' || ch == '&'; }))
        return rename_message(400, "ERROR: '" + new_name + "' is not a valid VM name.");
    std::string state = read_key(path("domain.state", {*uuid}));
    if (state != "stop" && state != "disable")
        return rename_message(400, "ERROR: VM '" + vm + "' is not in stopped state; VMs cannot be renamed while running.");
    std::string old_name = read_key(path("domain.name", {*uuid}));
    std::string xml = read_key(path("domain.xml", {*uuid}));
    auto [at, len] = name_text(xml);
    if (at == std::string::npos || xml.compare(at, len, old_name) != 0)
        return rename_message(400, "ERROR: The XML of VM '" + vm + "' has no <name> element naming it; not renamed.");
    xml.replace(at, len, new_name);
    std::vector<std::string> volumes = split(read_key(path("domain.storage.volumes", {*uuid})), ',');
    bool ok = false;
    try {
        ok = client::write_vm_xml(*zk_, *uuid, new_name, volumes, xml);
    } catch (const std::exception& e) {
        log_.warn("API: renaming VM {} failed: {}", vm, e.what());
    }
    if (!ok) return rename_message(400, "ERROR: Failed to rename VM '" + vm + "': the write was refused; try again.");
    settle(std::vector<zk::KeyValue>{{path("domain.name", {*uuid}), new_name}, {path("domain.xml", {*uuid}), xml}});
    return rename_message(200, "Successfully renamed VM '" + vm + "' to '" + new_name + "'.");
}

}  // namespace pvc::api
