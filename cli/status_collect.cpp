// Reads `nvsharectl status`'s document over D-Bus: the daemon renders it
// (GetStatus), so that it is the same document as the lock socket's.
#include "cli/bus_client.h"
#include "cli/status_view.h"

namespace nvshare::cli {

nlohmann::json collect_status(BusClient& bus)
{
    return nlohmann::json::parse(bus.manager().GetStatus());
}

}  // namespace nvshare::cli
