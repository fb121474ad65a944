// Finding a symbol of a given name and version among the objects the process
// has loaded, through their dynamic symbol tables (dl_iterate_phdr). The way
// to glibc's dlopen, dlvsym and pthread_create in a process of an image older
// than glibc 2.34, where they live in libdl.so.2 and libpthread.so.0 and may
// be loaded without being in the global scope (base_glibc.h).
#pragma once

namespace nvshare::preload {

// The address of the defined function or object NAME at symbol version
// VERSION in the first loaded object that defines it, or nullptr. Looks
// through every loaded object (not only the global scope); skips undefined
// entries and indirect functions. Reads only memory the dynamic linker maps.
void* loaded_symbol(const char* name, const char* version);

}  // namespace nvshare::preload
