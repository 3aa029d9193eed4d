// pvc node list | info | flush | ready | primary | secondary | log
#include <iostream>
#include <memory>
#include <set>

#include "commands.hpp"
#include "common.hpp"
#include "model.hpp"
#include "pvc/client.hpp"
#include "pvc/schema.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

using namespace std::chrono_literals;
using schema::path;

// The arguments of one node subcommand: each subcommand binds its own
// instance (owned by its callback), so no value leaks between commands.
struct NodeArgs {
    std::string node;
    bool wait = false;
    long lines = 100;
    bool follow = false;
    std::string format = "table";
    bool json() const { return format == "json"; }
};

std::string health_text(const NodeView& n) { return n.health ? std::to_string(*n.health) + "%" : "N/A"; }

void node_list(const NodeArgs& args) {
    std::vector<NodeView> nodes;
    for (const auto& n : node_names()) nodes.push_back(read_node(n));
    if (args.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& n : nodes) j.push_back(n.to_json());
        print_json(j);
        return;
    }
    Table t({"NAME", "VERSION", "HEALTH", "DAEMON", "ROUTER", "DOMAIN", "VMS", "CPUS", "VCPUS", "LOAD", "MEM TOTAL",
             "USED", "FREE", "ALLOC", "PROV"});
    char load[32];
    for (const auto& n : nodes) {
        std::snprintf(load, sizeof load, "%.2f", n.load);
        t.add({n.name, n.pvc_version, health_text(n), colour_state(n.daemon_state), colour_state(n.router_state),
               colour_state(n.domain_state), std::to_string(n.domains_count), n.cpu_count, std::to_string(n.vcpu_alloc),
               load, std::to_string(n.mem_total), std::to_string(n.mem_used), std::to_string(n.mem_free),
               std::to_string(n.mem_alloc), std::to_string(n.mem_prov)});
    }
    t.print(std::cout);
}

void node_info(const NodeArgs& args) {
    require_node(args.node);
    NodeView n = read_node(args.node);
    if (args.json()) {
        print_json(n.to_json());
        return;
    }
    char load[32];
    std::snprintf(load, sizeof load, "%.2f", n.load);
    print_fields(std::cout,
                 {{"Name", n.name},
                  {"PVC version", n.pvc_version},
                  {"Daemon mode", n.mode},
                  {"Daemon state", colour_state(n.daemon_state)},
                  {"Router state", colour_state(n.router_state)},
                  {"Domain state", colour_state(n.domain_state)},
                  {"Health", health_text(n)},
                  {"Health plugins", join(n.health_plugins, " ")},
                  {"Kernel", n.kernel + " " + n.os + " " + n.arch},
                  {"CPUs", n.cpu_count},
                  {"Load", load},
                  {"VMs running", std::to_string(n.running_domains.size()) + " (" + std::to_string(n.domains_count) +
                                      " libvirt domains)"},
                  {"vCPUs allocated", std::to_string(n.vcpu_alloc)},
                  {"Memory (MiB)", "total " + std::to_string(n.mem_total) + ", used " + std::to_string(n.mem_used) +
                                       ", free " + std::to_string(n.mem_free) + ", allocated " +
                                       std::to_string(n.mem_alloc) + ", provisioned " + std::to_string(n.mem_prov)},
                  {"Running VMs", join(n.running_domains, " ")}});
}

// flush / ready: write the request unless the node is already there; with
// --wait follow the running list until the domain state leaves the request.
void node_domainstate(const NodeArgs& args, const std::string& request, const std::string& done_state) {
    require_node(args.node);
    const std::string key = path("node.state.domain", {args.node});
    std::string current = read(key);
    const bool flush = request == "flush";
    if (current == done_state) {
        std::cout << "Node " << args.node << " is already " << done_state << "." << std::endl;
        return;
    }
    if (!client::set_node_domain_state(*session(), args.node, request)) throw Failure("could not write the domain state of node " + args.node);
    std::cout << (flush ? "Removing node " + args.node + " from active service."
                        : "Restoring node " + args.node + " to active service.")
              << std::endl;
    if (!args.wait) return;
    long last_count = -1;
    std::string state;
    wait_for(
        "node " + args.node + " to leave domain state " + request,
        [&] {
            state = read(key);
            return state != request;
        },
        1s,
        [&] {
            long count = static_cast<long>(read_node(args.node).running_domains.size());
            if (count != last_count) {
                std::cout << "  " << args.node << ": " << count << " VM(s) running" << std::endl;
                last_count = count;
            }
        });
    if (state != done_state)
        throw Failure("node " + args.node + " left " + request + " for '" + state + "' instead of " + done_state);
    std::cout << (flush ? "Removed node " + args.node + " from active service."
                        : "Restored node " + args.node + " to active service.")
              << std::endl;
}

// primary / secondary: ask for a hand-over through /config/primary_node.
void node_router(const NodeArgs& args, const std::string& want) {
    require_node(args.node);
    if (read(path("node.mode", {args.node})) == "hypervisor")
        throw Failure("cannot change the router mode of non-coordinator node " + args.node);
    if (read(path("node.state.daemon", {args.node})) != "run")
        throw Failure("node " + args.node + " is not active (daemon state is not run)");
    std::string router_key = path("node.state.router", {args.node});
    if (read(router_key) == want) {
        std::cout << "Node " << args.node << " is already in " << want << " router mode." << std::endl;
        return;
    }
    if (!client::request_router_state(*session(), args.node, want == "primary"))
        throw Failure("could not write the primary node request");
    std::cout << "Setting node " << args.node << " in " << want << " router mode." << std::endl;
    if (!args.wait) return;
    wait_for("node " + args.node + " to become " + want, [&] { return read(router_key) == want; }, 500ms);
    std::cout << "Node " << args.node << " is now " << want << "." << std::endl;
}

