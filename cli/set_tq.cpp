// `nvsharectl set-tq DURATION`: the longest hold while others wait.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/units.h"

namespace nvshare::cli {

int run_set_tq(const GlobalOptions&, const std::vector<std::string>& args)
{
    if (args.size() != 1) {
        fprintf(stderr, "nvsharectl: usage: set-tq DURATION (e.g. 30s, 500ms, 2min, 45)\n");
        return kUsage;
    }
    const auto tq = parse_duration(args[0]);
    if (!tq) {
        fprintf(stderr,
                "nvsharectl: invalid duration '%s' (valid: 1ms to 24h, written as 30s, 500ms, "
                "2min or plain seconds)\n",
                args[0].c_str());
        return kUsage;
    }
    return with_bus("setting the time quantum", [&tq](BusClient& bus) {
        bus.manager().TimeQuantumUSec(static_cast<uint64_t>(tq->count()));
        return kOk;
    });
}

}  // namespace nvshare::cli
