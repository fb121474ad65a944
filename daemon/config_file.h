// Reading the admin's config file, nvshare.conf(5).
#pragma once

#include <optional>
#include <string>

#include "daemon/settings.h"

namespace nvshare::daemon {

// The settings in `path`. A missing file is no settings at all, unless
// `required` (named by --config): then, like an unreadable file, it is an
// error (nullopt, logged). Bad lines are logged and skipped.
std::optional<SettingsLayer> load_config_file(const std::string& path, bool required);

}  // namespace nvshare::daemon
