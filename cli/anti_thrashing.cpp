// `nvsharectl anti-thrashing [on|off|auto]`: show or set the mode.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/mode.h"

namespace nvshare::cli {

int run_anti_thrashing(const GlobalOptions&, const std::vector<std::string>& args)
{
    if (args.size() > 1) {
        fprintf(stderr, "nvsharectl: usage: anti-thrashing [on|off|auto]\n");
        return kUsage;
    }
    if (args.empty()) {
        return with_bus("reading the anti-thrashing mode", [](BusClient& bus) {
            printf("%s\n", bus.manager().AntiThrashing().c_str());
            return kOk;
        });
    }
    if (!parse_mode(args[0])) {
        fprintf(stderr, "nvsharectl: invalid anti-thrashing mode '%s' (valid: on, off, auto)\n",
                args[0].c_str());
        return kUsage;
    }
    return with_bus("setting the anti-thrashing mode", [&args](BusClient& bus) {
        bus.manager().AntiThrashing(args[0]);
        return kOk;
    });
}

}  // namespace nvshare::cli
