// The module ABI fingerprint (docs/sdk-guide.md §3).
//
// Two binaries can share C++ types only if they saw the same SDK headers, the
// same Boost and the same compiler. The fingerprint is those three facts in
// one string: a hash of every SDK header (pvc/abi_fingerprint.hpp, generated
// at build time), and the Boost version and compiler of the translation unit
// that expands PVC_ABI_FINGERPRINT. A module embeds its own (PVC_MODULE), the
// daemon compares it with abi_fingerprint(), the one libpvc-sdk was built with.
#pragma once

#include <boost/version.hpp>

#include "pvc/abi_fingerprint.hpp"
#include "pvc/export.hpp"

#define PVC_ABI_STR2(x) #x
#define PVC_ABI_STR(x) PVC_ABI_STR2(x)

#if defined(__clang__)
#define PVC_ABI_COMPILER \
    "clang-" PVC_ABI_STR(__clang_major__) "." PVC_ABI_STR(__clang_minor__) "." PVC_ABI_STR(__clang_patchlevel__)
#elif defined(__GNUC__)
#define PVC_ABI_COMPILER "gcc-" PVC_ABI_STR(__GNUC__) "." PVC_ABI_STR(__GNUC_MINOR__) "." PVC_ABI_STR(__GNUC_PATCHLEVEL__)
#else
#error "unsupported compiler: the ABI fingerprint needs its identity"
#endif

// "sdk-0.9.82+1a2b3c4d5e6f7a8b boost-1_74 gcc-12.2.0"
#define PVC_ABI_FINGERPRINT \
    "sdk-" PVC_SDK_VERSION "+" PVC_SDK_HEADERS_HASH " boost-" BOOST_LIB_VERSION " " PVC_ABI_COMPILER

namespace pvc {

// The fingerprint libpvc-sdk (and so the running daemon) was built with.
PVC_SDK_API const char* abi_fingerprint();

}  // namespace pvc
