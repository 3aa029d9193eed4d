// PVC_SDK_API marks what libpvc-sdk exports. The library is built with hidden
// visibility, so a class or function without it is not part of the SDK: a
// module, plugin or tool that uses it fails to link.
#pragma once

#define PVC_SDK_API [[gnu::visibility("default")]]
