// Status queries, whichever way they come (the lock socket, D-Bus): one rate
// per user (principal) other than root, and one rendered document (status.h),
// made again only when the state changed or it aged. Pure (the caller passes
// the time), tested against a fake clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "daemon/principals.h"
#include "daemon/scheduler.h"
#include "daemon/token_bucket.h"

namespace nvshare::daemon {

// Status queries of one user other than root: on average, and at once.
inline constexpr double kStatusPerSecond = 20.0;
inline constexpr double kStatusBurst = 20.0;
// A rendered status is sent again while nothing changed and it is this young
// (its running totals, held and waited time, may lag by that much).
inline constexpr auto kStatusMaxAge = std::chrono::milliseconds(100);
// What one user's connections may leave unread before that user's next
// status query waits (a status of up to 64 MiB still goes, one at a time),
// and how long it waits before it is looked at again.
inline constexpr size_t kMaxUnreadPerPrincipal = size_t{4} << 20;
inline constexpr auto kUnreadRetry = std::chrono::milliseconds(100);

class StatusService {
public:
    // Both must outlive the service.
    StatusService(const Scheduler& scheduler, const Principals& principals);

    // Zero when `uid` may query now (the query is charged to its
    // principal's rate), else how long until it may; root always may.
    Duration wait(uint32_t uid, TimePoint now);
    // wait() for a query on the lock socket, whose user's connections have
    // left `unread` bytes unread: from kMaxUnreadPerPrincipal on, the query
    // waits kUnreadRetry (uncharged) for them to read.
    Duration socket_wait(uint32_t uid, size_t unread, TimePoint now);
    // The rendered status of the daemon with `connections` connections.
    const std::string& document(size_t connections, TimePoint now);
    // The state changed: the next document() is made again.
    void changed() { stale_ = true; }

private:
    const Scheduler& scheduler_;
    const Principals& principals_;
    std::map<uint32_t, TokenBucket> budget_;  // by principal; root has none
    std::string text_;
    TimePoint rendered_at_{};
    bool stale_ = true;
};

}  // namespace nvshare::daemon
