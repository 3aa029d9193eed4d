// The fencing module's export (docs/sdk-guide.md §3).
#include "fencing.hpp"

PVC_MODULE(pvc::fencing::FencingModule,
           PVC_MODULE_NAME("fencing")
           PVC_MODULE_VERSION(PVC_VERSION)
           PVC_MODULE_SERVES_ALWAYS       // every node fences dead nodes (and itself) whatever its functions
           PVC_MODULE_OPTIONAL            // a node whose fencing cannot load still runs, with a loud warning
           PVC_MODULE_START_ORDER("40"))  // after the hypervisor (30): recovery starts VMs through its keys
