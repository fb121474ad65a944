// The preload end-to-end tests' clients: test programs run under
// libnvshare.so against the fake libcuda.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace nvshare::test {

// Paths of the built artefacts, from the environment meson sets.
struct Paths {
    std::string library, fake_dir, client, client_dl;
    // What LD_PRELOAD names: the library, after the sanitizer runtime in a
    // sanitizer build (it must be loaded first).
    std::string preload;
    static const Paths& get();
};

// A test client under libnvshare.so and the fake driver.
struct ClientRun {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    bool dl_client = false;  // the build not linked with -lcuda
};
// env[kMeminfoText]: what /proc/meminfo says to the client (the host's
// memory as the swap engine reads it), from dir/NAME.meminfo bound over it
// in a private mount namespace (needs root); not passed on as a variable.
inline constexpr const char* kMeminfoText = "NVSHARE_TEST_MEMINFO_TEXT";
// Its stdout and stderr go to dir/NAME.out and dir/NAME.err, the fake's log
// to dir/fake.log. etc_ld_so_preload non-empty: the client runs in a private
// mount namespace whose /etc/ld.so.preload holds it (a tmpfs copy of /etc;
// needs root).
Process start_client(const TempDir& dir, const std::string& socket, const ClientRun& run,
                     const std::string& name, const std::string& etc_ld_so_preload = {});

// Expects `p` to exit with status 0 within `timeout` (else prints its output).
void expect_clean_exit(Process& p, std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A counter of nvshared's status summed over its clients (0 if unreachable).
uint64_t sum_over_clients(const nlohmann::json& status, const char* field);

// The number that follows `mark` on each line of `text` (a client's log)
// that holds it, and `also` where that is not empty, in order.
std::vector<uint64_t> numbers_after(const std::string& text, const std::string& mark,
                                    const std::string& also = "");

}  // namespace nvshare::test
