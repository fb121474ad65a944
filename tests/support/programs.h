// Paths of the programs under test, from the environment meson sets.
#pragma once

#include <string>

namespace nvshare::test {

// The value of an environment variable meson sets for the test; throws when
// it is missing (the test was not run through meson test).
std::string required_env(const char* name);

std::string nvshared_path();    // NVSHARED
std::string nvsharectl_path();  // NVSHARECTL
std::string testclient_path();  // NVSHARE_TESTCLIENT
// SYSTEMD_SOCKET_ACTIVATE; empty where systemd-socket-activate is missing.
std::string socket_activate_path();

}  // namespace nvshare::test
