#include "daemon/state_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/files.h"
#include "daemon/log.h"

namespace nvshare::daemon {

StateStore::StateStore(std::string directory)
    : directory_(std::move(directory)), path_(directory_ + "/state.json")
{
}

SettingsLayer StateStore::load() const
{
    std::string error;
    const auto text = read_file(path_, &error);
    if (!text) {
        if (!error.empty())
            NVS_WARN("%s; using the configured settings", error.c_str());
        return {};
    }
    StateParse parsed = parse_state(*text);
    if (parsed.error) {
        const std::string aside = path_ + ".corrupt";
        NVS_WARN("%s is corrupt (%s); using the configured settings and moving it to %s",
                 path_.c_str(), parsed.error->c_str(), aside.c_str());
        if (rename(path_.c_str(), aside.c_str()) < 0)
            NVS_WARN("cannot move %s aside: %s", path_.c_str(), strerror(errno));
        return {};
    }
    return parsed.layer;
}

bool StateStore::save(const SettingsLayer& layer) const
{
    // One level, as systemd's StateDirectory= would have made it.
    if (mkdir(directory_.c_str(), 0755) < 0 && errno != EEXIST) {
        NVS_WARN("cannot create %s: %s; run-time changes will not survive a restart",
                 directory_.c_str(), strerror(errno));
        return false;
    }
    std::string error;
    if (!write_file_atomically(path_, serialize_state(layer), &error)) {
        NVS_WARN("%s; run-time changes will not survive a restart", error.c_str());
        return false;
    }
    return true;
}

bool StateStore::clear() const
{
    if (unlink(path_.c_str()) < 0 && errno != ENOENT) {
        NVS_WARN("cannot remove %s: %s", path_.c_str(), strerror(errno));
        return false;
    }
    return true;
}

}  // namespace nvshare::daemon
