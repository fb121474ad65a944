// Where this process stands with the GPU lock, as an explicit state machine,
// and what nvshared last said about our hold. Pure logic: messages and times
// in, a state out; the client thread does the I/O (gate, driver, socket).
//
//   Idle --request sent--> Requested --Grant--> Holding
//                                        \--Grant, our data comes back--> SwappingIn
//   SwappingIn --swap-in done or overdue--> Holding
//   Holding/SwappingIn/Draining --Drop--> Draining (until the grace is 3/4 over)
//   Draining --Released sent--> Idle;  Holding --released early--> Idle
//   any --Revoked, connection lost--> Idle
#pragma once

#include <cstdint>
#include <optional>

#include "common/protocol.h"

namespace nvshare::preload {

enum class HoldState {
    Idle,        // neither holding nor asked
    Requested,   // asked, no grant yet
    SwappingIn,  // granted; the gate stays closed while our evicted data comes back
    Holding,     // granted; the gate is open
    Draining,    // told to let go: the gate is closed, our work drains
};

class Holding {
public:
    HoldState state() const { return state_; }
    // Granted and not yet given back (SwappingIn, Holding, Draining).
    bool holds() const;
    // Until when the current state lasts at the latest: the swap-in's limit
    // (SwappingIn) or the drop's (Draining); none in other states.
    std::optional<uint64_t> deadline() const;

    bool contended() const { return contended_; }
    bool oversubscribed() const { return oversubscribed_; }
    uint64_t keep_bytes() const { return keep_bytes_; }

    // Idle -> Requested.
    void request_sent();
    // Any -> Holding, with what the grant says.
    void granted(const proto::GrantPayload& g);
    // Holding -> SwappingIn until `deadline`.
    void await_swap_in(uint64_t deadline);
    // SwappingIn -> Holding when the swap-in is over (`busy` false) or
    // overdue; true if that happened (the gate opens).
    bool swap_in_over(bool busy, uint64_t now);
    // A drop: cancels any swap-in; while holding -> Draining until 3/4 of
    // the grace is over.
    void dropped(const proto::DropPayload& d, uint64_t now);
    // Somebody waits now: what fits beside them.
    void contention(const proto::GrantPayload& c);
    // Released sent, lock revoked, or connection lost: -> Idle.
    void released();
    void revoked();
    void lost();

private:
    HoldState state_ = HoldState::Idle;
    uint64_t deadline_ = 0;  // meaningful in SwappingIn and Draining only
    bool contended_ = false;
    bool oversubscribed_ = false;  // the daemon's latest word on our GPUs
    uint64_t keep_bytes_ = 0;      // managed memory we may leave there when we let go
};

}  // namespace nvshare::preload
