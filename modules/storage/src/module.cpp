// The storage module's export (docs/sdk-guide.md §3).
#include "storage.hpp"

PVC_MODULE(pvc::storage::StorageModule,
           PVC_MODULE_NAME("storage")
           PVC_MODULE_VERSION(PVC_VERSION)
           PVC_MODULE_SERVES("enable_storage")  // pvc.functions.enable_storage
           PVC_MODULE_REQUIRED                  // a storage node without Ceph statistics and lock handling is not one
           PVC_MODULE_START_ORDER("20"))        // before the hypervisor (30), whose starts use the RBD lock service
