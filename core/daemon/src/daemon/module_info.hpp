// A module's metadata, read from its file without loading it (the
// .pvc_modinfo section PVC_MODULE writes, module.hpp), so a module whose
// function is off, or whose ABI differs, never runs a line of its code.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace pvc {

class ModuleLoadError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ModuleInfo {
    std::filesystem::path file;
    std::string name;
    std::string version;
    std::string serves;           // "enable_<x>" or "always"
    bool required = true;         // the daemon may not start when it cannot be loaded
    int start_order = 50;         // lowest first; stop is the reverse
    std::string abi;              // the module's PVC_ABI_FINGERPRINT

    bool always() const { return serves == "always"; }
};

// Throws ModuleLoadError naming the file when it is not a 64-bit ELF shared
// object, has no .pvc_modinfo section, or its metadata is incomplete or malformed.
ModuleInfo read_module_info(const std::filesystem::path& file);

}  // namespace pvc
