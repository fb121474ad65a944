// The nvsharectl commands that talk to nvshared over D-Bus, one file each.
// Built without D-Bus support, each says so (no_dbus.cpp).
#pragma once

#include "cli/command.h"

namespace nvshare::cli {

int run_status(const GlobalOptions& options, const std::vector<std::string>& args);
int run_set_tq(const GlobalOptions& options, const std::vector<std::string>& args);
int run_anti_thrashing(const GlobalOptions& options, const std::vector<std::string>& args);
int run_set_capacity(const GlobalOptions& options, const std::vector<std::string>& args);
int run_revoke(const GlobalOptions& options, const std::vector<std::string>& args);
int run_reset(const GlobalOptions& options, const std::vector<std::string>& args);
int run_monitor(const GlobalOptions& options, const std::vector<std::string>& args);

}  // namespace nvshare::cli
