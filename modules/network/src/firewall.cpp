#include "firewall.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace pvc::network {

namespace {

constexpr const char* table = "inet filter";

std::optional<uint64_t> decimal(const std::string& s) {
    if (s.empty() || s.size() > 18) return std::nullopt;
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::string chain(uint32_t vni, const char* what) { return fmt::format("vxlan{}-{}", vni, what); }

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    auto tmp = path;
    tmp += ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << text;
        if (!f) throw std::runtime_error("cannot write " + tmp.string());
    }
    std::filesystem::rename(tmp, path);
}

}  // namespace

std::vector<Acl> ordered(std::vector<Acl> acls, const std::string& direction) {
    std::erase_if(acls, [&](const Acl& a) { return a.direction != direction; });
    std::stable_sort(acls.begin(), acls.end(), [](const Acl& a, const Acl& b) {
        auto oa = decimal(a.order), ob = decimal(b.order);
        if (oa.has_value() != ob.has_value()) return oa.has_value();  // unparseable last
        if (oa && ob && *oa != *ob) return *oa < *ob;
        return a.description < b.description;
    });
    return acls;
}

std::string acl_text_problem(const std::string& rule) {
    if (rule.find_first_not_of(" \t") == std::string::npos) return "the rule is empty";
    bool quoted = false;
    for (char c : rule) {
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t') return "the rule has a line break or control character";
        if (c == '"') quoted = !quoted;
        else if (c == ';' && !quoted) return "the rule has a ';' (a second command)";
    }
    return "";
}

std::vector<std::string> network_chains(uint32_t vni) {
    return {chain(vni, "in"), chain(vni, "out"), chain(vni, "input"), chain(vni, "forward")};
}

