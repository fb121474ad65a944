#include "preload/ownership.h"

#include <dlfcn.h>

#include "common/protocol.h"
#include "preload/driver/base_glibc.h"
#include "preload/driver/real_driver.h"

extern "C" __attribute__((visibility("default")))
const NvshareProcessOwner nvshare_process_owner = {nvshare::proto::kVersion, 0};

namespace nvshare::preload {

Ownership process_ownership()
{
    Ownership o;
    const DlsymFn dl = real_dlsym();
    // Through the main program's handle, whose scope is the global one in
    // load order: RTLD_DEFAULT would search this -Bsymbolic library first
    // and always find its own marker.
    void* program = base_glibc::dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
    const void* found =
        dl == nullptr || program == nullptr ? nullptr : dl(program, "nvshare_process_owner");
    if (program != nullptr)
        base_glibc::dlclose(program);
    // Not found: this copy is not in the global scope (dlopen'd with
    // RTLD_LOCAL) and no preloaded copy exists, so it is the only one.
    if (found == nullptr || found == &nvshare_process_owner)
        return o;
    o.owner = false;
    o.owner_protocol = static_cast<const NvshareProcessOwner*>(found)->protocol_version;
    return o;
}

}  // namespace nvshare::preload
