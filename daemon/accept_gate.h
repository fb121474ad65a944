// How fast nvshared takes new connections: the pure part (no I/O; the
// caller passes the time), tested against a fake clock.
//
// - Each user (principal) other than root opens kConnectionsPerSecond
//   connections a second on average, kConnectionBurst at once. A
//   connection beyond that is refused as soon as it is accepted, before
//   anything is set up for it: the cheapest the daemon can make it.
// - A round of the loop accepts at most kAcceptsPerRound connections, of
//   which it sets up at most kSetupsPerRound (refusing one costs a few
//   system calls, setting one up much more), and the loop serves the
//   clients' messages that are ready before the next round.
// - A round in which at least half of what was accepted was refused for
//   its rate (a storm of one user's connections) is followed by
//   kAcceptPause without accepting: the storm waits in the kernel's backlog
//   and costs the daemon no CPU meanwhile, so that it is idle, and at once
//   on the CPU, when a client's message comes. Other users' new connections
//   wait in the backlog with the storm's, served at kAcceptsPerRound per
//   kAcceptPause at least.
// - A user's refusals are logged at most once per kRefusalLogInterval, with
//   the count of those left out since its last line.
// - The table keeps users whose burst is not back yet or who were refused in
//   the last kRefusalLogInterval: at most kMaxUsers; a user beyond that is
//   refused as if over its rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>

#include "daemon/refusal_log.h"
#include "daemon/token_bucket.h"

namespace nvshare::daemon {

inline constexpr double kConnectionsPerSecond = 100.0;
inline constexpr double kConnectionBurst = 1000.0;
inline constexpr int kAcceptsPerRound = 64;
inline constexpr int kSetupsPerRound = 16;
inline constexpr std::chrono::milliseconds kAcceptPause{1};
// The listener's priority is below the clients': while clients keep the
// loop busy, a client's turn takes a round of new connections once this
// long has passed without one, so that none is starved.
inline constexpr std::chrono::milliseconds kAcceptAtLeastEvery{5};
inline constexpr std::chrono::seconds kConnectionLogInterval{1};
inline constexpr size_t kMaxUsers = 4096;

class AcceptGate {
public:
    using Clock = TokenBucket::Clock;

    // Whether a connection of `principal` accepted now is served (charged
    // to its rate); root's always is.
    bool admit(uint32_t principal, Clock::time_point now);
    // Whether a round that has accepted `accepted` connections, set up
    // `admitted` of them, accepts another.
    static bool round_goes_on(int accepted, int admitted);
    // After a round that accepted `accepted` connections, `refused` of them
    // by admit(): whether to stop accepting for kAcceptPause.
    static bool pause_after(int accepted, int refused);
    // Whether a client's turn takes a round of new connections now, the
    // last round having begun at `last_round` (kAcceptAtLeastEvery).
    static bool round_due(Clock::time_point last_round, Clock::time_point now);
    // Whether a refusal of `principal` is logged now. `*left_out`: its
    // refusals not logged since its last line (only meaningful when true).
    bool log_refusal(uint32_t principal, Clock::time_point now, uint64_t* left_out);

    size_t users() const { return users_.size(); }

private:
    struct User {
        TokenBucket connections{kConnectionsPerSecond, kConnectionBurst};
        RefusalLog log;
    };
    User* entry(uint32_t principal, Clock::time_point now);

    std::map<uint32_t, User> users_;
};

}  // namespace nvshare::daemon
