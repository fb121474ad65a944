#include "daemon/status_line.h"

#include <cstdio>

#include "common/mode.h"

namespace nvshare::daemon {

std::string status_line(const Scheduler& scheduler)
{
    const size_t holders = scheduler.holding_count(), waiters = scheduler.waiting_count();
    char line[256];
    snprintf(line, sizeof line,
             "STATUS=%zu client(s), %zu holding, %zu waiting on %zu GPU(s); mode %s",
             scheduler.clients().size(), holders, waiters, scheduler.gpus().size(),
             proto::mode_name(scheduler.settings().mode));
    return line;
}

StatusLine::~StatusLine()
{
    sd_event_source_disable_unref(timer_);
}

bool StatusLine::init(sd_event* event)
{
    if (!notifier_.enabled())
        return true;
    if (sd_event_add_time(event, &timer_, CLOCK_MONOTONIC, UINT64_MAX, 100000, on_timer, this) < 0)
        return false;
    sd_event_source_set_enabled(timer_, SD_EVENT_OFF);
    return true;
}

void StatusLine::update(const Scheduler& scheduler)
{
    std::string line = status_line(scheduler);
    if (line_ != line) {
        line_ = std::move(line);
        send(Clock::now());
    }
}

void StatusLine::send(TimePoint now)
{
    if (!notifier_.enabled() || line_ == sent_)
        return;
    TimePoint next = sent_at_ + kStatusLineInterval;
    if (now >= next) {
        if (notifier_.send(line_)) {
            sent_ = line_;
            sent_at_ = now;
            return;
        }
        next = now + kStatusLineInterval;  // the manager's queue is full: later
    }
    sd_event_source_set_time(timer_, to_usec(next.time_since_epoch()));
    sd_event_source_set_enabled(timer_, SD_EVENT_ONESHOT);
}

int StatusLine::on_timer(sd_event_source*, uint64_t, void* self)
{
    static_cast<StatusLine*>(self)->send(Clock::now());
    return 0;
}

}  // namespace nvshare::daemon
