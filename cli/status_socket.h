#pragma once

#include "cli/command.h"

namespace nvshare::cli {

int run_socket_status(const GlobalOptions& options, const std::vector<std::string>& args);

}  // namespace nvshare::cli
