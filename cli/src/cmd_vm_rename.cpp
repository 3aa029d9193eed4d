// pvc vm rename VM NEW_NAME: a stopped VM's new name, in its name key and
// its XML's <name> element, in one transaction (as the API's POST
// /vm/<vm>/rename); its RBD volumes keep their names.
#include <algorithm>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "model.hpp"
#include "pvc/client.hpp"
#include "pvc/schema.hpp"

namespace pvc::cli {

void add_vm_rename_command(CLI::App& app) {
    auto* vm = app.get_subcommand("vm");
    auto* rename = vm->add_subcommand("rename", "Rename a stopped or disabled VM");
    struct Args {
        std::string vm, new_name;
    };
    auto a = std::make_shared<Args>();
    rename->add_option("vm", a->vm, "VM name or UUID")->required();
    rename->add_option("new_name", a->new_name, "The new name")->required();
    rename->footer("Changes the VM's name and its XML's <name>; state, node and metadata stay. Its RBD volumes\n"
                   "keep their names (the XML names them).\n\nExamples:\n  pvc vm rename web1 web-old");
    rename->callback([a] {
        using schema::path;
        const std::string& n = a->new_name;
        if (!client::is_safe_name(n) || n.size() > 255 ||
            std::any_of(n.begin(), n.end(), [](char ch) { return ch == '<' || ch == '>' || ch == '&'; }))
            throw Failure("'" + n + "' is not a valid VM name", exit_usage);
        if (vm_by_name(n)) throw Failure("A VM named '" + n + "' is already present in the cluster");
        std::string u = find_vm(a->vm);
        std::string state = read(path("domain.state", {u}));
        if (state != "stop" && state != "disable")
            throw Failure("VM '" + a->vm + "' is not in stopped state; VMs cannot be renamed while running.");
        std::string old_name = read(path("domain.name", {u}));
        std::string xml = read(path("domain.xml", {u}));
        // The domain's own <name>: the first one, before <devices>.
        size_t devices = xml.find("<devices");
        size_t open = xml.find("<name>");
        size_t close = open == std::string::npos ? open : xml.find("</name>", open);
        if (open == std::string::npos || close == std::string::npos || (devices != std::string::npos && open > devices) ||
            xml.compare(open + 6, close - open - 6, old_name) != 0)
            throw Failure("the XML of VM '" + a->vm + "' has no <name> element naming it; not renamed");
        xml.replace(open + 6, close - open - 6, n);
        if (!client::write_vm_xml(*session(), u, n, split(read(path("domain.storage.volumes", {u})), ','), xml))
            throw Failure("the write was refused; try again");
        std::cout << "Renamed VM " << old_name << " to " << n << "." << std::endl;
    });
}

}  // namespace pvc::cli
