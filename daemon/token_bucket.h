// A token bucket: `rate` events a second on average, `burst` at once. Pure
// (the caller passes the time), so the daemon's rate limits test directly.
#pragma once

#include <algorithm>
#include <chrono>

namespace nvshare::daemon {

class TokenBucket {
public:
    using Clock = std::chrono::steady_clock;

    TokenBucket(double rate_per_second, double burst)
        : rate_(rate_per_second), burst_(burst), tokens_(burst)
    {
    }

    // Takes a token if there is one (true); else leaves the bucket as it is.
    bool take(Clock::time_point now)
    {
        refill(now);
        if (tokens_ < 1.0)
            return false;
        tokens_ -= 1.0;
        return true;
    }

    // Whether take() would succeed now (nothing taken).
    bool available(Clock::time_point now)
    {
        refill(now);
        return tokens_ >= 1.0;
    }

    // Whether the bucket is back to its burst (as if never used).
    bool full(Clock::time_point now)
    {
        refill(now);
        return tokens_ >= burst_;
    }

    // How long from `now` until take() succeeds.
    Clock::duration wait(Clock::time_point now)
    {
        refill(now);
        if (tokens_ >= 1.0)
            return Clock::duration::zero();
        return std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>((1.0 - tokens_) / rate_)) +
               Clock::duration(1);
    }

private:
    void refill(Clock::time_point now)
    {
        if (last_ != Clock::time_point{} && now > last_)
            tokens_ = std::min(
                burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
        last_ = std::max(last_, now);
    }

    double rate_;
    double burst_;
    double tokens_;
    Clock::time_point last_{};
};

}  // namespace nvshare::daemon
