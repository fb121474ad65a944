// The settings changed at run time, kept in <state dir>/state.json so they
// survive restarts and socket-activated idle exits.
#pragma once

#include <string>

#include "daemon/settings.h"

namespace nvshare::daemon {

class StateStore {
public:
    explicit StateStore(std::string directory);

    const std::string& path() const { return path_; }
    // What was saved; {} when there is nothing. A corrupt file is reported,
    // moved aside to state.json.corrupt for the admin, and yields {}.
    SettingsLayer load() const;
    // Writes atomically; false (logged) on failure.
    bool save(const SettingsLayer& layer) const;
    // Forgets everything saved; false (logged) on failure.
    bool clear() const;

private:
    std::string directory_;
    std::string path_;
};

}  // namespace nvshare::daemon
