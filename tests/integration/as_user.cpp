#include "tests/integration/as_user.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace nvshare::test {

AsUser::AsUser(uid_t uid, const std::function<void(FILE* report, int stop)>& body)
{
    int report[2], stop[2];
    EXPECT_EQ(pipe(report), 0);
    EXPECT_EQ(pipe(stop), 0);
    pid_ = fork();
    if (pid_ == 0) {
        // Only its own two pipes: another AsUser's stop pipe held open here
        // would never reach EOF, and that child would never end.
        for (int fd = 3; fd < 1024; ++fd)
            if (fd != report[1] && fd != stop[0])
                close(fd);
        if (setgroups(0, nullptr) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
            _exit(99);
        FILE* out = fdopen(report[1], "w");
        setvbuf(out, nullptr, _IOLBF, 0);
        body(out, stop[0]);
        fclose(out);
        _exit(0);
    }
    close(report[1]);
    close(stop[0]);
    report_ = fdopen(report[0], "r");
    stop_ = stop[1];
}

AsUser::~AsUser()
{
    finish();
    if (report_ != nullptr)
        fclose(report_);
}

std::string AsUser::line()
{
    char buf[512];
    if (fgets(buf, sizeof buf, report_) == nullptr)
        return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n')
        s.pop_back();
    return s;
}

void AsUser::finish()
{
    if (stop_ >= 0) {
        close(stop_);
        stop_ = -1;
    }
    if (pid_ > 0) {
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
}

void wait_for_stop(int stop)
{
    char c;
    while (read(stop, &c, 1) > 0) {
    }
}

}  // namespace nvshare::test
