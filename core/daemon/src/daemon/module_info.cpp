#include "daemon/module_info.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

namespace pvc {

namespace {

constexpr const char* section_name = ".pvc_modinfo";
// Far above any real metadata: a corrupt header cannot make us read gigabytes.
constexpr std::uint64_t max_section_size = 64 * 1024;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& why) {
    throw ModuleLoadError("module " + file.string() + ": " + why);
}

std::string read_at(std::ifstream& in, const std::filesystem::path& file, std::uint64_t offset, std::uint64_t size) {
    std::string buf(size, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in.read(buf.data(), static_cast<std::streamsize>(size))) fail(file, "truncated ELF file");
    return buf;
}

// The raw contents of the .pvc_modinfo section.
std::string modinfo_section(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(file, "cannot be read");
    Elf64_Ehdr eh{};
    if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        fail(file, "not an ELF file");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN || eh.e_shentsize != sizeof(Elf64_Shdr))
        fail(file, "not a 64-bit ELF shared object");
    if (eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum) fail(file, "has no section table");

    std::vector<Elf64_Shdr> sections(eh.e_shnum);
    std::string table = read_at(in, file, eh.e_shoff, std::uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr));
    std::memcpy(sections.data(), table.data(), table.size());
    const auto& names_hdr = sections[eh.e_shstrndx];
    if (names_hdr.sh_size > max_section_size * 16) fail(file, "section name table too large");
    std::string names = read_at(in, file, names_hdr.sh_offset, names_hdr.sh_size);

    for (const auto& sh : sections) {
        if (sh.sh_name >= names.size()) continue;
        if (std::strcmp(names.c_str() + sh.sh_name, section_name) != 0) continue;
        if (sh.sh_type == SHT_NOBITS || sh.sh_size > max_section_size) fail(file, "malformed .pvc_modinfo section");
        return read_at(in, file, sh.sh_offset, sh.sh_size);
    }
    fail(file, "is not a pvc module (no .pvc_modinfo section: build it with PVC_MODULE)");
}

}  // namespace

ModuleInfo read_module_info(const std::filesystem::path& file) {
    std::string raw = modinfo_section(file);
    std::map<std::string, std::string, std::less<>> kv;
    std::string_view rest(raw);
    while (!rest.empty()) {
        auto end = rest.find('\0');
        std::string_view entry = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        if (entry.empty()) continue;  // padding between or after entries
        auto eq = entry.find('=');
        if (eq == std::string_view::npos || eq == 0) fail(file, "malformed metadata entry '" + std::string(entry) + "'");
        auto [it, fresh] = kv.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
        if (!fresh) fail(file, "metadata names '" + it->first + "' twice");
    }
    auto take = [&](const char* key) {
        auto it = kv.find(key);
        if (it == kv.end() || it->second.empty()) fail(file, std::string("metadata has no '") + key + "'");
        return it->second;
    };

    ModuleInfo info;
    info.file = file;
    info.name = take("name");
    info.version = take("version");
    info.serves = take("serves");
    info.abi = take("abi");
    std::string need = take("need");
    if (need != "required" && need != "optional") fail(file, "metadata 'need' must be required or optional, not '" + need + "'");
    info.required = need == "required";
    if (!info.always() && info.serves.rfind("enable_", 0) != 0)
        fail(file, "metadata 'serves' must be a pvc.functions.enable_* flag or always, not '" + info.serves + "'");
    if (auto it = kv.find("start"); it != kv.end()) {
        try {
            std::size_t used = 0;
            info.start_order = std::stoi(it->second, &used);
            if (used != it->second.size()) throw std::invalid_argument("trailing characters");
        } catch (const std::exception&) {
            fail(file, "metadata 'start' must be an integer, not '" + it->second + "'");
        }
    }
    return info;
}

}  // namespace pvc
