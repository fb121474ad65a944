// nvshare-testclient's command line: what the scripted client should do.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/lock_client.h"

namespace nvshare::testclient {

struct Options {
    std::string socket_path;
    std::vector<GpuSpec> gpus;                          // --gpu, in Hello order
    std::vector<std::pair<uint32_t, uint64_t>> memory;  // --mem LOCAL_GPU=BYTES
    std::optional<uint64_t> mask;                       // --mask; default: every GPU
    unsigned cycles = 1;
    std::chrono::milliseconds hold{0};
    bool hold_until_stdin = false;  // hold until a line (or EOF) on stdin
    bool ignore_drop = false;
    // At the end of the first hold: exit without a Release, the connection
    // closing while the process exits, which ends this much later.
    std::optional<std::chrono::milliseconds> exit_slowly;
    std::string comm = "testclient";
    std::chrono::milliseconds timeout{20000};  // for each wait on the daemon
};

struct ParsedOptions {
    bool run = false;  // false: exit with exit_code
    int exit_code = 0;
    Options options;
};

ParsedOptions parse_options(int argc, char** argv);

}  // namespace nvshare::testclient
