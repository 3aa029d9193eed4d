# pvc_sdk_add_module(NAME SOURCES ... [LIBRARIES ...] [INSTALL_DIR dir])
#   A pvcnoded module built against the installed SDK: libpvc-module-<NAME>.so,
#   hidden visibility (only what PVC_MODULE exports is seen by the daemon),
#   linked with pvc::sdk, installed into INSTALL_DIR (default: the module
#   directory of the installed daemon, PVC_SDK_MODULE_DIR).
function(pvc_sdk_add_module NAME)
  cmake_parse_arguments(ARG "" "INSTALL_DIR" "SOURCES;LIBRARIES" ${ARGN})
  set(target pvc-module-${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE pvc::sdk ${ARG_LIBRARIES})
  # Using anything libpvc-sdk does not export fails here, not at dlopen() in the daemon.
  target_link_options(${target} PRIVATE LINKER:--no-undefined)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(NOT ARG_INSTALL_DIR)
    set(ARG_INSTALL_DIR ${PVC_SDK_MODULE_DIR})
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${ARG_INSTALL_DIR})
endfunction()
