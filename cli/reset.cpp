// `nvsharectl reset [--gpu GPU]`: forget the settings changed at run time,
// all of them or one GPU's.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"

namespace nvshare::cli {

int run_reset(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (!args.empty()) {
        fprintf(stderr, "nvsharectl: reset takes no arguments\n");
        return kUsage;
    }
    return with_bus(options, "resetting the settings", [&options](BusClient& bus) {
        if (options.gpu.empty()) {
            bus.manager().ResetSettings();
            return kOk;
        }
        const auto path = bus.find_gpu(options.gpu);
        if (!path)
            return kNotFound;
        bus.gpu_object(*path)->callMethod("ResetSettings").onInterface(kGpuInterface);
        return kOk;
    });
}

}  // namespace nvshare::cli
