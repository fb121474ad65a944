// `nvsharectl set-capacity GPU SIZE`: memory the clients of one GPU may use
// together before auto mode makes them take turns.
#include <cstdio>
#include <cstdlib>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/units.h"

namespace nvshare::cli {

int run_set_capacity(const GlobalOptions&, const std::vector<std::string>& args)
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
    const std::string& gpu = args[0];
    return with_bus("setting the capacity", [&gpu, &size](BusClient& bus) {
        for (const auto& [path, interfaces] : bus.managed_objects()) {
            const auto it = interfaces.find(kGpuInterface);
            if (it == interfaces.end())
                continue;
            const auto& props = it->second;
            if (std::to_string(props.at("Index").get<uint32_t>()) == gpu ||
                props.at("UUID").get<std::string>() == gpu) {
                bus.set_gpu_capacity(path, *size);
                return kOk;
            }
        }
        fprintf(stderr,
                "nvsharectl: no GPU '%s' known to nvshared (it knows the GPUs the driver lists "
                "and those its clients use; "
                "see nvsharectl status)\n",
                gpu.c_str());
        return kNotFound;
    });
}

}  // namespace nvshare::cli
