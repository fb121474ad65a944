// `nvsharectl set-tq [--gpu GPU] DURATION`: the longest hold while others
// wait, host-wide or a GPU's own.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/time_quantum.h"
#include "common/units.h"

namespace nvshare::cli {

int run_set_tq(const GlobalOptions& options, const std::vector<std::string>& args)
{
    // CLI11 has checked that there is exactly one argument.
    const auto tq = parse_duration(args[0]);
    if (!tq) {
        fprintf(stderr, "nvsharectl: invalid duration '%s' (use e.g. 30s, 500ms, 2min)\n",
                args[0].c_str());
        return kUsage;
    }
    // Checked here too, so that the message speaks in the user's units.
    if (!valid_time_quantum(*tq)) {
        fprintf(stderr, "nvsharectl: time quantum '%s' is out of the valid range, %s\n",
                args[0].c_str(), kTimeQuantumRange);
        return kUsage;
    }
    const auto usec = static_cast<uint64_t>(tq->count());
    return with_bus(options, "setting the time quantum", [&options, usec](BusClient& bus) {
        if (options.gpu.empty()) {
            bus.manager().SetTimeQuantum(usec, kNoInteraction);
            return kOk;
        }
        const auto path = bus.find_gpu(options.gpu);
        if (!path)
            return kNotFound;
        bus.gpu_object(*path)
            ->callMethod("SetTimeQuantum")
            .onInterface(kGpuInterface)
            .withArguments(usec, kNoInteraction);
        return kOk;
    });
}

}  // namespace nvshare::cli
