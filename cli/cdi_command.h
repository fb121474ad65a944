#pragma once

#include "cli/command.h"

namespace nvshare::cli {

// `nvsharectl cdi generate|list`: the CDI spec that gives containers nvshare.
int run_cdi(const GlobalOptions& options, const std::vector<std::string>& args);

}  // namespace nvshare::cli
