#include "cli/command.h"
#include "cli/status_socket.h"

namespace nvshare::cli {

const std::vector<Command>& commands()
{
    static const std::vector<Command> table = {
        {"socket-status", "", "print the daemon's state as JSON, read from the lock socket",
         run_socket_status},
    };
    return table;
}

}  // namespace nvshare::cli
