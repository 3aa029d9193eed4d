// The fencing module's export (DESIGN.md, "Module ABI").
#include "fencing.hpp"

PVC_MODULE(pvc::fencing::FencingModule)
