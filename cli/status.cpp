// `nvsharectl status`: per GPU, the settings, memory, holder, queue and
// clients; --json for scripts.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "cli/status_view.h"

namespace nvshare::cli {

int run_status(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (!args.empty()) {
        fprintf(stderr, "nvsharectl: status takes no arguments\n");
        return kUsage;
    }
    return with_bus("status", [&options](BusClient& bus) {
        const auto status = collect_status(bus);
        if (options.json)
            printf("%s\n", status.dump(2).c_str());
        else
            fputs(render_status(status).c_str(), stdout);
        return kOk;
    });
}

}  // namespace nvshare::cli
