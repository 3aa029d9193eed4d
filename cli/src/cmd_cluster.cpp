// pvc cluster init | status | maintenance on|off (backup, restore: cmd_backup.cpp)
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <unistd.h>

#include "commands.hpp"
#include "common.hpp"
#include "model.hpp"
#include "pvc/backup.hpp"
#include "pvc/client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

using schema::path;

struct Health {
    long value = 100;
    std::vector<std::string> messages;
};

// The reference client's cluster health arithmetic (node plugin health,
// node and VM states, Ceph health), floored at 0.
Health cluster_health(const std::vector<NodeView>& nodes, const std::vector<std::pair<std::string, std::string>>& vms) {
    Health h;
    for (const auto& n : nodes) {
        if (n.health) h.value -= 100 - *n.health;
        if (n.daemon_state != "run") {
            h.value -= 50;
            h.messages.push_back("cluster: Node " + n.name + " in " + n.daemon_state + " daemon state");
        } else if (n.domain_state != "ready") {
            h.value -= 10;
            h.messages.push_back("cluster: Node " + n.name + " in " + n.domain_state + " domain state");
        }
    }
    for (const auto& [name, state] : vms) {
        if (state == "stop" || state == "fail") {
            h.value -= 10;
            h.messages.push_back("cluster: VM " + name + " in " + state + " state");
        }
    }
    auto ceph = read_opt(path("base.storage.health"));
    if (ceph && !ceph->empty()) {
        try {
            auto j = nlohmann::json::parse(*ceph);
            std::string status = j.value("status", "");
            if (status == "HEALTH_ERR") h.value -= 50;
            if (status == "HEALTH_WARN") h.value -= 10;
            if (status == "HEALTH_ERR" || status == "HEALTH_WARN") h.messages.push_back("ceph: " + status);
        } catch (const nlohmann::json::exception&) {
        }
    }
    if (h.value < 0) h.value = 0;
    return h;
}

void cluster_status(bool json) {
    std::vector<NodeView> nodes;
    for (const auto& n : node_names()) nodes.push_back(read_node(n));
    std::vector<std::pair<std::string, std::string>> vms;
    for (const auto& u : vm_uuids()) vms.emplace_back(read(path("domain.name", {u})), read(path("domain.state", {u})));
    bool maintenance = lenient(read(path("base.config.maintenance")));
    std::string primary = read(path("base.config.primary_node"));
    std::string upstream_ip = read(path("base.config.upstream_ip"));
    std::string version;
    for (const auto& n : nodes)
        if (n.name == primary) version = n.pvc_version;
    Health health = cluster_health(nodes, vms);
    size_t networks = children(path("base.network")).size();

    std::map<std::string, long> node_states, vm_states;
    for (const auto& n : nodes) node_states[n.daemon_state + "," + n.domain_state]++;
    for (const auto& [name, state] : vms) vm_states[state]++;

    if (json) {
        nlohmann::json j;
        j["cluster_health"] = {{"health", maintenance ? nlohmann::json("N/A") : nlohmann::json(health.value)},
                               {"messages", health.messages}};
        j["maintenance"] = maintenance;
        j["primary_node"] = primary;
        j["pvc_version"] = version;
        j["upstream_ip"] = upstream_ip;
        j["nodes"] = {{"total", nodes.size()}};
        for (const auto& [k, v] : node_states) j["nodes"][k] = v;
        j["node_list"] = nlohmann::json::array();
        for (const auto& n : nodes) j["node_list"].push_back(n.to_json());
        j["vms"] = {{"total", vms.size()}};
        for (const auto& [k, v] : vm_states) j["vms"][k] = v;
        j["networks"] = {{"total", networks}};
        print_json(j);
        return;
    }
    std::string health_text = maintenance ? "N/A (maintenance on)" : std::to_string(health.value) + "%";
    print_fields(std::cout, {{"Health", health_text},
                             {"Maintenance", colour_state(maintenance ? "on" : "off")},
                             {"Primary node", primary.empty() ? "-" : primary},
                             {"PVC version", version.empty() ? "-" : version},
                             {"Upstream IP", upstream_ip.empty() ? "-" : upstream_ip},
                             {"Networks", std::to_string(networks)}});
    for (const auto& m : health.messages) std::cout << "  " << m << '\n';
    std::cout << '\n' << bold("Nodes") << " (" << nodes.size() << ")\n";
    Table t({"NAME", "DAEMON", "ROUTER", "DOMAIN", "HEALTH", "VMS"});
    for (const auto& n : nodes)
        t.add({n.name, colour_state(n.daemon_state), colour_state(n.router_state), colour_state(n.domain_state),
               n.health ? std::to_string(*n.health) + "%" : "N/A", std::to_string(n.running_domains.size())});
    t.print(std::cout);
    std::cout << '\n' << bold("VMs") << " (" << vms.size() << ")";
    for (const auto& [state, count] : vm_states) std::cout << "  " << colour_state(state) << ": " << count;
    std::cout << '\n';
}

}  // namespace

