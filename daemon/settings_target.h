// What SettingsControl changes settings in, and all it needs of the daemon:
// the scheduler, changed directly, then one call after each change. The
// Server implements it; SettingsControl knows nothing else of the I/O shell
// (so settings_control.h does not include server.h), and a test can stand in
// for the Server.
#pragma once

#include <string>
#include <vector>

#include "daemon/priority_rules.h"
#include "daemon/scheduler.h"

namespace nvshare::daemon {

// A setting changed at run time, as one typed event.
struct SettingChange {
    std::string setting;        // "anti-thrashing", "time-quantum", "capacity"
    std::string gpu_uuid;       // empty: host-wide
    std::string value;          // as the journal and the bus carry it
    std::string text;           // the log line
    bool tell_clients = false;  // what the Settings message carries changed
};

class SettingsTarget {
public:
    // The scheduler whose settings are read and changed, then
    // after_settings_change() with what changed.
    virtual Scheduler& settings_scheduler() = 0;
    // The one path after a setting changed: logs it (the journal and the
    // bus's Event signal, from the same details), tells the clients where
    // the Settings message changed, and lets the status, the timers and the
    // bus's properties catch up.
    virtual void after_settings_change(const SettingChange& change) = 0;
    // The config file's settings that no run-time change overrides: the
    // priority rules, the grace period and when waits are logged (reload).
    virtual void set_admin_rules(std::vector<PriorityRule> rules, Duration grace,
                                 Duration log_waits_after) = 0;

protected:
    ~SettingsTarget() = default;
};

}  // namespace nvshare::daemon
