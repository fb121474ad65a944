// `nvsharectl monitor`: one line per change nvshared signals, until Ctrl-C.
// Runs the connection from its own poll() loop so that SIGINT/SIGTERM, read
// from a signalfd, end it cleanly.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"

namespace nvshare::cli {

namespace {

using nlohmann::json;

json variant_json(const sdbus::Variant& v)
{
    if (v.containsValueOfType<uint64_t>())
        return v.get<uint64_t>();
    if (v.containsValueOfType<uint32_t>())
        return v.get<uint32_t>();
    if (v.containsValueOfType<int32_t>())
        return v.get<int32_t>();
    if (v.containsValueOfType<bool>())
        return v.get<bool>();
    if (v.containsValueOfType<std::string>())
        return v.get<std::string>();
    if (v.containsValueOfType<std::vector<uint64_t>>())
        return v.get<std::vector<uint64_t>>();
    return "<" + v.peekValueType() + ">";
}

class Printer {
public:
    explicit Printer(bool as_json) : json_(as_json) {}

    void print(const std::string& path, const std::string& event, const json& values) const
    {
        if (json_) {
            printf("%s\n",
                   json{{"path", path}, {"event", event}, {"values", values}}.dump().c_str());
            return;
        }
        char stamp[16];
        const time_t now = time(nullptr);
        tm local{};
        strftime(stamp, sizeof stamp, "%H:%M:%S", localtime_r(&now, &local));
        std::string line = std::string(stamp) + " " + path + " " + event;
        for (const auto& [key, value] : values.items())
            line += " " + key + "=" + value.dump();
        printf("%s\n", line.c_str());
    }

private:
    bool json_;
};

void watch(sdbus::IConnection& connection, const Printer& printer)
{
    const std::string scope = std::string("path_namespace='") + kManagerPath + "'";
    connection.addMatch(
        "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'," +
            scope,
        [&printer](sdbus::Message& m) {
            std::string interface;
            std::map<std::string, sdbus::Variant> changed;
            std::vector<std::string> invalidated;
            m >> interface >> changed >> invalidated;
            json values = json::object();
            for (const auto& [name, value] : changed)
                values[name] = variant_json(value);
            printer.print(m.getPath(), "changed", values);
        },
        sdbus::floating_slot);
    connection.addMatch(
        "type='signal',interface='org.freedesktop.DBus.ObjectManager',member='InterfacesAdded'," +
            scope,
        [&printer](sdbus::Message& m) {
            sdbus::ObjectPath path;
            std::map<std::string, std::map<std::string, sdbus::Variant>> interfaces;
            m >> path >> interfaces;
            json values = json::object();
            if (const auto it = interfaces.find(kGpuInterface); it != interfaces.end())
                for (const auto& [name, value] : it->second)
                    if (name != "Clients")  // long, and read by nvsharectl status
                        values[name] = variant_json(value);
            printer.print(path, "added", values);
        },
        sdbus::floating_slot);
    connection.addMatch(
        std::string("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
                    "arg0='") +
            kBusName + "'",
        [&printer](sdbus::Message& m) {
            std::string name, old_owner, new_owner;
            m >> name >> old_owner >> new_owner;
            printer.print(kManagerPath, new_owner.empty() ? "stopped" : "started", json::object());
        },
        sdbus::floating_slot);
}

}  // namespace

int run_monitor(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (!args.empty()) {
        fprintf(stderr, "nvsharectl: monitor takes no arguments\n");
        return kUsage;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    const int signals = signalfd(-1, &mask, SFD_CLOEXEC);
    if (signals < 0) {
        perror("nvsharectl: signalfd");
        return kFailed;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);  // each change visible at once, even in a pipe
    const Printer printer(options.json);
    const int status = with_bus("monitoring", [&](BusClient& bus) {
        auto& connection = bus.connection();
        watch(connection, printer);
        // Fails (not running) before promising anything.
        const std::string version = bus.manager().Version();
        if (!options.json)
            printf("Monitoring nvshared %s; press Ctrl-C to stop.\n", version.c_str());
        for (;;) {
            while (connection.processPendingRequest()) {
            }
            const auto poll_data = connection.getEventLoopPollData();
            pollfd fds[] = {{poll_data.fd, poll_data.events, 0}, {signals, POLLIN, 0}};
            if (poll(fds, 2, poll_data.getPollTimeout()) < 0 && errno != EINTR) {
                perror("nvsharectl: poll");
                return kFailed;
            }
            if (fds[1].revents != 0)
                return kOk;
        }
    });
    close(signals);
    return status;
}

}  // namespace nvshare::cli
