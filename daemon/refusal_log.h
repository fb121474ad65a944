// One caller's refusals logged at most once per interval, each line with the
// count of those left out since the one before. Pure: the caller passes the
// time.
#pragma once

#include <cstdint>

#include "daemon/token_bucket.h"

namespace nvshare::daemon {

struct RefusalLog {
    using Clock = TokenBucket::Clock;

    Clock::time_point logged_at{};
    uint64_t left_out = 0;

    // Whether a refusal at `now` is logged (else it is counted as left out);
    // `*left_out` then holds those left out since the last line.
    bool due(Clock::time_point now, Clock::duration interval, uint64_t* left_out_now)
    {
        if (logged_at != Clock::time_point{} && now - logged_at < interval) {
            ++left_out;
            return false;
        }
        *left_out_now = left_out;
        left_out = 0;
        logged_at = now;
        return true;
    }
};

}  // namespace nvshare::daemon
