#include "daemon/principals_file.h"

#include <pwd.h>

#include <vector>

#include "daemon/files.h"
#include "daemon/log.h"

namespace nvshare::daemon {

namespace {

std::optional<uid_t> uid_of(const std::string& name)
{
    passwd pw{};
    passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr)
        return std::nullopt;
    return found->pw_uid;
}

}  // namespace

Principals load_principals(const char* path)
{
    std::string error;
    const auto text = read_file(path, &error);
    if (!text) {
        if (!error.empty())
            NVS_WARN("%s: %s; every uid counts as its own user", path, error.c_str());
        return {};
    }
    std::vector<std::string> problems;
    Principals p = Principals::parse(*text, uid_of, &problems);
    for (const std::string& why : problems)
        NVS_WARN("%s: %s", path, why.c_str());
    if (p.ranges() != 0)
        NVS_INFO("%zu subordinate uid range(s) from %s: each counts as its owner", p.ranges(),
                 path);
    return p;
}

}  // namespace nvshare::daemon
