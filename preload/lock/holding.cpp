#include "preload/lock/holding.h"

namespace nvshare::preload {

bool Holding::holds() const
{
    return state_ == HoldState::SwappingIn || state_ == HoldState::Holding ||
           state_ == HoldState::Draining;
}

std::optional<uint64_t> Holding::deadline() const
{
    if (state_ == HoldState::SwappingIn || state_ == HoldState::Draining)
        return deadline_;
    return std::nullopt;
}

void Holding::request_sent()
{
    if (state_ == HoldState::Idle)
        state_ = HoldState::Requested;
}

void Holding::granted(const proto::GrantPayload& g)
{
    state_ = HoldState::Holding;
    contended_ = (g.flags & proto::kGrantContended) != 0;
    oversubscribed_ = (g.flags & proto::kGrantOversubscribed) != 0;
    // Somebody already waits: nvshared says what fits beside them.
    keep_bytes_ = contended_ ? proto::keep_from_wire(g.keep_mib) : 0;
}

void Holding::await_swap_in(uint64_t deadline)
{
    if (state_ != HoldState::Holding)
        return;
    state_ = HoldState::SwappingIn;
    deadline_ = deadline;
}

bool Holding::swap_in_over(bool busy, uint64_t now)
{
    if (state_ != HoldState::SwappingIn || (busy && now < deadline_))
        return false;
    state_ = HoldState::Holding;
    return true;
}

void Holding::dropped(const proto::DropPayload& d, uint64_t now)
{
    oversubscribed_ = (d.flags & proto::kGrantOversubscribed) != 0;
    keep_bytes_ = proto::keep_from_wire(d.keep_mib);
    if (!holds())
        return;
    state_ = HoldState::Draining;
    deadline_ = now + d.grace_us * 1000 * 3 / 4;
}

void Holding::contention(const proto::GrantPayload& c)
{
    contended_ = true;
    oversubscribed_ = (c.flags & proto::kGrantOversubscribed) != 0;
    keep_bytes_ = proto::keep_from_wire(c.keep_mib);
}

void Holding::released()
{
    state_ = HoldState::Idle;
}

void Holding::revoked()
{
    state_ = HoldState::Idle;
}

void Holding::lost()
{
    state_ = HoldState::Idle;
}

}  // namespace nvshare::preload
