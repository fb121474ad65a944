// systemd's STATUS= line (clients, holders, waiters, GPUs, mode), sent
// through the notify socket when it changes: at most once per
// kStatusLineInterval and never blocking; a line not sent now is sent later,
// on a timer of its own.
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <string>

#include "daemon/notify.h"
#include "daemon/scheduler.h"

namespace nvshare::daemon {

inline constexpr auto kStatusLineInterval = std::chrono::seconds(1);

// The line for the scheduler's state ("STATUS=..."). Pure.
std::string status_line(const Scheduler& scheduler);

class StatusLine {
public:
    // `notifier` must outlive the line.
    explicit StatusLine(Notifier& notifier) : notifier_(notifier) {}
    ~StatusLine();
    StatusLine(const StatusLine&) = delete;
    StatusLine& operator=(const StatusLine&) = delete;

    // Sets up its timer on `event` where there is a notify socket; false on
    // failure.
    bool init(sd_event* event);
    // Sends the line for the scheduler's state if it changed, now or later.
    void update(const Scheduler& scheduler);

private:
    void send(TimePoint now);
    static int on_timer(sd_event_source* s, uint64_t usec, void* self);

    Notifier& notifier_;
    std::string line_;  // the latest
    std::string sent_;  // the one last sent, at sent_at_
    TimePoint sent_at_{};
    sd_event_source* timer_ = nullptr;
};

}  // namespace nvshare::daemon
