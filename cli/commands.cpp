#include "cli/command.h"
#include "cli/preload_command.h"
#include "cli/status_socket.h"

namespace nvshare::cli {

const std::vector<Command>& commands()
{
    static const std::vector<Command> table = {
        {"socket-status", "", "print the daemon's state as JSON, read from the lock socket",
         run_socket_status},
        {"preload", "enable|disable|status|merge",
         "libnvshare.so in every new process, via /etc/ld.so.preload", run_preload},
    };
    return table;
}

}  // namespace nvshare::cli
