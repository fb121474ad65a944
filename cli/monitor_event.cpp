#include "cli/monitor_event.h"

#include <cstdio>

namespace nvshare::cli {

std::string event_line(const MonitorEvent& e, const std::string& clock)
{
    char head[64];
    // Padded to the longest name ("setting-changed") so the messages line up.
    snprintf(head, sizeof head, "%s %-15s ", clock.c_str(), e.event.c_str());
    std::string line = head;
    if (e.client != 0)
        line += "pid " + std::to_string(e.pid) + " (" + e.command + ", " + e.user + "): ";
    return line + e.what;
}

nlohmann::json event_json(const MonitorEvent& e, const std::string& time)
{
    nlohmann::json j{{"time", time}, {"event", e.event}};
    if (e.client != 0) {
        j["client"] = e.client;
        j["pid"] = e.pid;
        j["uid"] = e.uid;
        j["user"] = e.user;
        j["command"] = e.command;
    }
    j["gpus"] = e.gpus;
    j["details"] = e.details;
    j["what"] = e.what;
    return j;
}

}  // namespace nvshare::cli
