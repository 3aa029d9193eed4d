# The installed CMake package of the SDK: find_package(pvc-sdk) gives the
# imported target pvc::sdk (headers, libpvc-sdk, its public dependencies) and
# pvc_sdk_add_module() (PvcModule.cmake). examples/module-hello builds with it.
include(CMakePackageConfigHelpers)

install(EXPORT pvc-sdk-targets NAMESPACE pvc:: FILE pvc-sdk-targets.cmake
  DESTINATION ${PVC_SDK_CMAKE_INSTALL_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pvc-sdkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/pvc-sdkConfig.cmake
  INSTALL_DESTINATION ${PVC_SDK_CMAKE_INSTALL_DIR}
  PATH_VARS PVC_MODULE_INSTALL_DIR)
# A module only loads into the daemon built from the same SDK (the ABI
# fingerprint), so only the exact version satisfies a versioned request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/pvc-sdkConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ExactVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/pvc-sdkConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/pvc-sdkConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/PvcModule.cmake
  DESTINATION ${PVC_SDK_CMAKE_INSTALL_DIR} COMPONENT dev)
# The example module ships with the SDK as the template to copy.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/module-hello
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/pvc-dev/examples COMPONENT dev)
