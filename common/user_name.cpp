#include "common/user_name.h"

#include <pwd.h>

namespace nvshare {

std::string user_name(uint32_t uid)
{
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
        return found->pw_name;
    return std::to_string(uid);
}

}  // namespace nvshare
