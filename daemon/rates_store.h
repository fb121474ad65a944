// The rates measured on each GPU (measured_rates.h), kept in
// <state dir>/rates.json by GPU UUID so that they survive restarts and
// socket-activated idle exits: a process's first switch after one is then
// costed at this host's rates too.
#pragma once

#include <map>
#include <string>

#include "daemon/measured_rates.h"

namespace nvshare::daemon {

class RatesStore {
public:
    explicit RatesStore(std::string directory);

    const std::string& path() const { return path_; }
    // What was saved, by GPU UUID; {} when there is nothing. An entry that
    // is not a plausible one is left out, a file that is not JSON is
    // reported and ignored (the next save replaces it).
    std::map<std::string, MeasuredRates> load() const;
    // Writes atomically; false (logged) on failure.
    bool save(const std::map<std::string, MeasuredRates>& rates) const;

private:
    std::string directory_;
    std::string path_;
};

}  // namespace nvshare::daemon
