// The network module's export (docs/sdk-guide.md §3).
#include "network.hpp"

PVC_MODULE(pvc::network::NetworkModule,
           PVC_MODULE_NAME("network")
           PVC_MODULE_VERSION(PVC_VERSION)
           PVC_MODULE_SERVES("enable_networking")  // pvc.functions.enable_networking
           PVC_MODULE_REQUIRED                     // VMs cannot start without their bridges
           PVC_MODULE_START_ORDER("10"))           // first: the other modules' guests need the links
