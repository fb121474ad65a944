// Clients of another user: a child process that drops to a uid (the test
// runs as root), does what the test asks and reports a line at a time.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <string>

namespace nvshare::test {

// Runs `body` in a child process as `uid` (its groups and gid too); the
// child writes its findings to `report` and exits when `stop` reaches EOF
// (finish(), or destruction).
class AsUser {
public:
    AsUser(uid_t uid, const std::function<void(FILE* report, int stop)>& body);
    ~AsUser();
    AsUser(const AsUser&) = delete;
    AsUser& operator=(const AsUser&) = delete;
    // The child's next line of report ("" at EOF).
    std::string line();
    // Closes `stop` and waits for the child.
    void finish();

private:
    pid_t pid_ = -1;
    FILE* report_ = nullptr;
    int stop_ = -1;
};

// Blocks until the parent closes `stop`.
void wait_for_stop(int stop);

}  // namespace nvshare::test
