#include "cli/bus_commands.h"
#include "cli/cdi_command.h"
#include "cli/command.h"
#include "cli/preload_command.h"
#include "cli/status_socket.h"
#include "common/time_quantum.h"

namespace nvshare::cli {

const std::vector<Command>& commands()
{
    static const std::string tq_help =
        std::string("longest hold while others wait, ") + kTimeQuantumRange;
    static const std::vector<Command> table = {
        {"status",
         "",
         "settings, memory, holder, queue and clients of each GPU (the default)",
         {},
         run_status},
        {"set-tq",
         "DURATION",
         "set the time quantum (30s, 500ms, 2min, 45); --gpu GPU: its own",
         {{"DURATION", tq_help.c_str(), true}},
         run_set_tq},
        {"anti-thrashing",
         "[on|off|auto]",
         "show or set the anti-thrashing mode; --gpu GPU: its own",
         {{"MODE", "on, off or auto; without it, print the mode", false}},
         run_anti_thrashing},
        {"set-capacity",
         "GPU SIZE",
         "set the memory a GPU's clients may use together",
         {{"GPU", "index or UUID, as nvsharectl status shows", true},
          {"SIZE", "e.g. 16G, 512M, or bytes", true}},
         run_set_capacity},
        {"revoke",
         "CLIENT",
         "take the lock from a client (id, or pid:N)",
         {{"CLIENT", "a client id from nvsharectl status, or pid:N", true}},
         run_revoke},
        {"reset", "", "forget settings changed at run time; --gpu GPU: its own", {}, run_reset},
        {"monitor", "", "print changes as they happen, until Ctrl-C", {}, run_monitor},
        {"socket-status",
         "",
         "print the daemon's state as JSON, read from the lock socket",
         {},
         run_socket_status},
        {"preload",
         "enable|disable|status|merge",
         "libnvshare.so in every new process, via /etc/ld.so.preload",
         {{"VERB", "enable, disable, status or merge", true}},
         run_preload},
        {"cdi",
         "generate|list",
         "the CDI spec that gives containers nvshare (nvshare.com/gpu)",
         {{"VERB", "generate or list", true}},
         run_cdi},
    };
    return table;
}

}  // namespace nvshare::cli
