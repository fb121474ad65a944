// `nvsharectl monitor`: one line per event nvshared signals (granted,
// waiting, released, revoked, a setting changed, …), until Ctrl-C.
// Runs the connection from its own poll() loop so that SIGINT/SIGTERM, read
// from a signalfd, end it cleanly.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "cli/bus_client.h"
#include "cli/bus_commands.h"
#include "cli/exit_codes.h"
#include "cli/monitor_event.h"
#include "common/units.h"
#include "common/user_name.h"

namespace nvshare::cli {

namespace {

// "12:00:01" for people, ISO 8601 with the zone for --json.
std::string now_text(bool iso)
{
    char text[40];
    const time_t now = time(nullptr);
    tm local{};
    strftime(text, sizeof text, iso ? "%Y-%m-%dT%H:%M:%S%z" : "%H:%M:%S",
             localtime_r(&now, &local));
    return text;
}

class Printer {
public:
    explicit Printer(bool as_json) : json_(as_json) {}

    void print(MonitorEvent event) const
    {
        if (event.client != 0)
            event.user = user_name(event.uid);
        const std::string line =
            json_ ? event_json(event, now_text(true))
                        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  : event_line(event, now_text(false));
        printf("%s\n", line.c_str());
    }

private:
    bool json_;
};

// What a new GPU object says of itself: "GPU 0: NVIDIA H100 (GPU-…), 80.0 GiB".
MonitorEvent gpu_added(const std::map<std::string, sdbus::Variant>& properties)
{
    MonitorEvent e;
    e.event = "gpu-added";
    const auto get = [&](const char* name) -> const sdbus::Variant* {
        const auto it = properties.find(name);
        return it == properties.end() ? nullptr : &it->second;
    };
    std::string uuid, name;
    uint32_t index = 0;
    uint64_t memory = 0;
    if (const auto* v = get("UUID"); v != nullptr && v->containsValueOfType<std::string>())
        uuid = v->get<std::string>();
    if (const auto* v = get("Name"); v != nullptr && v->containsValueOfType<std::string>())
        name = v->get<std::string>();
    if (const auto* v = get("Index"); v != nullptr && v->containsValueOfType<uint32_t>())
        index = v->get<uint32_t>();
    if (const auto* v = get("PhysicalMemory"); v != nullptr && v->containsValueOfType<uint64_t>())
        memory = v->get<uint64_t>();
    e.gpus = {uuid};
    e.what =
        "GPU " + std::to_string(index) + ": " + name + " (" + uuid + "), " + format_size(memory);
    return e;
}

void watch(sdbus::IConnection& connection, const Printer& printer)
{
    const std::string scope = std::string("path_namespace='") + kManagerPath + "'";
    connection.addMatch(
        std::string("type='signal',interface='") + kManagerInterface + "',member='Event'," + scope,
        [&printer](sdbus::Message& m) {
            MonitorEvent e;
            m >> e.event >> e.client >> e.pid >> e.uid >> e.command >> e.gpus >> e.details >>
                e.what;
            printer.print(std::move(e));
        },
        sdbus::floating_slot);
    connection.addMatch(
        "type='signal',interface='org.freedesktop.DBus.ObjectManager',member='InterfacesAdded'," +
            scope,
        [&printer](sdbus::Message& m) {
            sdbus::ObjectPath path;
            std::map<std::string, std::map<std::string, sdbus::Variant>> interfaces;
            m >> path >> interfaces;
            if (const auto it = interfaces.find(kGpuInterface); it != interfaces.end())
                printer.print(gpu_added(it->second));
        },
        sdbus::floating_slot);
    connection.addMatch(
        std::string("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
                    "arg0='") +
            kBusName + "'",
        [&printer](sdbus::Message& m) {
            std::string name, old_owner, new_owner;
            m >> name >> old_owner >> new_owner;
            const bool started = !new_owner.empty();
            MonitorEvent e;
            e.event = started ? "started" : "stopped";
            e.what = started ? "nvshared started" : "nvshared stopped";
            printer.print(std::move(e));
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
    const int status = with_bus(options, "monitoring", [&](BusClient& bus) {
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
