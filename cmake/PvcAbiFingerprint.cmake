# cmake -DHEADER_DIR=<include dir> -DOUTPUT=<file> -DSDK_VERSION=<v> -P PvcAbiFingerprint.cmake
#
# Writes pvc/abi_fingerprint.hpp: a hash over every SDK header (path and
# contents, in path order). Any change to a header changes the fingerprint,
# so a module built against other headers is refused instead of crashing.
# The file is rewritten only when the hash changes, so an unchanged SDK does
# not rebuild everything that includes it.
file(GLOB_RECURSE headers RELATIVE ${HEADER_DIR} ${HEADER_DIR}/pvc/*.hpp)
list(SORT headers)
set(all "")
foreach(h ${headers})
  file(SHA256 ${HEADER_DIR}/${h} sum)
  string(APPEND all "${h}:${sum}\n")
endforeach()
string(SHA256 hash "${all}")
string(SUBSTRING ${hash} 0 16 hash)
set(text "// Generated at build time by cmake/PvcAbiFingerprint.cmake from the SDK headers: do not edit.
#pragma once
#define PVC_SDK_VERSION \"${SDK_VERSION}\"
#define PVC_SDK_HEADERS_HASH \"${hash}\"
")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
