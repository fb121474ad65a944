// `nvsharectl socket-status`: the daemon's state read straight from the lock
// socket, for hosts without D-Bus (and for debugging the daemon itself).
#include "cli/status_socket.h"

#include <cstdio>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "common/lock_client.h"

namespace nvshare::cli {

int run_socket_status(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (!args.empty()) {
        fprintf(stderr, "nvsharectl: socket-status takes no arguments\n");
        return kUsage;
    }
    std::string error;
    const std::string text = LockClient::query_status(options.socket_path, &error);
    if (text.empty()) {
        fprintf(stderr,
                "nvsharectl: %s\nIs nvshared running? Start it with: systemctl start nvshare\n",
                error.c_str());
        return kNotRunning;
    }
    printf("%s\n", text.c_str());
    return kOk;
}

}  // namespace nvshare::cli
