// How users name a client on the command line: its id (from status) or
// "pid:N" for every client of a process.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace nvshare::cli {

struct ClientRef {
    bool by_pid = false;
    uint64_t value = 0;  // client id, or pid
};

std::optional<ClientRef> parse_client_ref(std::string_view text);

}  // namespace nvshare::cli