void print_last_lines(const std::string& text, long lines) {
    auto all = split(text, '\n');
    size_t from = lines > 0 && static_cast<size_t>(lines) < all.size() ? all.size() - lines : 0;
    for (size_t i = from; i < all.size(); ++i) std::cout << all[i] << '\n';
    std::cout.flush();
}

}  // namespace

// Shows the last `lines` lines of `key`; with `follow`, keeps printing the
// lines that appear (like the reference: lines not present before).
void show_log(const std::string& key, long lines, bool follow) {
    std::string text = read(key);
    print_last_lines(text, lines);
    if (!follow) return;
    while (true) {
        pause(500ms);
        std::string now = read(key);
        if (now == text) continue;
        auto old_lines = split(text, '\n');
        std::set<std::string> seen(old_lines.begin(), old_lines.end());
        for (const auto& l : split(now, '\n'))
            if (!seen.count(l)) std::cout << l << '\n';
        std::cout.flush();
        text = now;
    }
}

void add_node_commands(CLI::App& app) {
    auto* node = app.add_subcommand("node", "Inspect and manage nodes");
    node->require_subcommand(1);
    node->footer("Examples:\n  pvc node list\n  pvc node flush hv1 --wait\n  pvc node ready hv1 --wait\n"
                 "  pvc node log hv1 --follow");

    auto* list = node->add_subcommand("list", "List the nodes with their states and resources");
    auto list_args = std::make_shared<NodeArgs>();
    add_format_option(list, list_args->format);
    list->footer("Examples:\n  pvc node list\n  pvc node list --format json");
    list->callback([list_args] { node_list(*list_args); });

    auto* info = node->add_subcommand("info", "Show one node in detail");
    auto info_args = std::make_shared<NodeArgs>();
    info->add_option("node", info_args->node, "Node name")->required();
    add_format_option(info, info_args->format);
    info->footer("Examples:\n  pvc node info hv1\n  pvc node info hv1 --format json");
    info->callback([info_args] { node_info(*info_args); });

    auto* flush = node->add_subcommand("flush", "Take a node out of service: its VMs migrate away");
    auto flush_args = std::make_shared<NodeArgs>();
    flush->add_option("node", flush_args->node, "Node name")->required();
    flush->add_flag("-w,--wait", flush_args->wait, "Wait until the node has finished flushing, showing progress");
    flush->footer("Writes domainstate = flush (nothing if the node is already flushed).\n\n"
                  "Examples:\n  pvc node flush hv1\n  pvc node flush hv1 --wait");
    flush->callback([flush_args] { node_domainstate(*flush_args, "flush", "flushed"); });

    auto* ready = node->add_subcommand("ready", "Return a node to service: its VMs come back");
    auto ready_args = std::make_shared<NodeArgs>();
    ready->alias("unflush");
    ready->add_option("node", ready_args->node, "Node name")->required();
    ready->add_flag("-w,--wait", ready_args->wait, "Wait until the node is ready, showing progress");
    ready->footer("Writes domainstate = unflush (nothing if the node is already ready).\n\n"
                  "Examples:\n  pvc node ready hv1\n  pvc node ready hv1 --wait");
    ready->callback([ready_args] { node_domainstate(*ready_args, "unflush", "ready"); });

    auto* primary = node->add_subcommand("primary", "Make a coordinator the primary");
    auto primary_args = std::make_shared<NodeArgs>();
    primary->add_option("node", primary_args->node, "Coordinator name")->required();
    primary->add_flag("-w,--wait", primary_args->wait, "Wait until the node is primary");
    primary->footer("Examples:\n  pvc node primary hv2 --wait");
    primary->callback([primary_args] { node_router(*primary_args, "primary"); });

    auto* secondary = node->add_subcommand("secondary", "Make the primary coordinator step down");
    auto secondary_args = std::make_shared<NodeArgs>();
    secondary->add_option("node", secondary_args->node, "Coordinator name")->required();
    secondary->add_flag("-w,--wait", secondary_args->wait, "Wait until the node is secondary");
    secondary->footer("Writes /config/primary_node = none; another coordinator takes over.\n\n"
                      "Examples:\n  pvc node secondary hv1 --wait");
    secondary->callback([secondary_args] { node_router(*secondary_args, "secondary"); });

    auto* log = node->add_subcommand("log", "Show a node daemon's log (kept in the cluster)");
    auto log_args = std::make_shared<NodeArgs>();
    log->add_option("node", log_args->node, "Node name")->required();
    log->add_option("-l,--lines", log_args->lines, "Number of lines to show (default 100)")->check(CLI::PositiveNumber);
    log->add_flag("-f,--follow", log_args->follow, "Keep printing new lines until interrupted");
    log->footer("Examples:\n  pvc node log hv1\n  pvc node log hv1 --lines 20 --follow");
    log->callback([log_args] {
        require_node(log_args->node);
        show_log(path("logs.messages", {log_args->node}), log_args->lines, log_args->follow);
    });
}

}  // namespace pvc::cli
