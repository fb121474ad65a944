// What one D-Bus caller (a uid) may cost nvshared's loop and polkitd: the
// pure part (no I/O; the caller passes the time), so that every limit is
// tested against a fake clock.
//
// - A caller whose requests polkit refused kRefusalBurst times in a row is
//   refused at once, without asking polkit, until its refusals fall below
//   kRefusalsPerSecond on average: a loop of refused calls costs one
//   lookup and one reply each, never a polkit check.
// - At most kPendingPerCaller checks of one caller, and kPendingInAll of
//   everybody, wait for polkit at once: a stopped polkitd holds that many
//   replies until kPolkitTimeout, and anything beyond is refused at once.
// - A caller's refusals are logged at most once a second, with the count of
//   those left out since the last line.
// - The table keeps callers with a check pending, a refusal not yet paid
//   back or a log line in the last second: kMaxCallers of them; a caller
//   beyond that is refused as if too many checks were pending. An idle
//   caller's entry (and its count of refusals left out of the log) goes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>

#include "daemon/refusal_log.h"
#include "daemon/token_bucket.h"

namespace nvshare::daemon {

inline constexpr double kRefusalBurst = 10.0;
inline constexpr double kRefusalsPerSecond = 1.0;
inline constexpr unsigned kPendingPerCaller = 4;
inline constexpr unsigned kPendingInAll = 64;
inline constexpr size_t kMaxCallers = 4096;
inline constexpr std::chrono::seconds kRefusalLogInterval{1};

class CallerLimits {
public:
    using Clock = TokenBucket::Clock;

    enum class Admission {
        Ask,              // ask polkit; finished() must follow
        RefusedTooOften,  // its recent refusals exceed the rate: refuse now
        TooManyPending,   // checks pending (its own or everybody's): refuse now
    };

    // Before asking polkit about `uid`.
    Admission admit(uid_t uid, Clock::time_point now);
    // When polkit's answer (or its failure) for an admitted check came:
    // `refused` charges the caller one refusal.
    void finished(uid_t uid, bool refused, Clock::time_point now);
    // Charges a refusal decided without polkit (a property write by someone
    // other than root), for the same rate.
    void refused_without_asking(uid_t uid, Clock::time_point now);
    // How long until `uid`'s next check would be admitted (zero: now).
    Clock::duration retry_after(uid_t uid, Clock::time_point now);

    // Whether a refusal of `uid` is logged now: at most once per
    // kRefusalLogInterval. `*left_out`: refusals not logged since its last
    // line (only meaningful when true).
    bool log_refusal(uid_t uid, Clock::time_point now, uint64_t* left_out);

    size_t callers() const { return callers_.size(); }
    unsigned pending() const { return pending_; }

private:
    struct Caller {
        TokenBucket refusals{kRefusalsPerSecond, kRefusalBurst};
        unsigned pending = 0;
        RefusalLog log;
    };
    // The entry for `uid`, made if there is room (after dropping idle
    // ones); null when the table is full.
    Caller* entry(uid_t uid, Clock::time_point now);
    bool idle(Caller& c, Clock::time_point now);

    std::map<uid_t, Caller> callers_;
    unsigned pending_ = 0;
};

}  // namespace nvshare::daemon
