// `nvsharectl status`: per GPU, the settings, memory, holder, queue and
// clients; --json for scripts, --query/--format for CSV. Read over D-Bus;
// where nvshared is not on the bus (no system bus, --no-bus), from the lock
// socket, which serves the same document.
#include <cstdio>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "cli/status_query.h"
#include "cli/status_view.h"
#include "common/lock_client.h"

namespace nvshare::cli {

int run_status(const GlobalOptions& options, const std::vector<std::string>&)
{
    using nlohmann::json;
    // Checked before anything is asked of nvshared.
    std::optional<QueryRequest> query;
    if (!options.query.empty() || !options.format.empty()) {
        std::string error;
        if (options.query.empty())
            error = "--format needs --query=FIELDS";
        else
            query =
                parse_query(options.query, options.format.empty() ? "csv" : options.format, &error);
        if (!error.empty()) {
            fprintf(stderr, "nvsharectl: %s\n", error.c_str());
            return kUsage;
        }
    }
    json doc;
    try {
        BusClient bus;
        doc = collect_status(bus);
    } catch (const sdbus::Error& e) {
        if (!bus_unreachable(e))
            return report_bus_error(e, "status");
        std::string error;
        const std::string text = LockClient::query_status(options.socket_path, &error);
        if (text.empty())
            return report_bus_error(e, "status");  // not there either: not running
        fprintf(stderr, "nvsharectl: nvshared is not on the system bus (%s); state read from %s\n",
                e.getMessage().c_str(), options.socket_path.c_str());
        doc = json::parse(text, nullptr, false);
        if (doc.is_discarded()) {
            fprintf(stderr, "nvsharectl: the status from %s is not JSON\n",
                    options.socket_path.c_str());
            return kFailed;
        }
    } catch (const json::exception& e) {
        fprintf(stderr, "nvsharectl: the status from nvshared is not JSON (%s)\n", e.what());
        return kFailed;
    }
    add_user_names(doc);
    if (query)
        fputs(render_query(doc, *query).c_str(), stdout);
    else if (options.json)
        printf("%s\n", doc.dump(2).c_str());
    else
        fputs(render_status(doc, options.full).c_str(), stdout);
    return kOk;
}

}  // namespace nvshare::cli
