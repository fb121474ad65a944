// The one-line file naming libnvshare.so that containers get as their
// /etc/ld.so.preload, the same as `nvsharectl cdi generate` writes.
#pragma once

#include <string>

namespace nvshare::deviceplugin {

// Writes "library\n" to `path` (its directory made 0755 if missing), 0644
// and atomically, unless it holds that already; false and *error if not.
bool write_preload_file(const std::string& path, const std::string& library, std::string* error);

}  // namespace nvshare::deviceplugin
