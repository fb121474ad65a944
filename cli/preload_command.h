#pragma once

#include "cli/command.h"

namespace nvshare::cli {

// `nvsharectl preload enable|disable|status|merge`.
int run_preload(const GlobalOptions& options, const std::vector<std::string>& args);

}  // namespace nvshare::cli
