// How much of a client's swappable (managed) memory claim counts for other
// clients, on one GPU. What the host confirms counts (the process's GPU
// memory as NVML counts it, and its resident host memory, where swapped-out
// copies live); an unconfirmed increase counts too for kClaimGrace after it
// was reported, or after the client's first turn since where it waited for
// it (memory that waits for its turn or for room, or was just placed, is not
// yet where the host sees it), and then no more until the host confirms it. A
// client gets a new grace only once the host confirmed the most the
// previous one covered: a claim nobody confirms counts for others one grace
// per connection. A user (principal) has at most one such grace unpaid on a
// GPU at a time, and one left unpaid by a process that ended bars new ones
// there for kClaimDebt (Room): reconnecting buys no new grace. Pure logic on
// the caller's clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

// Long enough for an honest process's new memory to be placed where the
// host sees it: at its grant the library waits at most 10 s for room on the
// GPU before it places what found none in host memory (preload/swap/
// tuning.h, kRoomWaitMaxNs), and the host's figures are read every second
// (kMemoryWatchInterval); the rest is margin for the grant itself.
inline constexpr Duration kClaimGrace = std::chrono::seconds(15);

// How long a user whose process ended with a grace the host never confirmed
// gets no new grace on that GPU: their claims count for others as the host
// confirms them, so a claim nobody confirms changes others' scheduling for
// at most kClaimGrace in every kClaimDebt (2.5%). An honest process killed
// while it waited for its first turn costs its user only this: the room of
// their next processes there is made as their memory is placed (Shrink), not
// kept for them ahead.
inline constexpr Duration kClaimDebt = std::chrono::minutes(10);

// Where the client stands in the GPU's turns when its claim is counted.
enum class ClaimTurn : uint8_t {
    None,     // it does not wait for the GPU
    Waits,    // it waits for its turn
    Granted,  // its turn came just now
};

class ClaimGrace {
public:
    // What of `claim` counts for others at `now`, `confirmed` being what
    // the host confirms of it; starts a grace where the claim exceeds that
    // and one is due. A running grace lasts at least kClaimGrace from `now`
    // while the client waits for its first turn since the grace began, and
    // from that turn's grant; not from a later one. `may_start` false: no
    // new grace starts (a running one goes on).
    uint64_t counted(uint64_t claim, uint64_t confirmed, TimePoint now,
                     ClaimTurn turn = ClaimTurn::None, bool may_start = true);
    // The client left the line without its turn: its grace lasts no longer
    // for any wait of its from now on.
    void left_line();
    // When the running grace ends (counted() then changes), if one runs.
    std::optional<TimePoint> ends() const { return until_; }
    // The most claimed during the latest grace that the host has not yet
    // confirmed (0: a new grace is due where a claim exceeds what it confirms).
    uint64_t owed() const { return owed_; }

private:
    std::optional<TimePoint> until_;
    uint64_t owed_ = 0;
    bool turn_over_ = false;  // the running grace's first turn came, or was given up
};

}  // namespace nvshare::daemon
