// `nvsharectl set-capacity GPU SIZE`: memory the clients of one GPU may use
// together before auto mode makes them take turns.
#include <cstdio>
#include <cstdlib>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/units.h"

namespace nvshare::cli {

int run_set_capacity(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (args.size() != 2) {
        fprintf(stderr, "nvsharectl: usage: set-capacity GPU SIZE (GPU: index or UUID)\n");
        return kUsage;
    }
    const auto size = parse_size(args[1]);
    if (!size || *size == 0) {
        fprintf(stderr,
                "nvsharectl: invalid size '%s' (valid: more than 0 bytes, e.g. 16G, 512M)\n",
                args[1].c_str());
        return kUsage;
    }
    return with_bus(options, "setting the capacity", [&args, &size](BusClient& bus) {
        const auto path = bus.find_gpu(args[0]);
        if (!path)
            return kNotFound;
        bus.gpu_object(*path)
            ->callMethod("SetCapacity")
            .onInterface(kGpuInterface)
            .withArguments(*size, kNoInteraction);
        return kOk;
    });
}

}  // namespace nvshare::cli
