#include "tests/support/programs.h"

#include <cstdlib>
#include <stdexcept>

namespace nvshare::test {

std::string required_env(const char* name)
{
    const char* value = getenv(name);
    if (value == nullptr || value[0] == '\0')
        throw std::runtime_error(std::string(name) + " is not set (run through meson test)");
    return value;
}

std::string nvshared_path()
{
    return required_env("NVSHARED");
}

std::string nvsharectl_path()
{
    return required_env("NVSHARECTL");
}

std::string testclient_path()
{
    return required_env("NVSHARE_TESTCLIENT");
}

std::string socket_activate_path()
{
    const char* value = getenv("SYSTEMD_SOCKET_ACTIVATE");
    return value != nullptr ? value : "";
}

}  // namespace nvshare::test
