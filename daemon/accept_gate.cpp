#include "daemon/accept_gate.h"

#include <iterator>

namespace nvshare::daemon {

AcceptGate::User* AcceptGate::entry(uint32_t principal, Clock::time_point now)
{
    if (auto it = users_.find(principal); it != users_.end())
        return &it->second;
    if (users_.size() >= kMaxUsers) {
        // Drop those back to their burst and not refused lately: as if new.
        for (auto it = users_.begin(); it != users_.end();)
            it = it->second.connections.full(now) &&
                         now - it->second.log.logged_at >= kConnectionLogInterval
                     ? users_.erase(it)
                     : std::next(it);
        if (users_.size() >= kMaxUsers)
            return nullptr;
    }
    return &users_[principal];
}

bool AcceptGate::admit(uint32_t principal, Clock::time_point now)
{
    if (principal == 0)
        return true;
    User* u = entry(principal, now);
    return u != nullptr && u->connections.take(now);
}

bool AcceptGate::round_goes_on(int accepted, int admitted)
{
    return accepted < kAcceptsPerRound && admitted < kSetupsPerRound;
}

bool AcceptGate::pause_after(int accepted, int refused)
{
    return refused > 0 && 2 * refused >= accepted;
}

bool AcceptGate::round_due(Clock::time_point last_round, Clock::time_point now)
{
    return now - last_round >= kAcceptAtLeastEvery;
}

bool AcceptGate::log_refusal(uint32_t principal, Clock::time_point now, uint64_t* left_out)
{
    User* u = entry(principal, now);
    if (u == nullptr)
        return false;
    return u->log.due(now, kConnectionLogInterval, left_out);
}

}  // namespace nvshare::daemon
