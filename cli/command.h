// One nvsharectl subcommand. Each lives in its own file and is listed in
// commands.cpp; main.cpp turns the table into CLI11 subcommands.
#pragma once

#include <string>
#include <vector>

namespace nvshare::cli {

// `nvsharectl cdi`'s options.
struct CdiOptions {
    std::string output;        // --output: the spec
    std::string socket_dir;    // --socket-dir: empty = the directory of --socket
    std::string library;       // --library: libnvshare.so
    std::string preload_file;  // --preload-file: mounted at /etc/ld.so.preload
    bool quiet = false;        // --quiet: print nothing but errors
};

struct GlobalOptions {
    bool json = false;        // --json: machine-readable output
    std::string socket_path;  // --socket: the lock socket (status without D-Bus)
    // status only:
    bool full = false;   // --full: whole commands, no column cut
    std::string query;   // --query=FIELDS: one row per client, these columns
    std::string format;  // --format=csv[,noheader]
    CdiOptions cdi;      // cdi only
    // set-tq, anti-thrashing and reset: --gpu, the GPU whose own setting
    // (index or UUID); empty: the host-wide one.
    std::string gpu;
};

// A positional argument of a command, in order; optional ones come last.
struct Argument {
    const char* name;  // e.g. "DURATION"
    const char* help;
    bool required;
};

struct Command {
    const char* name;
    const char* synopsis;  // arguments, for the command list of --help
    const char* summary;   // one line, for --help
    std::vector<Argument> arguments;
    int (*run)(const GlobalOptions& options, const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

}  // namespace nvshare::cli
