#include "domain_xml.hpp"

#include <sstream>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

namespace pvc::hv {

namespace pt = boost::property_tree;

std::optional<DomainXml> parse_domain_xml(const std::string& xml) {
    pt::ptree tree;
    try {
        std::istringstream in(xml);
        pt::read_xml(in, tree);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    auto root = tree.get_child_optional("domain");
    if (!root) return std::nullopt;
    DomainXml out;
    out.name = root->get<std::string>("name", "");
    out.uuid = root->get<std::string>("uuid", "");
    try {
        auto mem = root->get_child_optional("memory");
        if (mem) {
            long v = std::stol(mem->get_value<std::string>());
            auto unit = mem->get<std::string>("<xmlattr>.unit", "");
            if (unit == "KiB") out.memory_mib = v / 1024;
            else if (unit == "GiB") out.memory_mib = v * 1024;
            else out.memory_mib = v;
        }
    } catch (const std::exception&) {
        out.memory_mib = 0;
    }
    try {
        out.vcpus = std::stoi(root->get<std::string>("vcpu", "0"));
    } catch (const std::exception&) {
        out.vcpus = 0;
    }
    if (auto devices = root->get_child_optional("devices")) {
        for (auto& [tag, node] : *devices) {
            if (tag == "graphics" && !out.graphics) {
                out.graphics = node.get<std::string>("<xmlattr>.listen", "") + ":" + node.get<std::string>("<xmlattr>.port", "");
            } else if (tag == "disk") {
                DiskInfo d;
                d.name = node.get<std::string>("source.<xmlattr>.name", node.get<std::string>("source.<xmlattr>.file", ""));
                d.target_dev = node.get<std::string>("target.<xmlattr>.dev", "");
                out.disks.push_back(std::move(d));
            } else if (tag == "interface" && node.get<std::string>("<xmlattr>.type", "") == "bridge") {
                out.bridges.push_back({node.get<std::string>("target.<xmlattr>.dev", ""),
                                       node.get<std::string>("source.<xmlattr>.bridge", "")});
            }
        }
    }
    return out;
}

}  // namespace pvc::hv