void add_cluster_commands(CLI::App& app) {
    auto* cluster = app.add_subcommand("cluster", "Cluster initialisation, status and maintenance mode");
    cluster->require_subcommand(1);
    cluster->footer("Examples:\n  pvc cluster status\n  pvc cluster status --format json\n  pvc cluster maintenance on");

    auto* init = cluster->add_subcommand("init", "Initialise an empty cluster: the base keys, schema version 10");
    struct InitArgs {
        bool overwrite = false, yes = false;
    };
    auto ia = std::make_shared<InitArgs>();
    init->add_flag("-o,--overwrite", ia->overwrite, "Remove and overwrite any existing data (DANGEROUS)");
    init->add_flag("-y,--yes", ia->yes, "Do not ask for confirmation (with --overwrite)");
    init->footer("Creates every missing base key (/schema/version = 10, /config, /nodes, /domains, ...).\n"
                 "Existing data is never overwritten; a cluster at another schema version is refused.\n"
                 "--overwrite first deletes the cluster's trees (/schema /config /logs /nodes /domains\n"
                 "/networks /ceph), as POST /api/v1/initialize?overwrite=true: stop the node daemons first.\n\n"
                 "Examples:\n  pvc --zookeeper pvchv1:2181 cluster init\n"
                 "  pvc cluster init --overwrite --yes");
    init->callback([ia] {
        if (ia->overwrite) {
            confirm(ia->yes, "overwrite the cluster", "Remove and overwrite any existing data of the cluster?",
                    "Aborted.");
            auto a = backup::cluster_initialize(*session(), true);
            if (!a.ok()) throw Failure(a.message);
            std::cout << a.message << std::endl;
            return;
        }
        try {
            init_cluster(*session());
        } catch (const SchemaError& e) {
            throw Failure(e.what());
        }
        std::cout << "Cluster initialised (schema version " << schema::version << ")." << std::endl;
    });

    auto* status = cluster->add_subcommand("status", "Show cluster health, nodes and VM counts by state");
    auto format = std::make_shared<std::string>("table");
    add_format_option(status, *format);
    status->footer("Examples:\n  pvc cluster status\n  pvc cluster status --format json | jq .cluster_health");
    status->callback([format] { cluster_status(*format == "json"); });

    auto* maint = cluster->add_subcommand("maintenance", "Turn maintenance mode on or off (no fencing while on)");
    auto mode_arg = std::make_shared<std::string>();
    maint->add_option("mode", *mode_arg, "on or off")->required()->check(CLI::IsMember({"on", "off"}));
    maint->footer("Writes /config/maintenance = true|false.\n\nExamples:\n  pvc cluster maintenance on\n"
                  "  pvc cluster maintenance off");
    maint->callback([mode_arg] {
        const std::string& mode = *mode_arg;
        if (!client::set_maintenance(*session(), mode == "on"))
            throw Failure("could not write the maintenance flag");
        std::cout << "Maintenance mode " << (mode == "on" ? "enabled" : "disabled") << "." << std::endl;
    });
}

}  // namespace pvc::cli