std::optional<uint32_t> chain_vni(const std::string& name) {
    if (name.rfind("vxlan", 0) != 0) return std::nullopt;
    auto dash = name.find('-');
    if (dash == std::string::npos) return std::nullopt;
    std::string vni = name.substr(5, dash - 5), what = name.substr(dash + 1);
    if (what != "in" && what != "out" && what != "input" && what != "forward") return std::nullopt;
    auto v = decimal(vni);
    if (!v || (vni.size() > 1 && vni[0] == '0') || *v < 1 || *v > 16777215) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

std::string render_base(const std::filesystem::path& static_dir) {
    return fmt::format(
        "# pvcnoded: the base of table inet filter; client networks\n"
        "# are dispatched from pvc-input / pvc-forward, each in its own chains. The\n"
        "# hook chains' policy is accept, also over a table that had drop.\n"
        "add table {t}\n"
        "add chain {t} forward {{ type filter hook forward priority 0; policy accept; }}\n"
        "add chain {t} input {{ type filter hook input priority 0; policy accept; }}\n"
        "add chain {t} pvc-forward\n"
        "add chain {t} pvc-input\n"
        "flush chain {t} forward\n"
        "flush chain {t} input\n"
        "include \"{s}/*\"\n"
        "add rule {t} forward counter jump pvc-forward\n"
        "add rule {t} input counter jump pvc-input\n",
        fmt::arg("t", table), fmt::arg("s", static_dir.string()));
}

Fragment render_fragment(const FirewallNetwork& n) {
    Fragment f;
    const uint32_t v = n.vni;
    std::string in = chain(v, "in"), out = chain(v, "out"), input = chain(v, "input"), fwd = chain(v, "forward");
    std::string& t = f.text;
    t += fmt::format("# pvcnoded: network {}, one transaction\n", v);
    for (const auto& c : network_chains(v)) t += fmt::format("add chain {} {}\n", table, c);
    for (const auto& c : network_chains(v)) t += fmt::format("flush chain {} {}\n", table, c);
    t += fmt::format("add rule {} {} counter\n", table, in);
    t += fmt::format("add rule {} {} counter\n", table, out);
    // What guests may send the host (every node): ICMP, DNS, DHCP, NTP,
    // DHCPv6, the metadata API; the rest from vmbr<vni> is dropped.
    for (const char* r : {"ip protocol icmp counter accept", "ip6 nexthdr icmpv6 counter accept",
                          "tcp dport 53 counter accept", "udp dport 53 counter accept", "udp dport 67 counter accept",
                          "udp dport 123 counter accept", "ip6 nexthdr udp udp dport 547 counter accept",
                          "tcp dport 80 counter accept", "counter drop"})
        t += fmt::format("add rule {} {} {}\n", table, input, r);
    if (n.ip6_gateway && n.ip6_network) {
        t += fmt::format("add rule {} {} ip6 daddr {} counter jump {}\n", table, fwd, *n.ip6_network, in);
        t += fmt::format("add rule {} {} ip6 saddr {} counter jump {}\n", table, fwd, *n.ip6_network, out);
    }
    if (n.ip4_gateway && n.ip4_network) {
        t += fmt::format("add rule {} {} ip daddr {} counter jump {}\n", table, fwd, *n.ip4_network, in);
        t += fmt::format("add rule {} {} ip saddr {} counter jump {}\n", table, fwd, *n.ip4_network, out);
    }
    for (const char* dir : {"in", "out"}) {
        for (const Acl& a : ordered(n.acls, dir)) {
            if (std::string why = acl_text_problem(a.rule); !why.empty() && f.refused_acl.empty()) {
                f.refused_acl = a.description;
                f.refused_why = why;
            }
            f.acl_lines[static_cast<int>(std::count(t.begin(), t.end(), '\n')) + 1] = a.description;
            t += fmt::format("add rule {} {} counter {}\n", table, chain(v, dir), a.rule);
        }
    }
    return f;
}

std::vector<uint32_t> include_order(const std::set<uint32_t>& vnis) {
    std::vector<uint32_t> out(vnis.begin(), vnis.end());
    std::sort(out.begin(), out.end(), [](uint32_t a, uint32_t b) {
        return std::to_string(a) + ".nft" < std::to_string(b) + ".nft";
    });
    return out;
}

std::string render_dispatch(const std::set<uint32_t>& vnis) {
    std::string t = fmt::format("flush chain {} pvc-input\nflush chain {} pvc-forward\n", table, table);
    for (uint32_t v : include_order(vnis)) {
        t += fmt::format("add rule {} pvc-input meta iifname \"vmbr{}\" counter jump {}\n", table, v, chain(v, "input"));
        t += fmt::format("add rule {} pvc-forward counter jump {}\n", table, chain(v, "forward"));
    }
    return t;
}

Firewall::Firewall(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::map<std::string, std::vector<uint64_t>> Firewall::dispatch_rules() {
    std::map<std::string, std::vector<uint64_t>> out;
    for (const char* d : {"pvc-input", "pvc-forward"}) {
        nlohmann::json j = nft_.list(fmt::format("list chain {} {}", table, d));
        if (!j.is_object() || !j.contains("nftables")) continue;
        for (const auto& item : j["nftables"]) {
            if (!item.contains("rule")) continue;
            const auto& r = item["rule"];
            for (const auto& e : r.value("expr", nlohmann::json::array()))
                if (e.contains("jump")) out[e["jump"].value("target", "")].push_back(r.value("handle", uint64_t{0}));
        }
    }
    return out;
}

std::optional<std::vector<std::string>> Firewall::jumps(const std::string& name) {
    nlohmann::json j = nft_.list(fmt::format("list chain {} {}", table, name));
    if (!j.is_object() || !j.contains("nftables")) return std::nullopt;
    std::vector<std::string> out;
    for (const auto& item : j["nftables"]) {
        if (!item.contains("rule")) continue;
        for (const auto& e : item["rule"].value("expr", nlohmann::json::array()))
            if (e.contains("jump")) out.push_back(e["jump"].value("target", ""));
    }
    return out;
}

bool Firewall::intact() {
    std::vector<std::string> want_input, want_forward;
    for (uint32_t v : include_order(dispatched_)) {
        want_input.push_back(chain(v, "input"));
        want_forward.push_back(chain(v, "forward"));
    }
    auto has = [](const std::optional<std::vector<std::string>>& j, const std::string& target) {
        return j && std::find(j->begin(), j->end(), target) != j->end();
    };
    if (!has(jumps("input"), "pvc-input") || !has(jumps("forward"), "pvc-forward")) return false;
    return jumps("pvc-input") == want_input && jumps("pvc-forward") == want_forward;
}

void Firewall::apply_base() {
    std::filesystem::create_directories(dir_ / "static");
    std::filesystem::create_directories(dir_ / "networks");
    std::string text = render_base(dir_ / "static");
    write_file(dir_ / "base.nft", text);
    auto r = nft_.run(text);
    if (!r.ok) throw std::runtime_error("the base ruleset was refused: " + r.error);
    // Networks dispatched by an earlier run keep their rules until their own
    // apply (a restart changes nothing in between).
    dispatched_.clear();
    applied_.clear();
    auto rules = dispatch_rules();
    for (uint32_t vni : networks_in_kernel())
        if (rules.count(chain(vni, "input")) && rules.count(chain(vni, "forward"))) dispatched_.insert(vni);
    // Dispatch rules of an earlier run in another order (made in creation
    // order), twice, or of half-made networks: rebuilt in include order.
    if (intact()) return;
    r = nft_.run(render_dispatch(dispatched_));
    if (!r.ok) throw std::runtime_error("the dispatch rules were refused: " + r.error);
}

Firewall::Outcome Firewall::apply(const FirewallNetwork& n) {
    Outcome o;
    Fragment f = render_fragment(n);
    if (!f.refused_acl.empty()) {
        o.error = f.refused_why;
        o.acl = f.refused_acl;
        return o;
    }
    // Same rules as last applied (by this run): the kernel is left alone.
    if (auto it = applied_.find(n.vni); it != applied_.end() && it->second == f.text) {
        o.ok = true;
        return o;
    }
    // Run from its file, so nft's message names the line (and so the ACL).
    const auto file = dir_ / "networks" / (std::to_string(n.vni) + ".nft");
    auto pending = file;
    pending += ".pending";
    // A network dispatched for the first time: both dispatch chains rebuilt
    // in include order in the same transaction (after the network's lines,
    // so nft's line numbers still name its ACLs).
    std::set<uint32_t> dispatch = dispatched_;
    const bool first = dispatch.insert(n.vni).second;
    write_file(pending, first ? f.text + render_dispatch(dispatch) : f.text);
    auto r = nft_.run_file(pending.string());
    if (!r.ok) {
        o.error = r.error;
        const std::string at = pending.string() + ":";
        for (auto p = r.error.find(at); p != std::string::npos; p = r.error.find(at, p + 1)) {
            int line = std::atoi(r.error.c_str() + p + at.size());
            if (auto it = f.acl_lines.find(line); it != f.acl_lines.end()) {
                o.acl = it->second;
                break;
            }
        }
        // Kept for people to read; the network's previous file stays.
        auto refused = file;
        refused += ".refused";
        std::error_code ec;
        std::filesystem::rename(pending, refused, ec);
        return o;
    }
    dispatched_ = std::move(dispatch);
    applied_[n.vni] = f.text;  // without the dispatch lines (they ran once)
    o.ok = o.changed = true;
    std::error_code ec;
    std::filesystem::rename(pending, file, ec);
    auto refused = file;
    refused += ".refused";
    std::filesystem::remove(refused, ec);
    return o;
}

void Firewall::remove(uint32_t vni) {
    std::string t;
    auto rules = dispatch_rules();
    for (const char* what : {"input", "forward"})
        for (uint64_t h : rules[chain(vni, what)])
            t += fmt::format("delete rule {} pvc-{} handle {}\n", table, what, h);
    std::set<uint32_t> present = networks_in_kernel();
    if (present.count(vni)) {
        // Only the chains that exist (a network half made by another run).
        nlohmann::json j = nft_.list(fmt::format("list chains {}", "inet"));
        std::set<std::string> names;
        if (j.is_object() && j.contains("nftables"))
            for (const auto& item : j["nftables"])
                if (item.contains("chain") && item["chain"].value("table", "") == "filter")
                    names.insert(item["chain"].value("name", ""));
        for (const auto& c : network_chains(vni))
            if (names.count(c)) t += fmt::format("flush chain {} {}\n", table, c);
        // -forward refers to -in/-out: it goes first.
        for (const char* what : {"forward", "input", "in", "out"})
            if (names.count(chain(vni, what))) t += fmt::format("delete chain {} {}\n", table, chain(vni, what));
    }
    dispatched_.erase(vni);
    applied_.erase(vni);
    std::error_code ec;
    std::filesystem::remove(dir_ / "networks" / (std::to_string(vni) + ".nft"), ec);
    if (t.empty()) return;
    auto r = nft_.run(t);
    if (!r.ok) throw std::runtime_error(r.error);
}

std::set<uint32_t> Firewall::networks_in_kernel() {
    std::set<uint32_t> out;
    nlohmann::json j = nft_.list("list chains inet");
    if (!j.is_object() || !j.contains("nftables")) return out;
    for (const auto& item : j["nftables"]) {
        if (!item.contains("chain") || item["chain"].value("table", "") != "filter") continue;
        if (auto v = chain_vni(item["chain"].value("name", ""))) out.insert(*v);
    }
    return out;
}

}  // namespace pvc::network
