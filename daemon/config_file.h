// Reading the admin's config file, nvshare.conf(5).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/settings.h"

namespace nvshare::daemon {

// The settings in `path`, then in its drop-ins (config_drop_ins), each laid
// over the ones before (merge_layer). A missing `path` is no settings at all,
// unless `required` (named by --config): then, like an unreadable file or
// drop-in, it is an error (nullopt, logged). Bad lines are logged and
// skipped.
std::optional<SettingsLayer> load_config_file(const std::string& path, bool required);

// The drop-ins of `path`: PATH.d/*.conf (not hidden), in lexical order.
std::vector<std::string> config_drop_ins(const std::string& path);

}  // namespace nvshare::daemon
