// `nvsharectl anti-thrashing [--gpu GPU] [on|off|auto]`: show or set the
// mode, host-wide or a GPU's own.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/mode.h"

namespace nvshare::cli {

int run_anti_thrashing(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (args.size() > 1) {
        fprintf(stderr, "nvsharectl: usage: anti-thrashing [--gpu GPU] [on|off|auto]\n");
        return kUsage;
    }
    if (args.empty()) {
        return with_bus(options, "reading the anti-thrashing mode", [&options](BusClient& bus) {
            if (options.gpu.empty()) {
                printf("%s\n", bus.manager().AntiThrashing().c_str());
                return kOk;
            }
            const auto path = bus.find_gpu(options.gpu);
            if (!path)
                return kNotFound;
            std::string mode =
                bus.gpu_object(*path)->getProperty("AntiThrashing").onInterface(kGpuInterface);
            printf("%s\n", mode.c_str());
            return kOk;
        });
    }
    if (!parse_mode(args[0])) {
        fprintf(stderr, "nvsharectl: invalid anti-thrashing mode '%s' (valid: on, off, auto)\n",
                args[0].c_str());
        return kUsage;
    }
    return with_bus(options, "setting the anti-thrashing mode", [&options, &args](BusClient& bus) {
        if (options.gpu.empty()) {
            bus.manager().SetAntiThrashing(args[0], kNoInteraction);
            return kOk;
        }
        const auto path = bus.find_gpu(options.gpu);
        if (!path)
            return kNotFound;
        bus.gpu_object(*path)
            ->callMethod("SetAntiThrashing")
            .onInterface(kGpuInterface)
            .withArguments(args[0], kNoInteraction);
        return kOk;
    });
}

}  // namespace nvshare::cli
