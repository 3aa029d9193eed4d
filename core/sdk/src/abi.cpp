#include "pvc/abi.hpp"

namespace pvc {

const char* abi_fingerprint() { return PVC_ABI_FINGERPRINT; }

}  // namespace pvc
