// `nvsharectl set-tq DURATION`: the longest hold while others wait.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "common/time_quantum.h"
#include "common/units.h"

namespace nvshare::cli {

int run_set_tq(const GlobalOptions&, const std::vector<std::string>& args)
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
    return with_bus("setting the time quantum", [&tq](BusClient& bus) {
        bus.manager().TimeQuantumUSec(static_cast<uint64_t>(tq->count()));
        return kOk;
    });
}

}  // namespace nvshare::cli
