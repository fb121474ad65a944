// /etc/subuid read into Principals (principals.h): at start and on reload.
#pragma once

#include "daemon/principals.h"

namespace nvshare::daemon {

inline constexpr const char* kSubuidPath = "/etc/subuid";

// The principals of `path`; none (every uid its own) when it is absent.
// Entries it cannot use, and a file it cannot read, are logged as warnings.
Principals load_principals(const char* path = kSubuidPath);

}  // namespace nvshare::daemon
