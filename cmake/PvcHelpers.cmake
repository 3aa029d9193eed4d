# pvc_add_module(NAME SOURCES ... [LIBRARIES ...] [IF_ABSENT text])
#   One folder = one module .so, loaded by the core's ModuleHost through Boost.DLL.
#   Builds libpvc-module-<NAME>.so into ${PROJECT_BINARY_DIR}/modules so tests and the
#   lab find every module in one directory, and installs it into the module dir.
#   Modules link only the SDK (pvc::sdk); PVC_VERSION is the project's version,
#   for PVC_MODULE_VERSION. Out of tree, PvcModule.cmake (find_package(pvc-sdk))
#   gives the same helper as pvc_sdk_add_module.
#   IF_ABSENT "text": the module serves "always" and the node cannot do its
#   job without it; the daemon warns with the text when it is not installed
#   (PvcBundledModules.cmake).
function(pvc_add_module NAME)
  cmake_parse_arguments(ARG "" "IF_ABSENT" "SOURCES;LIBRARIES" ${ARGN})
  if(ARG_IF_ABSENT)
    set_property(GLOBAL APPEND PROPERTY PVC_BUNDLED_ALWAYS_MODULES ${NAME})
    set_property(GLOBAL PROPERTY PVC_BUNDLED_MODULE_IF_ABSENT_${NAME} "${ARG_IF_ABSENT}")
  endif()
  set(target pvc-module-${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE pvc::sdk ${ARG_LIBRARIES})
  # Anything not exported by libpvc-sdk is an error here, not a failed dlopen() in the daemon.
  target_link_options(${target} PRIVATE LINKER:--no-undefined)
  target_compile_definitions(${target} PRIVATE PVC_VERSION="${PROJECT_VERSION}")
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/modules)
  install(TARGETS ${target} LIBRARY DESTINATION ${PVC_MODULE_INSTALL_DIR})
endfunction()

# pvc_add_health_plugin(NAME SOURCES ... [LIBRARIES ...])
#   A native health plugin .so exporting pvc_health_plugin_create/pvc_health_plugin_abi.
function(pvc_add_health_plugin NAME)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(target pvc-plugin-${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE pvc::sdk ${ARG_LIBRARIES})
  target_link_options(${target} PRIVATE LINKER:--no-undefined)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME ${NAME}
    CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/plugins)
  install(TARGETS ${target} LIBRARY DESTINATION ${PVC_PLUGIN_INSTALL_DIR})
endfunction()

# pvc_add_test(NAME SOURCES ... LABELS ... [LIBRARIES ...] [TIMEOUT s] [SHARDS n] [COMPUTES])
#   A GoogleTest binary registered with ctest under the given labels.
#   SHARDS n: registered as n ctest entries NAME-1ofn ... NAME-nofn, each running
#   one GoogleTest shard (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX: every case runs
#   in exactly one shard), so a parallel ctest overlaps a binary whose cases
#   mostly wait on real time. TIMEOUT then applies to each shard.
#   COMPUTES: the test keeps a core busy for much of its run (most tests wait
#   on real time and use a fifth of a core or less): ctest counts it as two
#   of the tests it runs at once (PROCESSORS 2; tools/test.sh runs 4).
function(pvc_add_test NAME)
  cmake_parse_arguments(ARG "COMPUTES" "TIMEOUT;SHARDS" "SOURCES;LABELS;LIBRARIES" ${ARGN})
  add_executable(${NAME} ${ARG_SOURCES})
  # Tests may reach the daemon internals (daemon/, health/, zk/) as well as the SDK.
  target_link_libraries(${NAME} PRIVATE pvc::daemon pvc::testsupport GTest::gtest GTest::gtest_main ${ARG_LIBRARIES})
  target_include_directories(${NAME} PRIVATE ${PROJECT_SOURCE_DIR}/core/daemon/src ${PROJECT_SOURCE_DIR}/core/sdk/src)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # ThreadSanitizer runs the same tests several times slower; their own waits
  # scale likewise (tests/support/pvc/test/timing.hpp).
  if(pvc_sanitize STREQUAL "thread")
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 3")
  endif()
  set(env "PVC_BUILD_DIR=${PROJECT_BINARY_DIR};PVC_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  set(processors 1)
  if(ARG_COMPUTES)
    set(processors 2)
  endif()
  if(NOT ARG_SHARDS OR ARG_SHARDS LESS 2)
    add_test(NAME ${NAME} COMMAND ${NAME})
    set_tests_properties(${NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${env}"
      PROCESSORS ${processors})
    return()
  endif()
  math(EXPR last "${ARG_SHARDS} - 1")
  foreach(index RANGE ${last})
    math(EXPR shard "${index} + 1")
    set(test ${NAME}-${shard}of${ARG_SHARDS})
    add_test(NAME ${test} COMMAND ${NAME})
    set_tests_properties(${test} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
      ENVIRONMENT "${env};GTEST_TOTAL_SHARDS=${ARG_SHARDS};GTEST_SHARD_INDEX=${index}" PROCESSORS ${processors})
  endforeach()
endfunction()
