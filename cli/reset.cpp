// `nvsharectl reset`: forget the settings changed at run time.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"

namespace nvshare::cli {

int run_reset(const GlobalOptions&, const std::vector<std::string>& args)
{
    if (!args.empty()) {
        fprintf(stderr, "nvsharectl: reset takes no arguments\n");
        return kUsage;
    }
    return with_bus("resetting the settings", [](BusClient& bus) {
        bus.manager().ResetSettings();
        return kOk;
    });
}

}  // namespace nvshare::cli
