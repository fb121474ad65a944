// nvsharectl's exit statuses, distinct per failure so scripts can tell them
// apart; documented in nvsharectl(1).
#pragma once

namespace nvshare::cli {

enum ExitCode : int {
    kOk = 0,
    kFailed = 1,        // the operation failed for another reason
    kUsage = 2,         // bad command line or invalid value
    kNotRunning = 3,    // nvshared is not running / not reachable
    kAccessDenied = 4,  // the operation needs root (or, over D-Bus, polkit's yes)
    kNotFound = 5,      // no such client or GPU
};

}  // namespace nvshare::cli
