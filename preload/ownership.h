// One process, one nvshare. A process can load several copies of
// libnvshare.so: /etc/ld.so.preload and LD_PRELOAD naming another build, two
// LD_PRELOAD entries, a program that dlopens it. Each copy has its own state,
// so two active copies register twice with nvshared, count memory twice and,
// under `on`, wait for themselves. The copy found first in the global symbol
// scope (the earliest loaded) owns the process; every other copy forwards to
// the driver untouched.
#pragma once

#include <cstdint>

extern "C" {
// Exported by every copy; dlsym(RTLD_DEFAULT) finds the owner's.
struct NvshareProcessOwner {
    uint32_t protocol_version;  // of the copy that exports it
    uint32_t reserved;
};
extern const NvshareProcessOwner nvshare_process_owner;
}

namespace nvshare::preload {

struct Ownership {
    bool owner = true;            // false: another copy owns the process
    uint32_t owner_protocol = 0;  // that copy's protocol version
};

// Looks once, on the first CUDA call (the real dlsym, no allocation).
Ownership process_ownership();

}  // namespace nvshare::preload
