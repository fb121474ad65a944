// One nvsharectl subcommand. Each lives in its own file and is listed in
// commands.cpp.
#pragma once

#include <string>
#include <vector>

namespace nvshare::cli {

struct GlobalOptions {
    bool json = false;        // --json: machine-readable output
    std::string socket_path;  // --socket: the lock socket (status without D-Bus)
};

struct Command {
    const char* name;
    const char* synopsis;  // arguments, for --help
    const char* summary;   // one line, for --help
    int (*run)(const GlobalOptions& options, const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

}  // namespace nvshare::cli
