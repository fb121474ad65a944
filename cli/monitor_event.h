// One line of `nvsharectl monitor`, for people or (--json) for programs.
// Pure: the monitor reads the events off the bus, these only format them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nvshare::cli {

// nvshared's Event signal (org.nvshare.Scheduler1(5)), or one the monitor
// makes of other signals: "gpu-added", "started", "stopped".
struct MonitorEvent {
    std::string event;
    uint64_t client = 0;  // 0: not about a client
    int32_t pid = 0;
    uint32_t uid = 0;
    std::string user;  // the uid's name
    std::string command;
    std::vector<std::string> gpus;
    std::map<std::string, std::string> details;
    std::string what;
};

// "12:00:01 granted     pid 42 (train.py, alice): granted GPU-…, exclusively"
std::string event_line(const MonitorEvent& event, const std::string& clock);
// {"time": …, "event": …, "client": …, …, "what": …}
nlohmann::json event_json(const MonitorEvent& event, const std::string& time);

}  // namespace nvshare::cli
