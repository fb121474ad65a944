#include "daemon/status_service.h"

#include <algorithm>

#include "common/protocol.h"
#include "daemon/status.h"

namespace nvshare::daemon {

StatusService::StatusService(const Scheduler& scheduler, const Principals& principals)
    : scheduler_(scheduler), principals_(principals)
{
}

Duration StatusService::wait(uint32_t uid, TimePoint now)
{
    if (uid == 0)
        return Duration::zero();
    auto it = budget_.try_emplace(principals_.of(uid), kStatusPerSecond, kStatusBurst).first;
    if (it->second.take(now))
        return Duration::zero();
    return std::max(it->second.wait(now), Duration(1));
}

Duration StatusService::socket_wait(uint32_t uid, size_t unread, TimePoint now)
{
    // What the user's connections left unread counts against them: the
    // next status waits until they read it (or are disconnected for not).
    if (uid != 0 && unread >= kMaxUnreadPerPrincipal)
        return Duration(kUnreadRetry);
    return wait(uid, now);
}

const std::string& StatusService::document(size_t connections, TimePoint now)
{
    if (stale_ || now - rendered_at_ > kStatusMaxAge) {
        text_ = status_text(scheduler_, connections, now, proto::kMaxStatusPayload);
        rendered_at_ = now;
        stale_ = false;
    }
    return text_;
}

}  // namespace nvshare::daemon
