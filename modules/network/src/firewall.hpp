// The firewall of client networks, on every node, through
// libnftables in table `inet filter`.
//
// Layout (one transaction per network, so one network's change never
// touches another's chains, and one bad ACL refuses only its own network):
//
//   input    (hook)  the operator's static drop-ins, then `jump pvc-input`
//   forward  (hook)  the operator's static drop-ins, then `jump pvc-forward`
//   pvc-input        per network: meta iifname "vmbr<vni>" jump vxlan<vni>-input
//   pvc-forward      per network: jump vxlan<vni>-forward
//                    (both in the reference's order: "<vni>.nft" file names
//                    sorted as text, 100 before 20; the first chain
//                    to give a verdict wins for traffic between networks)
//   vxlan<vni>-input    the reference's allow-list of what guests may send the host
//   vxlan<vni>-forward  the reference's jumps by CIDR to vxlan<vni>-in / -out
//   vxlan<vni>-in, -out the ACLs, names and meaning as the reference's
//
// A network's own four chains are flushed and refilled in one transaction,
// which the first time also rebuilds pvc-input / pvc-forward in that order
// with it dispatched; the reference instead reloads
// the whole ruleset (`flush ruleset`, every table of every tool) on every
// change, and one bad ACL there blocks every network.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nft.hpp"

namespace pvc::network {

// One ACL, /networks/<vni>/firewall_rules/<direction>/<description>.
struct Acl {
    std::string direction;    // "in" | "out"
    std::string description;
    std::string rule;         // raw nftables rule text
    std::string order;        // as stored (decimal)
};

// Numerically by order, ties by description, unparseable orders last; none
// dropped (a deliberate deviation: the reference sorted orders as text, so 10
// came before 2, and dropped ACLs with equal orders).
std::vector<Acl> ordered(std::vector<Acl> acls, const std::string& direction);

// Why a rule text cannot be one ACL ("" if it can): it must be one nft rule
// on one line — no line breaks or control characters, no `;` outside a
// quoted string (a second command), not empty. Everything else is for nft.
std::string acl_text_problem(const std::string& rule);

// What the firewall of one managed network is made of.
struct FirewallNetwork {
    uint32_t vni = 0;
    std::optional<std::string> ip4_network, ip4_gateway, ip6_network, ip6_gateway;
    std::vector<Acl> acls;
};

// The commands for a network's own chains, flushed and refilled.
// `acl_lines` maps each ACL's line number (1-based) to its description (to
// name the ACL nft refused).
struct Fragment {
    std::string text;
    std::map<int, std::string> acl_lines;
    std::string refused_acl;  // an ACL refused before nft saw it
    std::string refused_why;
};
Fragment render_fragment(const FirewallNetwork& n);

// VNIs in the reference's include order: their "<vni>.nft" file names
// sorted as text (100 before 20).
std::vector<uint32_t> include_order(const std::set<uint32_t>& vnis);
// pvc-input and pvc-forward flushed and refilled with the dispatch rules of
// `vnis`, in include_order.
std::string render_dispatch(const std::set<uint32_t>& vnis);

// The base commands (without the reference's `flush ruleset`: only our table).
std::string render_base(const std::filesystem::path& static_dir);

// The chain names of a network, and the VNI of one of ours.
std::vector<std::string> network_chains(uint32_t vni);
std::optional<uint32_t> chain_vni(const std::string& chain);

class Firewall {
public:
    // `dir`: <dynamic_directory>/nft (base.nft, static/, networks/<vni>.nft).
    explicit Firewall(std::filesystem::path dir);

    // At start: our table, the hook chains and dispatchers; the operator's
    // static/ files re-read. Other networks' chains stay as they are; their
    // dispatch rules are put in include order if they are not.
    // Throws std::runtime_error with nft's message.
    void apply_base();
    // Whether the kernel still holds what apply_base and apply made: the hook
    // chains' jumps to pvc-input / pvc-forward and there every applied
    // network's jumps (a jump keeps its target chain: the kernel refuses to
    // delete a chain still jumped to). False after `nft flush ruleset`, a
    // reload of nftables.service or a flush of the table by another tool.
    bool intact();

    struct Outcome {
        bool ok = false;
        bool changed = false;     // false: the same text was in place already
        std::string error;        // nft's message or the refusal
        std::string acl;          // the ACL blamed, if one could be
    };
    // Makes the kernel hold the network's rules; on refusal the previous
    // rules of the network stay (and its file), nothing else is touched.
    Outcome apply(const FirewallNetwork& n);
    // Removes a network's dispatch rules and chains (absent ones are fine).
    // Throws std::runtime_error with nft's message.
    void remove(uint32_t vni);
    // VNIs that have chains of ours in the kernel.
    std::set<uint32_t> networks_in_kernel();

    Nftables& nft() { return nft_; }

private:
    // The handles of dispatch rules, by the chain they jump to.
    std::map<std::string, std::vector<uint64_t>> dispatch_rules();
    // The targets of a chain's jump rules, in rule order (nullopt: no such chain).
    std::optional<std::vector<std::string>> jumps(const std::string& chain);

    std::filesystem::path dir_;
    Nftables nft_;
    std::set<uint32_t> dispatched_;              // VNIs whose dispatch rules exist
    std::map<uint32_t, std::string> applied_;    // VNI -> text last applied
};

}  // namespace pvc::network
