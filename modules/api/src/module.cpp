// The API module's export (docs/sdk-guide.md §3).
#include "api.hpp"

PVC_MODULE(pvc::api::ApiModule,
           PVC_MODULE_NAME("api")
           PVC_MODULE_VERSION(PVC_VERSION)
           PVC_MODULE_SERVES("enable_api")  // pvc.functions.enable_api
           PVC_MODULE_OPTIONAL              // a node runs without its API (clients then use another)
           PVC_MODULE_START_ORDER("50"))    // last: it only reads what the others keep
