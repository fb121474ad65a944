// `nvsharectl revoke CLIENT`: take the lock away from a client now.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/client_ref.h"
#include "cli/exit_codes.h"

namespace nvshare::cli {

int run_revoke(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (args.size() != 1) {
        fprintf(stderr, "nvsharectl: usage: revoke CLIENT (a client id, or pid:N)\n");
        return kUsage;
    }
    const auto ref = parse_client_ref(args[0]);
    if (!ref) {
        fprintf(stderr,
                "nvsharectl: invalid client '%s' (valid: a client id from nvsharectl status, or "
                "pid:N)\n",
                args[0].c_str());
        return kUsage;
    }
    return with_bus(options, "revoking", [&ref](BusClient& bus) -> int {
        std::vector<uint64_t> ids;
        if (!ref->by_pid) {
            ids.push_back(ref->value);
        } else {
            for (const auto& c : bus.manager().ListClients())
                if (static_cast<uint64_t>(c.get<1>()) == ref->value)
                    ids.push_back(c.get<0>());
            if (ids.empty()) {
                fprintf(stderr, "nvsharectl: no client with pid %llu\n",
                        static_cast<unsigned long long>(ref->value));
                return kNotFound;
            }
        }
        int status = kOk;
        size_t revoked = 0;
        for (uint64_t id : ids) {
            try {
                bus.manager().RevokeClient(id);
                ++revoked;
            } catch (const sdbus::Error& e) {
                // A process may have one client holding and others not.
                if (e.getName() == "org.nvshare.Scheduler1.Error.NotHolding" && ref->by_pid)
                    continue;
                status = report_bus_error(e, "revoking client " + std::to_string(id));
            }
        }
        if (ref->by_pid && revoked == 0 && status == kOk) {
            fprintf(stderr, "nvsharectl: no client of pid %llu holds a lock\n",
                    static_cast<unsigned long long>(ref->value));
            return kFailed;
        }
        return status;
    });
}

}  // namespace nvshare::cli
