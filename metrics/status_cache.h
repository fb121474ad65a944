// nvshared's status for a scrape, shared by the scrapes that come together:
// nvshared serves each user 20 status queries a second, and
// nvshare-metrics.socket starts one nvshare-metrics per connection, so
// without sharing a burst of scrapes would find the rate spent and report
// nvshare_up 0. In `dir` (the service's runtime directory) one scrape at a
// time holds status.lock; it takes status.json when that is at most
// kStatusFresh old, else asks nvshared and leaves its answer there. The
// others wait for the lock (at most kLockWait, longer than a query may
// take) and so find that answer.
#pragma once

#include <chrono>
#include <string>

namespace nvshare::metrics {

inline constexpr std::chrono::seconds kStatusFresh{1};
inline constexpr std::chrono::seconds kLockWait{6};

// The status text, or "" with `*error` saying why. An empty `dir`, or one
// that cannot be used (said on stderr), means asking nvshared directly.
std::string shared_status(const std::string& dir, const std::string& socket, std::string* error);

}  // namespace nvshare::metrics
