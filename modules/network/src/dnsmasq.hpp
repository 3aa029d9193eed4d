// The router's DHCP/DNS server of a managed network:
// one dnsmasq per network on the router-active node, started directly (no
// shell, fixed environment), supervised as a child: restarted with backoff
// when it dies while wanted, stopped with SIGTERM then SIGKILL, always reaped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pvc::network {

// What dnsmasq's arguments are made of (a managed network's keys, parsed).
struct DhcpNetwork {
    uint32_t vni = 0;
    std::string domain;                          // "" or "None": none
    std::optional<std::string> gw4, gw6;         // bare gateway addresses
    bool ipv6 = false;                           // dhcp6_flag: "IPv6 enabled"
    bool dhcp4 = false;                          // dhcp4_flag
    std::optional<std::string> dhcp4_start, dhcp4_end;
};

struct DnsmasqPaths {
    std::filesystem::path lease_helper;          // --dhcp-script
    std::filesystem::path hosts_dir;             // --dhcp-hostsdir (<dyn>/dnsmasq/<vni>)
};

// dnsmasq runs for every managed network with a gateway, whatever its DHCP
// flags (a deliberate deviation: the reference's answer depended on the
// order of flag changes).
bool wants_dnsmasq(const DhcpNetwork& n);
// The reference's argument list, in its order, after argv[0]; with one
// deliberate deviation: when IPv6 is on and an IPv4 gateway exists, the IPv4 listen/auth
// block is added too (DNS on both gateways). DHCPv4 arguments need the
// range; without it DHCPv4 is left out (and `why_not` says so).
std::vector<std::string> dnsmasq_arguments(const DhcpNetwork& n, const DnsmasqPaths& p, std::string* why_not = nullptr);

// A DHCP reservation, /networks/<vni>/dhcp4_reservations/<mac>.
struct Reservation {
    std::string mac;                             // lowercase, colon-separated
    std::string ip;
};
// Why a reservation cannot be served ("" if it can): a MAC that is not six
// lowercase hex pairs with colons, an address that is not IPv4.
std::string reservation_problem(const Reservation& r);
// Makes `dir` hold exactly one file `<mac>` = "<mac>,<ip>" per
// reservation (no newline), on every node (a deliberate deviation: the
// reference wrote them only on a change while router-active, so a new
// primary served none). Returns true when a file was removed or changed
// (dnsmasq must then be sent SIGHUP; new files it sees itself).
bool sync_host_files(const std::filesystem::path& dir, const std::vector<Reservation>& reservations);

// dnsmasq instances a killed daemon left behind: `executable` with a
// --dhcp-hostsdir under `hosts_root` (this daemon's dynamic directory), in
// this process's network namespace. Stopped (SIGTERM, 2 s, SIGKILL); their
// pids returned. Nothing else is touched.
std::vector<int> stop_leftover_dnsmasq(const std::filesystem::path& executable, const std::filesystem::path& hosts_root);
// The same for any program: `executable` with an argument starting with
// `arg_prefix` (pdns_server with this daemon's --socket-dir), in this
// process's network namespace.
std::vector<int> stop_leftover_processes(const std::filesystem::path& executable, const std::string& arg_prefix);

// One supervised dnsmasq. Not thread-safe: the module's worker owns it.
class Dnsmasq {
public:
    Dnsmasq(std::filesystem::path executable, std::vector<std::string> args,
            std::vector<std::string> env, std::filesystem::path log_file);
    ~Dnsmasq();  // stops it
    Dnsmasq(const Dnsmasq&) = delete;
    Dnsmasq& operator=(const Dnsmasq&) = delete;

    const std::vector<std::string>& args() const { return args_; }
    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0; }

    // What supervise() found and did, for the log.
    struct Event {
        enum Kind { none, started, exited, start_failed } kind = none;
        std::string what;                        // exit status / errno text
        std::chrono::milliseconds next_try{0};   // after exited/start_failed
    };
    // Reaps an exited child (never blocks); starts it when not running and
    // its backoff has passed (1 s doubling to 60 s; reset after 60 s up).
    Event supervise(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
    // SIGTERM, up to `grace` for the exit, then SIGKILL; reaped.
    void stop(std::chrono::milliseconds grace = std::chrono::seconds(2));
    // SIGHUP (re-read the hosts directory).
    void reload();

private:
    std::filesystem::path exe_;
    std::vector<std::string> args_, env_;
    std::filesystem::path log_;
    pid_t pid_ = -1;
    std::chrono::steady_clock::time_point started_{}, next_start_{};
    unsigned failures_ = 0;
};

}  // namespace pvc::network
