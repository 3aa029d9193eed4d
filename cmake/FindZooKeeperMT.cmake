# Finds Debian's libzookeeper-mt (no pkg-config file is shipped).
find_path(ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZOOKEEPER_MT_LIBRARY zookeeper_mt)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeperMT DEFAULT_MSG ZOOKEEPER_MT_LIBRARY ZOOKEEPER_INCLUDE_DIR)
if(ZooKeeperMT_FOUND AND NOT TARGET ZooKeeper::mt)
  add_library(ZooKeeper::mt UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::mt PROPERTIES
    IMPORTED_LOCATION "${ZOOKEEPER_MT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZOOKEEPER_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS THREADED)
endif()
